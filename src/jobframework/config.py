"""Kueue's ``config.kueue.x-k8s.io/v1beta2`` ``Configuration``, as Kueue v0.19.2 reads it.

Our manager and :func:`~jobframework.reconciler.setup_controllers` read the same document
Kueue's manager reads, so both sides agree on feature gates, ``waitForPodsReady``, which
jobs are managed and which frameworks exist:

- :func:`load_configuration` reads it from a file (Kueue's ``--config``);
  :func:`load_configuration_from_configmap` from Kueue's ConfigMap (``kueue-manager-config``
  in ``kueue-system``, key ``controller_manager_config.yaml``, as Kueue's
  ``config/components/manager`` kustomization generates it); :func:`parse_configuration`
  from a mapping or YAML text.
- Parsing is lossless (:class:`Configuration` keeps every field it does not know, and
  ``Configuration.from_dict(d).to_dict() == d``); the unknown fields are listed by
  :meth:`Configuration.unknown_fields` and logged once, as a warning, by the loaders.
  Kueue decodes strictly and would refuse them; a newer Kueue may add fields we do not
  model yet, so we keep going.
- The loaded configuration carries v0.19.2's defaults (``SetDefaults_Configuration``) and
  passed v0.19.2's validation for the fields our code uses; a bad value raises
  :class:`ConfigurationError` naming the field path
  (``waitForPodsReady.timeout: invalid duration "abc"``).
- :func:`reconciler_options_from` turns it into :class:`~jobframework.options.ReconcilerOptions`
  (as Kueue's ``cmd/kueue`` builds its ``jobframework.Option`` list).
- :func:`group_kind_concurrency_from` gives the workers per controller
  (``controller.groupKindConcurrency``) and :data:`MANAGER_CACHE_TRANSFORM` the cache
  transform, as Kueue's ``pkg/config`` turns the document into its manager's options.

The Kueue *version profile* (:class:`~jobframework.constants.KueueVersion`) is ours, not
Kueue's: it is passed beside the configuration, never read from it.
"""

from __future__ import annotations

import copy
import decimal
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path as FsPath
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Final

import attrs
import yaml
from pydantic import BeforeValidator, ValidationError

from .api.base import KueueModel
from .constants import (
    DEFAULT_KUEUE_VERSION,
    FeatureGate,
    FeatureGates,
    KueueVersion,
)
from .field import (
    ErrorList,
    Path,
    duplicate,
    forbidden,
    go_quote,
    invalid,
    not_supported,
    required,
)
from .options import ReconcilerOptionOverrides, ReconcilerOptions, WorkloadRetentionPolicy
from .runtime.builder import group_kind_key
from .runtime.cache import (
    TransformFunc,
    compose_transforms,
    intern_strings,
    strip_managed_fields,
)
from .runtime.objects import GVK
from .runtime.selectors import LabelSelector
from .validation import is_qualified_name, is_valid_label_value

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .metrics import LocalQueueMetricsConfig

log = logging.getLogger(__name__)

API_VERSION: Final = "config.kueue.x-k8s.io/v1beta2"
KIND: Final = "Configuration"
#: Where Kueue runs unless its Configuration says otherwise.
DEFAULT_NAMESPACE: Final = "kueue-system"
#: Kueue's ConfigMap: ``manager-config`` with the ``kueue-`` name prefix of
#: ``config/default`` (``configMapGenerator``, no hash suffix).
DEFAULT_CONFIGMAP_NAME: Final = "kueue-manager-config"
#: The ConfigMap key holding the Configuration document.
CONFIGMAP_KEY: Final = "controller_manager_config.yaml"
CONFIGMAP_GVK: Final = GVK("", "v1", "ConfigMap")

# v0.19.2's defaults (apis/config/v1beta2/defaults.go); durations as Go encodes them.
DEFAULT_WEBHOOK_PORT: Final = 9443
DEFAULT_WEBHOOK_CERT_DIR: Final = "/tmp/k8s-webhook-server/serving-certs"
DEFAULT_WEBHOOK_SERVICE_NAME: Final = "kueue-webhook-service"
DEFAULT_WEBHOOK_SECRET_NAME: Final = "kueue-webhook-server-cert"
DEFAULT_HEALTH_PROBE_BIND_ADDRESS: Final = ":8081"
DEFAULT_METRICS_BIND_ADDRESS: Final = ":8443"
DEFAULT_LEADER_ELECTION_ID: Final = "c1f6bfd2.kueue.x-k8s.io"
DEFAULT_CLIENT_CONNECTION_QPS: Final = 300.0
DEFAULT_CLIENT_CONNECTION_BURST: Final = 500
DEFAULT_JOB_FRAMEWORK_NAME: Final = "batch/job"
DEFAULT_WAIT_FOR_PODS_READY_TIMEOUT: Final = "30m0s"
DEFAULT_REQUEUING_TIMESTAMP: Final = "Eviction"
DEFAULT_REQUEUING_BACKOFF_BASE_SECONDS: Final = 60
DEFAULT_REQUEUING_BACKOFF_MAX_SECONDS: Final = 3600
DEFAULT_MULTIKUEUE_GC_INTERVAL: Final = "1m0s"
DEFAULT_MULTIKUEUE_ORIGIN: Final = "multikueue"
DEFAULT_MULTIKUEUE_WORKER_LOST_TIMEOUT: Final = "15m0s"
MULTIKUEUE_DISPATCHER_ALL_AT_ONCE: Final = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
MULTIKUEUE_DISPATCHER_INCREMENTAL: Final = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
DEFAULT_VISIBILITY_BIND_PORT: Final = 8082
DEFAULT_RESOURCE_TRANSFORMATION_STRATEGY: Final = "Retain"
#: ``corev1.LabelMetadataName``: every Namespace carries its name under this label.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
#: ``controller.groupKindConcurrency`` as Kueue v0.19.2 ships it
#: (``config/components/manager/controller_manager_config.yaml``; its code sets no
#: default): the workers of a controller by the ``Kind.group`` it reconciles.
KUEUE_GROUP_KIND_CONCURRENCY: Final[Mapping[str, int]] = MappingProxyType({
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 10,
    "LocalQueue.kueue.x-k8s.io": 5,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 5,
    "ResourceFlavor.kueue.x-k8s.io": 1,
})
#: Workers of an integrated job kind's controller when neither the Configuration nor
#: :data:`KUEUE_GROUP_KIND_CONCURRENCY` lists the kind: what Kueue ships for its own job
#: kinds (``Job.batch``, ``Pod``).
DEFAULT_JOB_KIND_CONCURRENCY: Final = 5
#: The cache transform of a manager beside Kueue: Kueue's manager strips ``managedFields``
#: from every object it caches, whatever its Configuration says (``pkg/config``'s
#: ``Cache.DefaultTransform``); ours also shares equal keys and short strings between
#: cached objects. A cached Job takes about a third of the memory, and each copy the
#: cache hands out is that much cheaper.
MANAGER_CACHE_TRANSFORM: Final[TransformFunc] = compose_transforms(
    strip_managed_fields, intern_strings)


# --- Go durations -------------------------------------------------------------------------

_DURATION_UNITS: Final = {
    "ns": decimal.Decimal("1e-9"), "us": decimal.Decimal("1e-6"),
    "\u00b5s": decimal.Decimal("1e-6"), "\u03bcs": decimal.Decimal("1e-6"),
    "ms": decimal.Decimal("1e-3"), "s": decimal.Decimal(1), "m": decimal.Decimal(60),
    "h": decimal.Decimal(3600),
}
_DURATION_SEGMENT: Final = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
# time.Duration is int64 nanoseconds: about 292 years.
_MAX_DURATION_SECONDS: Final = decimal.Decimal((1 << 63) - 1) / decimal.Decimal(10**9)


class DurationError(ValueError):
    """A string Go's ``time.ParseDuration`` rejects (message without Go's ``time:``)."""


def parse_go_duration(text: str) -> float:
    """Seconds from a Go duration string (``"5m"``, ``"1h30m"``, ``"1.5s"``, ``"-2s"``, ``"0"``).

    Follows ``time.ParseDuration``: units ``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``,
    ``h``; decimals and a sign allowed; ``"0"`` is the only value without a unit.
    Raises :class:`DurationError` (``invalid duration "abc"``, ``missing unit in duration
    "5"``, ``unknown unit "d" in duration "1d"``).
    """
    quoted = go_quote(text)
    s = text
    negative = s[:1] == "-"
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise DurationError(f"invalid duration {quoted}")
    total = decimal.Decimal(0)
    pos = 0
    while pos < len(s):
        m = _DURATION_SEGMENT.match(s, pos)
        assert m is not None  # every part of the pattern is optional
        whole, frac, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not frac:
            raise DurationError(f"invalid duration {quoted}")
        if not unit:
            raise DurationError(f"missing unit in duration {quoted}")
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            raise DurationError(f"unknown unit {go_quote(unit)} in duration {quoted}")
        total += decimal.Decimal(f"{whole or '0'}.{frac or '0'}") * scale
        pos = m.end()
    if total > _MAX_DURATION_SECONDS:
        raise DurationError(f"invalid duration {quoted}")
    return float(-total if negative else total)


def _duration_string(value: Any) -> Any:
    # metav1.Duration decodes from a JSON string only.
    if value is None:
        return None
    if not isinstance(value, str):
        raise DurationError(f"invalid duration {value!r}: must be a string such as \"5m\"")
    parse_go_duration(value)
    return value


#: A ``metav1.Duration`` as written in the document (validated, kept as given).
Duration = Annotated[str, BeforeValidator(_duration_string)]


def duration_seconds(value: str | None) -> float | None:
    """Seconds of a validated :data:`Duration` (None stays None)."""
    return None if value is None else parse_go_duration(value)


# --- the model ------------------------------------------------------------------------------


class ConfigModel(KueueModel):
    """Base of the Configuration models: lossless, strict, camelCase (see :class:`KueueModel`)."""


class LabelSelectorRequirement(ConfigModel):
    """``metav1.LabelSelectorRequirement``."""

    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelectorSpec(ConfigModel):
    """``metav1.LabelSelector`` as written in the document."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

    def selector(self) -> LabelSelector:
        """The runtime :class:`~jobframework.runtime.selectors.LabelSelector`."""
        return LabelSelector.from_dict(self.to_dict())


class ControllerWebhook(ConfigModel):
    """``webhook``: Kueue's own webhook server."""

    port: int | None = None
    host: str | None = None
    cert_dir: str | None = None


class LeaderElectionConfiguration(ConfigModel):
    """``leaderElection`` (component-base ``LeaderElectionConfiguration``)."""

    leader_elect: bool | None = None
    lease_duration: Duration | None = None
    renew_deadline: Duration | None = None
    retry_period: Duration | None = None
    resource_lock: str | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None


class ControllerMetricsCustomLabel(ConfigModel):
    """``metrics.customLabels[]``."""

    name: str | None = None
    source_label_key: str | None = None
    source_annotation_key: str | None = None
    source_kind: str | None = None
    tracked_values: list[str] | None = None


class LocalQueueMetrics(ConfigModel):
    """``metrics.localQueueMetrics``."""

    enable: bool | None = None
    local_queue_selector: LabelSelectorSpec | None = None


class ControllerMetrics(ConfigModel):
    """``metrics``."""

    bind_address: str | None = None
    enable_cluster_queue_resources: bool | None = None
    custom_labels: list[ControllerMetricsCustomLabel] | None = None
    local_queue_metrics: LocalQueueMetrics | None = None


class ControllerHealth(ConfigModel):
    """``health``."""

    health_probe_bind_address: str | None = None
    readiness_endpoint_name: str | None = None
    liveness_endpoint_name: str | None = None


class ControllerConfigurationSpec(ConfigModel):
    """``controller``."""

    group_kind_concurrency: dict[str, int] | None = None
    #: A ``time.Duration``: integer nanoseconds, not a string.
    cache_sync_timeout: int | None = None


class TLSOptions(ConfigModel):
    """``tls``."""

    min_version: str | None = None
    cipher_suites: list[str] | None = None
    curve_preferences: list[int] | None = None


class InternalCertManagement(ConfigModel):
    """``internalCertManagement``."""

    enable: bool | None = None
    webhook_service_name: str | None = None
    webhook_secret_name: str | None = None


class RequeuingStrategy(ConfigModel):
    """``waitForPodsReady.requeuingStrategy``."""

    timestamp: str | None = None
    backoff_limit_count: int | None = None
    backoff_base_seconds: int | None = None
    backoff_max_seconds: int | None = None


class WaitForPodsReady(ConfigModel):
    """``waitForPodsReady``: in v1beta2 its presence enables it, and v0.19.2's defaulting
    always adds it (only the ``DisableWaitForPodsReady`` gate turns it off)."""

    timeout: Duration | None = None
    block_admission: bool | None = None
    requeuing_strategy: RequeuingStrategy | None = None
    recovery_timeout: Duration | None = None

    @property
    def timeout_seconds(self) -> float | None:
        """``timeout`` in seconds."""
        return duration_seconds(self.timeout)

    @property
    def recovery_timeout_seconds(self) -> float | None:
        """``recoveryTimeout`` in seconds (0 disables the recovery check)."""
        return duration_seconds(self.recovery_timeout)


class ClientConnection(ConfigModel):
    """``clientConnection``."""

    qps: int | float | None = None
    burst: int | None = None


class Integrations(ConfigModel):
    """``integrations``."""

    frameworks: list[str] | None = None
    external_frameworks: list[str] | None = None
    label_keys_to_copy: list[str] | None = None


class MultiKueueExternalFramework(ConfigModel):
    """``multiKueue.externalFrameworks[]``."""

    name: str | None = None


class ExecEnvVar(ConfigModel):
    """``execConfig.env[]``."""

    name: str | None = None
    value: str | None = None


class ExecConfig(ConfigModel):
    """client-go ``ExecConfig`` of a ClusterProfile provider."""

    command: str | None = None
    args: list[str] | None = None
    env: list[ExecEnvVar] | None = None
    api_version: str | None = None
    install_hint: str | None = None
    provide_cluster_info: bool | None = None
    interactive_mode: str | None = None


class ClusterProfileAccessProvider(ConfigModel):
    """``multiKueue.clusterProfile.accessProviders[]``."""

    name: str | None = None
    exec_config: ExecConfig | None = None


class ClusterProfile(ConfigModel):
    """``multiKueue.clusterProfile``."""

    access_providers: list[ClusterProfileAccessProvider] | None = None
    credentials_providers: list[ClusterProfileAccessProvider] | None = None


class IncrementalDispatcherConfig(ConfigModel):
    """``multiKueue.incrementalDispatcherConfig``."""

    step_size: int | None = None


class MultiKueue(ConfigModel):
    """``multiKueue``."""

    gc_interval: Duration | None = None
    origin: str | None = None
    worker_lost_timeout: Duration | None = None
    dispatcher_name: str | None = None
    external_frameworks: list[MultiKueueExternalFramework] | None = None
    cluster_profile: ClusterProfile | None = None
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None


class FairSharing(ConfigModel):
    """``fairSharing``."""

    preemption_strategies: list[str] | None = None


class AdmissionFairSharing(ConfigModel):
    """``admissionFairSharing``."""

    usage_half_life_time: Duration | None = None
    usage_sampling_interval: Duration | None = None
    resource_weights: dict[str, int | float] | None = None


class ResourceTransformation(ConfigModel):
    """``resources.transformations[]``."""

    input: str | None = None
    strategy: str | None = None
    multiply_by: str | None = None
    outputs: dict[str, str | int | float] | None = None


class CELDeviceSelector(ConfigModel):
    """``deviceSelector.cel``."""

    expression: str | None = None


class DeviceSelector(ConfigModel):
    """resource/v1 ``DeviceSelector``."""

    cel: CELDeviceSelector | None = None


class DeviceClassSource(ConfigModel):
    """A counter or capacity source of a device class mapping."""

    name: str | None = None
    driver: str | None = None
    device_selector: DeviceSelector | None = None


class DeviceClassSourceConfig(ConfigModel):
    """``resources.deviceClassMappings[].sources[]``."""

    counter: DeviceClassSource | None = None
    capacity: DeviceClassSource | None = None


class DeviceClassMapping(ConfigModel):
    """``resources.deviceClassMappings[]``."""

    name: str | None = None
    device_class_names: list[str] | None = None
    sources: list[DeviceClassSourceConfig] | None = None


class Resources(ConfigModel):
    """``resources``."""

    quota_check_strategy: str | None = None
    exclude_resource_prefixes: list[str] | None = None
    transformations: list[ResourceTransformation] | None = None
    device_class_mappings: list[DeviceClassMapping] | None = None


class WorkloadRetentionPolicySpec(ConfigModel):
    """``objectRetentionPolicies.workloads``."""

    after_finished: Duration | None = None
    after_deactivated_by_kueue: Duration | None = None

    @property
    def after_finished_seconds(self) -> float | None:
        """``afterFinished`` in seconds (None: keep forever)."""
        return duration_seconds(self.after_finished)

    @property
    def after_deactivated_by_kueue_seconds(self) -> float | None:
        """``afterDeactivatedByKueue`` in seconds (None: keep forever)."""
        return duration_seconds(self.after_deactivated_by_kueue)


class ObjectRetentionPolicies(ConfigModel):
    """``objectRetentionPolicies``."""

    workloads: WorkloadRetentionPolicySpec | None = None


class VisibilityServerConfiguration(ConfigModel):
    """``visibilityServer``."""

    bind_address: str | None = None
    bind_port: int | None = None


class Configuration(ConfigModel):
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``), every v0.19.2 field.

    ``from_dict`` keeps exactly the given document (unknown fields included);
    :func:`parse_configuration` and the loaders return it defaulted and validated.
    """

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    # ControllerManager, inlined.
    webhook: ControllerWebhook | None = None
    leader_election: LeaderElectionConfiguration | None = None
    metrics: ControllerMetrics | None = None
    health: ControllerHealth | None = None
    pprof_bind_address: str | None = None
    controller: ControllerConfigurationSpec | None = None
    tls: TLSOptions | None = None
    manage_jobs_without_queue_name: bool | None = None
    managed_jobs_namespace_selector: LabelSelectorSpec | None = None
    internal_cert_management: InternalCertManagement | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    client_connection: ClientConnection | None = None
    integrations: Integrations | None = None
    multi_kueue: MultiKueue | None = None
    fair_sharing: FairSharing | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None
    resources: Resources | None = None
    feature_gates: dict[str, bool] | None = None
    object_retention_policies: ObjectRetentionPolicies | None = None
    visibility_server: VisibilityServerConfiguration | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Configuration:
        """Validate a document by its JSON names only (Go's decoder ignores Python names)."""
        cfg = cls.model_validate(data, by_alias=True, by_name=False)
        _drop_shadowed_fields(cfg)
        return cfg

    def unknown_fields(self) -> list[str]:
        """Paths of the fields v0.19.2's schema does not have (kept, not applied), plus
        feature gates Kueue v0.19.2 does not define (``featureGates[Name]``)."""
        out = _unknown_fields(self, "")
        for name in self.feature_gates or {}:
            if name not in KUEUE_FEATURE_GATES and name not in _ALL_GATES:
                out.append(f"featureGates[{name}]")
        return out

    def frameworks(self) -> list[str]:
        """``integrations.frameworks`` (empty when unset)."""
        return list((self.integrations.frameworks if self.integrations else None) or [])

    def external_frameworks(self) -> list[str]:
        """``integrations.externalFrameworks`` (empty when unset)."""
        return list((self.integrations.external_frameworks if self.integrations else None)
                    or [])

    def feature_gate_enabled(self, name: str) -> bool:
        """A Kueue v0.19.2 gate's value under this configuration (its ``featureGates``
        entry, else ``AllAlpha``/``AllBeta`` for its stage, else v0.19.2's default)."""
        gates = self.feature_gates or {}
        if name in gates:
            return gates[name]
        spec = KUEUE_FEATURE_GATES[name]
        if spec.locked:
            return spec.default
        if spec.stage == "Alpha" and "AllAlpha" in gates:
            return gates["AllAlpha"]
        if spec.stage == "Beta" and "AllBeta" in gates:
            return gates["AllBeta"]
        return spec.default

    def wait_for_pods_ready_enabled(self) -> bool:
        """Kueue's ``waitforpodsready.Enabled``: configured and not disabled by the gate."""
        return (self.wait_for_pods_ready is not None
                and not self.feature_gate_enabled("DisableWaitForPodsReady"))

    def features(self, version: KueueVersion | str = DEFAULT_KUEUE_VERSION) -> FeatureGates:
        """The gates our code knows (:class:`~jobframework.constants.FeatureGate`), as set
        by this configuration, over ``version``'s defaults.

        Only gates the document sets (directly or via ``AllAlpha``/``AllBeta``) become
        overrides, so the version profile still decides the others.
        """
        gates = self.feature_gates or {}
        overrides: dict[FeatureGate | str, bool] = {}
        for gate in FeatureGate:
            spec = KUEUE_FEATURE_GATES.get(gate.value)
            if gate.value in gates:
                overrides[gate] = gates[gate.value]
            elif spec is not None and not spec.locked and (
                    (spec.stage == "Alpha" and "AllAlpha" in gates)
                    or (spec.stage == "Beta" and "AllBeta" in gates)):
                overrides[gate] = self.feature_gate_enabled(gate.value)
        return FeatureGates(overrides, version=version)


def _drop_shadowed_fields(value: Any) -> None:
    # An unknown key spelt like a Python field name (``manage_jobs_without_queue_name``)
    # lands in the extras, but pydantic also counts that name as set, which would dump
    # the field (as None) under its JSON name: unmark it.
    if isinstance(value, ConfigModel):
        fields = type(value).model_fields
        for key in value.model_extra or {}:
            if key in fields and getattr(value, key) is None:
                value.__pydantic_fields_set__.discard(key)
        for name in fields:
            _drop_shadowed_fields(getattr(value, name))
    elif isinstance(value, list):
        for item in value:
            _drop_shadowed_fields(item)
    elif isinstance(value, dict):
        for item in value.values():
            _drop_shadowed_fields(item)


def _unknown_fields(value: Any, path: str) -> list[str]:
    out: list[str] = []
    if isinstance(value, ConfigModel):
        for key in value.model_extra or {}:
            out.append(f"{path}.{key}" if path else key)
        for name, info in type(value).model_fields.items():
            child = getattr(value, name)
            if child is not None:
                alias = info.alias or name
                out.extend(_unknown_fields(child, f"{path}.{alias}" if path else alias))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_unknown_fields(item, f"{path}[{i}]"))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.extend(_unknown_fields(item, f"{path}[{key}]"))
    return out


# --- what v0.19.2 knows ----------------------------------------------------------------------


@attrs.frozen
class GateSpec:
    """A Kueue feature gate in v0.19.2: its default, stage and whether it is locked."""

    default: bool
    stage: str
    locked: bool = False


def _gates(stage: str, default: bool, names: str, *, locked: bool = False
           ) -> dict[str, GateSpec]:
    return {n: GateSpec(default, stage, locked) for n in names.split()}


#: Every gate of v0.19.2's ``pkg/features/kube_features.go``, with the spec that applies
#: to v0.19 (the newest one of each gate).
KUEUE_FEATURE_GATES: Final[Mapping[str, GateSpec]] = {
    **_gates("Beta", True, """
        PartialAdmission FlavorFungibility VisibilityOnDemand PrioritySortingWithinCohort
        FairSharingPreemptWithinNominal FairSharingPrioritizeNonBorrowing MultiKueue
        TopologyAwareScheduling LocalQueueMetrics TASProfileMixed AdmissionFairSharing
        TASFailedNodeReplacement ElasticJobsViaWorkloadSlices TASFailedNodeReplacementFailFast
        TASReplaceNodeOnPodTermination SkipReassignmentForPodOwnedWorkloads
        TASAssignmentsEncodingByHostnamePrefix KueueDRAIntegration
        KueueDRAIntegrationExtendedResource KueueDRARejectWorkloadsWhenDRADisabled
        KueueDRAIntegrationPartitionableDevices MultiKueueAdaptersForCustomJobs ReclaimablePods
        TLSOptions RemoveFinalizersWithStrictPatch TASReplaceNodeOnNodeTaints
        AssignQueueLabelsForPods TASMultiLayerTopology SchedulingEquivalenceHashing
        AdmissionGatedBy FinishOrphanedWorkloads MultiKueueIncrementalDispatcherConfig
        MultiKueueIncrementalDispatcherRespectConfigOrder QuotaCheckStrategy
        MetricForWorkloadCreationLatency WorkloadIdentifierAnnotations MetricsForCohorts
        CleanupProvisioningRequestsOnEviction TASHandleOverlappingFlavors
        TASRecomputeAssignmentWithinSchedulingCycle DeferRayServiceFinalizationForRedisCleanup
        TASCacheNodeMatchResults TASCachingRemainingResources VectorizedResourceRequests
        WorkloadValidateResourcesAreNonNegative TASValidateWorkloadSliceSize
        WorkloadValidationForPodSetMetadata LWSImmutableGroupSize
        FlavorFungibilityPreserveScanProgress SkipAncestorCheckForDeletedWorkloads
        MultiKueueRemoteSpecSync PodIntegrationValidateGroupOwner ValidateRayAndSparkJobUpdates
    """),
    **_gates("Beta", False, """
        UnadmittedWorkloadsObservability UnadmittedWorkloadsExplicitStatus
    """),
    **_gates("Alpha", False, """
        DisableWaitForPodsReady ElasticJobsViaWorkloadSlicesWithTAS TASBalancedPlacement
        KueueDRAIntegrationConsumableCapacity WorkloadRequestUseMergePatch
        MultiKueueKubeConfigPathValidation MultiKueueClusterProfile FailureRecoveryPolicy
        SchedulerLongRequeueInterval SchedulerTimestampPreemptionBuffer CustomMetricLabels
        SparkApplicationIntegration MultiKueueOrchestratedPreemption PriorityBoost
        ShortWorkloadNames FastQuotaReleaseInPodIntegration RejectUpdatesToCQWithInvalidOnFlavors
        ConcurrentAdmission TASRespectNodeAffinityPreferred MultiKueueManagerQuotaAutomation
        WorkloadPriorityClassDefaulting TASCacheTopologyTree SchedulerLibraryIntegration
        PrioritizePreemptorWorkloads RecomputeAssignmentUponPreemptionTargetsOverlap
    """),
    **_gates("Deprecated", False, "TASReplaceNodeDueToNotReadyOverFixedTime"),
    **_gates("Deprecated", False, "MultiKueueAllowInsecureKubeconfigs", locked=True),
    **_gates("GA", True, """
        HierarchicalCohorts ObjectRetentionPolicies ManagedJobsNamespaceSelectorAlwaysRespected
        PropagateBatchJobLabelsToWorkload SkipFinalizersForPodsSuspendedByParent
        MultiKueueWaitForWorkloadAdmitted MultiKueueRedoAdmissionOnEvictionInWorker
    """, locked=True),
}
_ALL_GATES: Final = ("AllAlpha", "AllBeta")

# LoadAndValidateFeatureGates: a gate has no effect unless these are enabled too.
_GATE_DEPENDENCIES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("TASHandleOverlappingFlavors", ("TopologyAwareScheduling",)),
    ("TASFailedNodeReplacement", ("TopologyAwareScheduling",)),
    ("TASFailedNodeReplacementFailFast", ("TopologyAwareScheduling", "TASFailedNodeReplacement")),
    ("TASReplaceNodeOnPodTermination", ("TopologyAwareScheduling", "TASFailedNodeReplacement")),
    ("TASReplaceNodeDueToNotReadyOverFixedTime",
     ("TopologyAwareScheduling", "TASFailedNodeReplacement")),
    ("TASBalancedPlacement", ("TopologyAwareScheduling",)),
    ("TASReplaceNodeOnNodeTaints", ("TopologyAwareScheduling",)),
    ("TASMultiLayerTopology", ("TopologyAwareScheduling",)),
    ("TASRespectNodeAffinityPreferred", ("TopologyAwareScheduling",)),
    ("TASRecomputeAssignmentWithinSchedulingCycle", ("TopologyAwareScheduling",)),
    ("UnadmittedWorkloadsExplicitStatus", ("UnadmittedWorkloadsObservability",)),
    ("ElasticJobsViaWorkloadSlicesWithTAS",
     ("ElasticJobsViaWorkloadSlices", "TopologyAwareScheduling")),
    ("KueueDRAIntegrationExtendedResource", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationPartitionableDevices", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationConsumableCapacity", ("KueueDRAIntegration",)),
)

#: v0.19.2's built-in frameworks (``integrations.frameworks``) and the kind of each.
BUILTIN_FRAMEWORKS: Final[Mapping[str, GVK]] = {
    "batch/job": GVK("batch", "v1", "Job"),
    "kubeflow.org/mpijob": GVK("kubeflow.org", "v2beta1", "MPIJob"),
    "ray.io/rayjob": GVK("ray.io", "v1", "RayJob"),
    "ray.io/raycluster": GVK("ray.io", "v1", "RayCluster"),
    "ray.io/rayservice": GVK("ray.io", "v1", "RayService"),
    "jobset.x-k8s.io/jobset": GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"),
    "kubeflow.org/paddlejob": GVK("kubeflow.org", "v1", "PaddleJob"),
    "kubeflow.org/pytorchjob": GVK("kubeflow.org", "v1", "PyTorchJob"),
    "kubeflow.org/tfjob": GVK("kubeflow.org", "v1", "TFJob"),
    "kubeflow.org/xgboostjob": GVK("kubeflow.org", "v1", "XGBoostJob"),
    "kubeflow.org/jaxjob": GVK("kubeflow.org", "v1", "JAXJob"),
    "trainer.kubeflow.org/trainjob": GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
    "workload.codeflare.dev/appwrapper": GVK("workload.codeflare.dev", "v1beta2", "AppWrapper"),
    "sparkoperator.k8s.io/sparkapplication": GVK("sparkoperator.k8s.io", "v1beta2",
                                                 "SparkApplication"),
    "pod": GVK("", "v1", "Pod"),
    "deployment": GVK("apps", "v1", "Deployment"),
    "statefulset": GVK("apps", "v1", "StatefulSet"),
    "leaderworkerset.x-k8s.io/leaderworkerset": GVK("leaderworkerset.x-k8s.io", "v1",
                                                    "LeaderWorkerSet"),
}


# --- errors ---------------------------------------------------------------------------------


class ConfigurationError(ValueError):
    """A Configuration Kueue v0.19.2 would not start with; :attr:`errors` name field paths."""

    def __init__(self, errors: Sequence[str], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        where = f" ({source})" if source else ""
        super().__init__(f"invalid Kueue Configuration{where}: " + "; ".join(self.errors))


def _loc_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue
        elif out.split(".")[-1] in _MAP_FIELDS:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_MAP_FIELDS: Final = frozenset({"featureGates", "groupKindConcurrency", "resourceWeights",
                                "matchLabels", "outputs"})


def _decode_errors(err: ValidationError) -> list[str]:
    out: list[str] = []
    for e in err.errors():
        path = _loc_path(e["loc"]) or "(document)"
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, DurationError):
            out.append(f"{path}: {cause}")
        else:
            out.append(f"{path}: {e['msg'].lower()}, got {e['input']!r}")
    return out


# --- defaults -------------------------------------------------------------------------------


def set_defaults(config: Configuration, *, namespace: str = DEFAULT_NAMESPACE) -> Configuration:
    """A copy with v0.19.2's defaults (``SetDefaults_Configuration``) filled in.

    ``namespace`` stands for where Kueue runs when the document does not say: Kueue reads
    its pod's service-account namespace, which our process does not share, so callers pass
    the ConfigMap's namespace (or keep ``kueue-system``). Unknown fields are kept.
    """
    cfg = config.model_copy(deep=True)
    cfg.namespace = cfg.namespace or namespace
    if cfg.manage_jobs_without_queue_name is None:
        cfg.manage_jobs_without_queue_name = False
    cfg.webhook = cfg.webhook or ControllerWebhook()
    if cfg.webhook.port is None:
        cfg.webhook.port = DEFAULT_WEBHOOK_PORT
    cfg.webhook.cert_dir = cfg.webhook.cert_dir or DEFAULT_WEBHOOK_CERT_DIR
    cfg.metrics = cfg.metrics or ControllerMetrics()
    cfg.metrics.bind_address = cfg.metrics.bind_address or DEFAULT_METRICS_BIND_ADDRESS
    cfg.health = cfg.health or ControllerHealth()
    cfg.health.health_probe_bind_address = (cfg.health.health_probe_bind_address
                                            or DEFAULT_HEALTH_PROBE_BIND_ADDRESS)
    le = cfg.leader_election = cfg.leader_election or LeaderElectionConfiguration()
    le.resource_name = le.resource_name or DEFAULT_LEADER_ELECTION_ID
    if cfg.metrics.local_queue_metrics is None:
        cfg.metrics.local_queue_metrics = LocalQueueMetrics(enable=True)
    le.resource_lock = le.resource_lock or "leases"
    # component-base's RecommendedDefaultLeaderElectionConfiguration.
    if le.leader_elect is None:
        le.leader_elect = True
    if not duration_seconds(le.lease_duration):
        le.lease_duration = "15s"
    if not duration_seconds(le.renew_deadline):
        le.renew_deadline = "10s"
    if not duration_seconds(le.retry_period):
        le.retry_period = "2s"
    icm = cfg.internal_cert_management = cfg.internal_cert_management or InternalCertManagement()
    if icm.enable is None:
        icm.enable = True
    if icm.enable:
        if icm.webhook_service_name is None:
            icm.webhook_service_name = DEFAULT_WEBHOOK_SERVICE_NAME
        if icm.webhook_secret_name is None:
            icm.webhook_secret_name = DEFAULT_WEBHOOK_SECRET_NAME
    cc = cfg.client_connection = cfg.client_connection or ClientConnection()
    if cc.qps is None:
        cc.qps = DEFAULT_CLIENT_CONNECTION_QPS
    if cc.burst is None:
        cc.burst = DEFAULT_CLIENT_CONNECTION_BURST
    wfpr = cfg.wait_for_pods_ready = cfg.wait_for_pods_ready or WaitForPodsReady()
    if not duration_seconds(wfpr.timeout):
        wfpr.timeout = DEFAULT_WAIT_FOR_PODS_READY_TIMEOUT
    if wfpr.block_admission is None:
        wfpr.block_admission = False
    if wfpr.recovery_timeout is None:
        wfpr.recovery_timeout = wfpr.timeout
    rs = wfpr.requeuing_strategy = wfpr.requeuing_strategy or RequeuingStrategy()
    rs.timestamp = rs.timestamp or DEFAULT_REQUEUING_TIMESTAMP
    if rs.backoff_base_seconds is None:
        rs.backoff_base_seconds = DEFAULT_REQUEUING_BACKOFF_BASE_SECONDS
    if rs.backoff_max_seconds is None:
        rs.backoff_max_seconds = DEFAULT_REQUEUING_BACKOFF_MAX_SECONDS
    integrations = cfg.integrations = cfg.integrations or Integrations()
    if not integrations.frameworks:
        integrations.frameworks = [DEFAULT_JOB_FRAMEWORK_NAME]
    if cfg.managed_jobs_namespace_selector is None:
        cfg.managed_jobs_namespace_selector = LabelSelectorSpec(match_expressions=[
            LabelSelectorRequirement(key=NAMESPACE_NAME_LABEL, operator="NotIn",
                                     values=["kube-system", cfg.namespace])])
    mk = cfg.multi_kueue = cfg.multi_kueue or MultiKueue()
    if mk.gc_interval is None:
        mk.gc_interval = DEFAULT_MULTIKUEUE_GC_INTERVAL
    mk.origin = mk.origin or DEFAULT_MULTIKUEUE_ORIGIN
    if mk.worker_lost_timeout is None:
        mk.worker_lost_timeout = DEFAULT_MULTIKUEUE_WORKER_LOST_TIMEOUT
    if mk.dispatcher_name is None:
        mk.dispatcher_name = MULTIKUEUE_DISPATCHER_ALL_AT_ONCE
    if mk.dispatcher_name == MULTIKUEUE_DISPATCHER_INCREMENTAL:
        idc = mk.incremental_dispatcher_config = (mk.incremental_dispatcher_config
                                                  or IncrementalDispatcherConfig())
        if idc.step_size is None:
            idc.step_size = 3
    afs = cfg.admission_fair_sharing
    if afs is not None and not duration_seconds(afs.usage_sampling_interval):
        afs.usage_sampling_interval = "5m0s"
    vs = cfg.visibility_server = cfg.visibility_server or VisibilityServerConfiguration()
    if vs.bind_port is None:
        vs.bind_port = DEFAULT_VISIBILITY_BIND_PORT
    if cfg.resources is not None:
        for t in cfg.resources.transformations or []:
            t.strategy = t.strategy or DEFAULT_RESOURCE_TRANSFORMATION_STRATEGY
    return cfg


# --- validation -----------------------------------------------------------------------------


def _validate_feature_gates(cfg: Configuration) -> ErrorList:
    errs = ErrorList()
    path = Path.new("featureGates")
    gates = cfg.feature_gates or {}
    for name, value in gates.items():
        spec = KUEUE_FEATURE_GATES.get(name)
        if spec is not None and spec.locked and value != spec.default:
            errs.append(invalid(path, gates, (
                f"cannot set feature gate {name} to {str(value).lower()}, feature is locked "
                f"to {str(spec.default).lower()}")))
    if errs:
        return errs
    enabled = cfg.feature_gate_enabled
    if enabled("TASProfileMixed") and not enabled("TopologyAwareScheduling"):
        errs.append(invalid(path, 1, "cannot use a TAS profile with TAS disabled"))
    for gate, deps in _GATE_DEPENDENCIES:
        if enabled(gate):
            errs.extend(invalid(path, gate, f"{gate} requires {dep} to be enabled")
                        for dep in deps if not enabled(dep))
    return errs


def _validate_wait_for_pods_ready(cfg: Configuration) -> ErrorList:
    errs = ErrorList()
    wfpr = cfg.wait_for_pods_ready
    if wfpr is None or not cfg.wait_for_pods_ready_enabled():
        return errs
    path = Path.new("waitForPodsReady")
    negative = "must be greater than or equal to 0"
    timeout = wfpr.timeout_seconds or 0.0
    if timeout == 0:
        errs.append(required(path.child("timeout"), "must be specified"))
    if timeout < 0:
        errs.append(invalid(path.child("timeout"), wfpr.timeout, negative))
    if (wfpr.recovery_timeout_seconds or 0.0) < 0:
        errs.append(invalid(path.child("recoveryTimeout"), wfpr.recovery_timeout, negative))
    rs = wfpr.requeuing_strategy
    if rs is not None:
        rs_path = path.child("requeuingStrategy")
        if rs.timestamp is not None and rs.timestamp not in ("Creation", "Eviction"):
            errs.append(not_supported(rs_path.child("timestamp"), rs.timestamp,
                                      ["Creation", "Eviction"]))
        for name, value in (("backoffLimitCount", rs.backoff_limit_count),
                            ("backoffBaseSeconds", rs.backoff_base_seconds),
                            ("backoffMaxSeconds", rs.backoff_max_seconds)):
            if value is not None and value < 0:
                errs.append(invalid(rs_path.child(name), value, negative))
    return errs


def parse_kind_arg(arg: str) -> GVK | None:
    """``schema.ParseKindArg``'s GVK: ``Kind.version.group`` (at least two dots), else None."""
    if arg.count(".") < 2:
        return None
    kind, version, group = arg.split(".", 2)
    return GVK(group, version, kind)


def _validate_integrations(cfg: Configuration) -> ErrorList:
    errs = ErrorList()
    path = Path.new("integrations")
    if cfg.integrations is None:
        return ErrorList([required(path, "cannot be empty")])
    if cfg.integrations.frameworks is None:
        return ErrorList([required(path.child("frameworks"), "cannot be empty")])
    managed: set[GVK] = set()
    for i, name in enumerate(cfg.integrations.frameworks):
        gvk = BUILTIN_FRAMEWORKS.get(name)
        if gvk is None:
            errs.append(not_supported(path.child("frameworks").index_(i), name,
                                      sorted(BUILTIN_FRAMEWORKS)))
        elif gvk in managed:
            errs.append(duplicate(path.child("frameworks").index_(i), name))
        else:
            managed.add(gvk)
    for i, name in enumerate(cfg.integrations.external_frameworks or []):
        ext = parse_kind_arg(name)
        if ext is None:
            errs.append(invalid(path.child("externalFrameworks").index_(i), name,
                                "must be format, 'Kind.version.group.com'"))
        elif ext in managed:
            errs.append(duplicate(path.child("externalFrameworks").index_(i), name))
        else:
            managed.add(ext)
    for i, key in enumerate(cfg.integrations.label_keys_to_copy or []):
        errs.extend(invalid(path.child("labelKeysToCopy").index_(i), key, m)
                    for m in is_qualified_name(key))
    return errs


def validate_label_selector(spec: LabelSelectorSpec, path: Path) -> ErrorList:
    """apimachinery's ``ValidateLabelSelector`` (label values must be valid)."""
    errs = ErrorList()
    for i, req in enumerate(spec.match_expressions or []):
        p = path.child("matchExpressions").index_(i)
        values = req.values or []
        if req.operator in ("In", "NotIn"):
            if not values:
                errs.append(required(p.child("values"),
                                     "must be specified when `operator` is 'In' or 'NotIn'"))
        elif req.operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(
                    p.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(p.child("operator"), req.operator or "",
                                "not a valid selector operator"))
        errs.extend(invalid(p.child("key"), req.key or "", m)
                    for m in is_qualified_name(req.key or ""))
        for j, v in enumerate(values):
            errs.extend(invalid(p.child("values").index_(j), v, m)
                        for m in is_valid_label_value(v))
    for key, value in (spec.match_labels or {}).items():
        p = path.child("matchLabels")
        errs.extend(invalid(p, key, m) for m in is_qualified_name(key))
        errs.extend(invalid(p, value, m) for m in is_valid_label_value(value))
    return errs


def _validate_managed_jobs_namespace_selector(cfg: Configuration) -> ErrorList:
    path = Path.new("managedJobsNamespaceSelector")
    spec = cfg.managed_jobs_namespace_selector
    if spec is None:
        if "pod" in cfg.frameworks():
            return ErrorList([required(path, "cannot be empty when pod integration is "
                                             "enabled")])
        return ErrorList()
    errs = validate_label_selector(spec, path)
    if errs:
        return errs
    selector = spec.selector()
    # Kueue must never manage its own namespace nor kube-system.
    for ns in ("kube-system", *([cfg.namespace] if cfg.namespace else [])):
        if selector.matches({NAMESPACE_NAME_LABEL: ns}):
            errs.append(invalid(path, spec.to_dict(), f"should not match the {go_quote(ns)} "
                                                      "namespace"))
    return errs


def _validate_object_retention_policies(cfg: Configuration) -> ErrorList:
    errs = ErrorList()
    orp = cfg.object_retention_policies
    if orp is None or orp.workloads is None:
        return errs
    path = Path.new("objectRetentionPolicies", "workloads")
    for name, text in (("afterFinished", orp.workloads.after_finished),
                       ("afterDeactivatedByKueue", orp.workloads.after_deactivated_by_kueue)):
        if (duration_seconds(text) or 0.0) < 0:
            errs.append(invalid(path.child(name), text, "must be greater than or equal to 0"))
    return errs


def validate_configuration(cfg: Configuration) -> list[str]:
    """v0.19.2's checks (``LoadAndValidateFeatureGates`` + ``Validate``) for the fields our
    code applies: feature gates, ``waitForPodsReady``, ``integrations``,
    ``managedJobsNamespaceSelector`` and ``objectRetentionPolicies``. Messages as Kueue's."""
    errs = ErrorList()
    if cfg.api_version != API_VERSION:
        errs.append(not_supported(Path.new("apiVersion"), cfg.api_version or "", [API_VERSION]))
    if cfg.kind != KIND:
        errs.append(not_supported(Path.new("kind"), cfg.kind or "", [KIND]))
    errs.extend(_validate_feature_gates(cfg))
    errs.extend(_validate_wait_for_pods_ready(cfg))
    errs.extend(_validate_integrations(cfg))
    errs.extend(_validate_managed_jobs_namespace_selector(cfg))
    errs.extend(_validate_object_retention_policies(cfg))
    return [str(e) for e in errs]


# --- loading --------------------------------------------------------------------------------


def parse_configuration(
    data: Mapping[str, Any] | str | bytes, *, namespace: str = DEFAULT_NAMESPACE,
    source: str = "",
) -> Configuration:
    """Decode, default and validate a Configuration (a mapping, or YAML/JSON text).

    Raises :class:`ConfigurationError` naming every bad field path. The result carries
    v0.19.2's defaults and keeps unknown fields (see :meth:`Configuration.unknown_fields`).
    """
    if isinstance(data, (str, bytes)):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as err:
            raise ConfigurationError([f"not valid YAML: {err}"], source) from err
    if not isinstance(data, Mapping):
        raise ConfigurationError(["the document must be a mapping (a Configuration object)"],
                                 source)
    try:
        raw = Configuration.from_dict(copy.deepcopy(dict(data)))
    except ValidationError as err:
        raise ConfigurationError(_decode_errors(err), source) from err
    cfg = set_defaults(raw, namespace=namespace)
    errors = validate_configuration(cfg)
    if errors:
        raise ConfigurationError(errors, source)
    return cfg


def warn_unknown_fields(cfg: Configuration, source: str = "") -> list[str]:
    """Log the unknown fields of ``cfg`` once, as one warning; returns their paths."""
    unknown = cfg.unknown_fields()
    if unknown:
        log.warning("Kueue Configuration%s has fields Kueue v0.19.2 does not define; kept, "
                    "not applied: %s", f" ({source})" if source else "", ", ".join(unknown))
    return unknown


def load_configuration(path: str | FsPath, *, namespace: str = DEFAULT_NAMESPACE
                       ) -> Configuration:
    """Read Kueue's Configuration from a file (what Kueue's ``--config`` points at).

    ``namespace`` is the default of the document's ``namespace`` (Kueue's own). Unknown
    fields are logged once as a warning; invalid ones raise :class:`ConfigurationError`.
    """
    source = str(path)
    try:
        text = FsPath(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigurationError([f"cannot read the file: {err.strerror or err}"],
                                 source) from err
    cfg = parse_configuration(text, namespace=namespace, source=source)
    warn_unknown_fields(cfg, source)
    return cfg


async def load_configuration_from_configmap(
    client: Any, namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_CONFIGMAP_NAME,
    *, key: str = CONFIGMAP_KEY,
) -> Configuration:
    """Read Kueue's Configuration from its ConfigMap (``kueue-system/kueue-manager-config``,
    key ``controller_manager_config.yaml``, as Kueue's manifests ship it).

    The ConfigMap's namespace is where that Kueue runs, so it defaults the document's
    ``namespace``. A missing ConfigMap raises the client's NotFound; a missing key or an
    invalid document raises :class:`ConfigurationError`.
    """
    source = f"ConfigMap {namespace}/{name}"
    cm = await client.get(CONFIGMAP_GVK, name, namespace=namespace)
    text = (cm.get("data") or {}).get(key)
    if text is None:
        raise ConfigurationError([f"data: Required value: no {go_quote(key)} key"], source)
    cfg = parse_configuration(text, namespace=namespace, source=f"{source}, key {key}")
    warn_unknown_fields(cfg, source)
    return cfg


def default_configuration(*, namespace: str = DEFAULT_NAMESPACE) -> Configuration:
    """The Configuration Kueue v0.19.2 runs with when given none (all defaults)."""
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND}, namespace=namespace)


# --- applying -------------------------------------------------------------------------------


def workload_custom_label_sources(cfg: Configuration) -> tuple[frozenset[str], frozenset[str]]:
    """(label keys, annotation keys) copied to Workloads for ``metrics.customLabels`` with
    ``sourceKind: Workload`` (``metrics.WorkloadCustomLabelSources``)."""
    labels: set[str] = set()
    annotations: set[str] = set()
    for entry in (cfg.metrics.custom_labels if cfg.metrics else None) or []:
        if (entry.source_kind or "ClusterQueue") != "Workload":
            continue
        if entry.source_annotation_key:
            annotations.add(entry.source_annotation_key)
        elif entry.source_label_key:
            labels.add(entry.source_label_key)
        elif entry.name:
            labels.add(entry.name)
    return frozenset(labels), frozenset(annotations)


def local_queue_metrics_config(config: Configuration) -> LocalQueueMetricsConfig:
    """``metrics.localQueueMetrics`` as Kueue's ``NewLocalQueueMetricsConfig`` reads it,
    with the ``LocalQueueMetrics`` gate folded into ``enabled`` (``IsEnabled``).

    No ``localQueueMetrics`` at all is enabled for every LocalQueue (Kueue's default,
    ``enable: true``); one without ``enable: true`` is disabled (``enable`` is a plain
    bool: unset is false). Enabled, ``localQueueSelector`` picks the LocalQueues by their
    labels; a selector that does not parse yields no config in Kueue, which counts as
    every LocalQueue. v0.19.2 has no namespace selector here.
    """
    from .metrics import LocalQueueMetricsConfig

    gate = config.feature_gate_enabled("LocalQueueMetrics")
    spec = config.metrics.local_queue_metrics if config.metrics else None
    if spec is None:
        return LocalQueueMetricsConfig(enabled=gate)
    if not spec.enable:
        return LocalQueueMetricsConfig(enabled=False)
    if spec.local_queue_selector is None:
        return LocalQueueMetricsConfig(enabled=gate)
    try:
        selector = spec.local_queue_selector.selector()
    except ValueError:
        return LocalQueueMetricsConfig(enabled=gate)
    return LocalQueueMetricsConfig(enabled=gate, queue_selector=selector)


def reconciler_options_from(
    config: Configuration,
    *,
    kueue_version: KueueVersion | str | None = None,
    base: ReconcilerOptions | None = None,
    **overrides: Unpack[ReconcilerOptionOverrides],
) -> ReconcilerOptions:
    """:class:`~jobframework.options.ReconcilerOptions` for a loaded Configuration, as
    Kueue's ``cmd/kueue`` passes it to ``jobframework.SetupControllers``.

    Sets ``features`` (the document's gates over ``kueue_version``'s defaults; default:
    ``base``'s version, else v0.19), ``wait_for_pods_ready``, ``manage_jobs_without_queue_name``,
    ``managed_jobs_namespace_selector``, ``enabled_frameworks``,
    ``enabled_external_frameworks``, ``label_keys_to_copy`` / ``annotations_to_copy`` and
    ``workload_retention_policy`` and ``local_queue_metrics``
    (:func:`local_queue_metrics_config`); everything else comes from ``base`` (default
    options), and ``overrides`` win over both.
    """
    base = base or ReconcilerOptions()
    version = kueue_version if kueue_version is not None else base.features.version
    features = config.features(version)
    labels = frozenset((config.integrations.label_keys_to_copy
                        if config.integrations else None) or ())
    annotations: frozenset[str] = frozenset()
    if features.enabled(FeatureGate.CUSTOM_METRIC_LABELS):
        extra_labels, annotations = workload_custom_label_sources(config)
        labels |= extra_labels
    retention: WorkloadRetentionPolicy | None = None
    workloads = (config.object_retention_policies.workloads
                 if config.object_retention_policies else None)
    if workloads is not None and workloads.after_deactivated_by_kueue is not None:
        retention = WorkloadRetentionPolicy(
            after_deactivated_by_kueue=workloads.after_deactivated_by_kueue_seconds)
    selector = config.managed_jobs_namespace_selector
    external = config.external_frameworks()
    frameworks = config.frameworks()
    derived: dict[str, Any] = {
        "features": features,
        "wait_for_pods_ready": config.wait_for_pods_ready_enabled(),
        "manage_jobs_without_queue_name": bool(config.manage_jobs_without_queue_name),
        "managed_jobs_namespace_selector": selector.selector() if selector else None,
        # As Kueue's With*Frameworks options: an empty list leaves the option unset.
        "enabled_frameworks": frozenset(frameworks) if frameworks else None,
        "enabled_external_frameworks": frozenset(external) if external else None,
        "label_keys_to_copy": labels,
        "annotations_to_copy": annotations,
        "workload_retention_policy": retention,
        "local_queue_metrics": local_queue_metrics_config(config),
    }
    derived.update(overrides)
    return attrs.evolve(base, **derived)


def group_kind_concurrency_from(
    config: Configuration | None,
    job_kinds: Iterable[GVK] = (),
) -> dict[str, int]:
    """Workers per controller, by the ``Kind.group`` it reconciles (``"Job.batch"``,
    ``"Workload.kueue.x-k8s.io"``, ``"Pod"``), for a manager running beside the Kueue
    that reads ``config`` (Kueue passes ``controller.groupKindConcurrency`` to its
    controller-runtime manager the same way).

    Kueue v0.19.2's shipped table (:data:`KUEUE_GROUP_KIND_CONCURRENCY`), each of
    ``job_kinds`` (the integrated job kinds) at :data:`DEFAULT_JOB_KIND_CONCURRENCY`, then
    the Configuration's own entries over both. Unlike controller-runtime, whose table
    from a file replaces the defaults whole, an entry the Configuration leaves out keeps
    its default: a Kueue file lists Kueue's controllers, and leaving a user's job kind at
    one worker for that would cost it most of its throughput. A value below 1 counts as 1
    (controller-runtime ignores it and runs one worker).
    """
    table = dict(KUEUE_GROUP_KIND_CONCURRENCY)
    for gvk in job_kinds:
        table.setdefault(group_kind_key(gvk), DEFAULT_JOB_KIND_CONCURRENCY)
    controller = config.controller if config is not None else None
    configured = (controller.group_kind_concurrency if controller is not None else None) or {}
    table.update({key: max(1, int(value)) for key, value in configured.items()})
    return table
