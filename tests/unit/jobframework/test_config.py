"""Kueue's Configuration (``jobframework.config``): v0.19.2's defaults and validation,
lossless unknown fields, the loaders, and what each applied field changes."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from pathlib import Path
from typing import Any

import pytest
from tests.unit.batchjob.helpers import World, base_job

from integrations.batchjob import CALLBACKS as BATCH_CALLBACKS
from integrations.batchjob import FRAMEWORK_NAME
from integrations.catalog import DEFAULT_INTEGRATIONS
from jobframework import constants as c
from jobframework.config import (
    API_VERSION,
    CONFIGMAP_GVK,
    CONFIGMAP_KEY,
    DEFAULT_CONFIGMAP_NAME,
    KIND,
    KUEUE_FEATURE_GATES,
    Configuration,
    ConfigurationError,
    DurationError,
    default_configuration,
    load_configuration,
    load_configuration_from_configmap,
    parse_configuration,
    parse_go_duration,
    reconciler_options_from,
)
from jobframework.constants import VERSION_PROFILES, FeatureGate, FeatureGates, KueueVersion
from jobframework.integrations import IntegrationManager
from jobframework.plugins import by_framework_name
from jobframework.reconciler import ReconcilerOptions, WorkloadRetentionPolicy, setup_controllers
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import NotFound
from jobframework.runtime.manager import Manager
from jobframework.testing import APIServer
from jobframework.testing.cluster import manifests
from jobframework.webhook import WebhookServer, rule

NS_LABEL = "kubernetes.io/metadata.name"


def doc(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **fields}


def errors_of(document: Any) -> list[str]:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(document)
    return info.value.errors


# --- defaults -------------------------------------------------------------------------------


def test_defaults_are_v0_19_2s() -> None:
    # apis/config/v1beta2/defaults_test.go's expectations for an empty Configuration.
    assert default_configuration().to_dict() == {
        "apiVersion": API_VERSION, "kind": KIND, "namespace": "kueue-system",
        "manageJobsWithoutQueueName": False,
        "webhook": {"port": 9443, "certDir": "/tmp/k8s-webhook-server/serving-certs"},
        "leaderElection": {"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s",
                           "retryPeriod": "2s", "resourceLock": "leases",
                           "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "metrics": {"bindAddress": ":8443", "localQueueMetrics": {"enable": True}},
        "health": {"healthProbeBindAddress": ":8081"},
        "managedJobsNamespaceSelector": {"matchExpressions": [
            {"key": NS_LABEL, "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]},
        "internalCertManagement": {"enable": True,
                                   "webhookServiceName": "kueue-webhook-service",
                                   "webhookSecretName": "kueue-webhook-server-cert"},
        "waitForPodsReady": {"timeout": "30m0s", "blockAdmission": False,
                             "recoveryTimeout": "30m0s",
                             "requeuingStrategy": {"timestamp": "Eviction",
                                                   "backoffBaseSeconds": 60,
                                                   "backoffMaxSeconds": 3600}},
        "clientConnection": {"qps": 300.0, "burst": 500},
        "integrations": {"frameworks": ["batch/job"]},
        "multiKueue": {"gcInterval": "1m0s", "origin": "multikueue",
                       "workerLostTimeout": "15m0s",
                       "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"},
        "visibilityServer": {"bindPort": 8082},
    }


def test_wait_for_pods_ready_defaults_follow_the_given_timeout() -> None:
    cfg = parse_configuration(doc(waitForPodsReady={"timeout": "5m"}))
    assert cfg.wait_for_pods_ready is not None
    assert cfg.wait_for_pods_ready.timeout_seconds == 300
    assert cfg.wait_for_pods_ready.recovery_timeout_seconds == 300
    # "0s" is the zero Duration: defaulted; an explicit zero recoveryTimeout disables it.
    cfg = parse_configuration(doc(waitForPodsReady={"timeout": "0s", "recoveryTimeout": "0s"}))
    assert cfg.wait_for_pods_ready is not None
    assert cfg.wait_for_pods_ready.timeout == "30m0s"
    assert cfg.wait_for_pods_ready.recovery_timeout_seconds == 0


def test_explicit_values_are_not_defaulted() -> None:
    cfg = parse_configuration(doc(
        namespace="other", clientConnection={"qps": 10, "burst": 20},
        internalCertManagement={"enable": False},
        integrations={"frameworks": ["pod"]},
        waitForPodsReady={"timeout": "1m", "blockAdmission": True,
                          "requeuingStrategy": {"timestamp": "Creation",
                                                "backoffLimitCount": 3}}))
    out = cfg.to_dict()
    assert out["clientConnection"] == {"qps": 10, "burst": 20}
    assert out["internalCertManagement"] == {"enable": False}
    assert out["integrations"] == {"frameworks": ["pod"]}
    assert out["waitForPodsReady"]["requeuingStrategy"] == {
        "timestamp": "Creation", "backoffLimitCount": 3, "backoffBaseSeconds": 60,
        "backoffMaxSeconds": 3600}
    assert out["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system", "other"], "the default selector exempts the configured namespace"


def test_go_durations() -> None:
    assert parse_go_duration("1h30m") == 5400
    assert parse_go_duration("1.5s") == 1.5
    assert parse_go_duration("-2m") == -120
    assert parse_go_duration("0") == 0
    assert parse_go_duration("300ms") == pytest.approx(0.3)
    for text, message in (("abc", 'invalid duration "abc"'), ("", 'invalid duration ""'),
                          ("5", 'missing unit in duration "5"'),
                          ("1d", 'unknown unit "d" in duration "1d"')):
        with pytest.raises(DurationError) as info:
            parse_go_duration(text)
        assert str(info.value) == message


# --- unknown fields -------------------------------------------------------------------------


UNKNOWN_DOC = doc(
    futureTopLevel={"x": 1},
    manage_jobs_without_queue_name=True,  # Go's decoder knows only the JSON name
    waitForPodsReady={"timeout": "5m", "newKnob": True},
    integrations={"frameworks": ["batch/job"], "frameworksTypo": ["pod"]},
    managedJobsNamespaceSelector={"matchExpressions": [
        {"key": NS_LABEL, "operator": "In", "values": ["team-a"], "extra": "kept"}]},
    featureGates={"ShortWorkloadNames": True, "NotAKueueGate": True},
)


def test_unknown_fields_round_trip_losslessly() -> None:
    raw = copy.deepcopy(UNKNOWN_DOC)
    assert Configuration.from_dict(raw).to_dict() == UNKNOWN_DOC
    defaulted = parse_configuration(UNKNOWN_DOC).to_dict()
    assert defaulted["futureTopLevel"] == {"x": 1}
    assert defaulted["manage_jobs_without_queue_name"] is True
    assert defaulted["manageJobsWithoutQueueName"] is False, "the snake_case key is not it"
    assert defaulted["waitForPodsReady"]["newKnob"] is True
    assert defaulted["managedJobsNamespaceSelector"]["matchExpressions"][0]["extra"] == "kept"


def test_unknown_fields_are_reported_by_path() -> None:
    assert parse_configuration(UNKNOWN_DOC).unknown_fields() == [
        "futureTopLevel", "manage_jobs_without_queue_name",
        "managedJobsNamespaceSelector.matchExpressions[0].extra", "waitForPodsReady.newKnob",
        "integrations.frameworksTypo", "featureGates[NotAKueueGate]",
    ]
    assert default_configuration().unknown_fields() == []


def test_loading_a_file_warns_once_about_unknown_fields(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import yaml
    path = tmp_path / "kueue.yaml"
    path.write_text(yaml.safe_dump(UNKNOWN_DOC))
    with caplog.at_level(logging.WARNING, logger="jobframework.config"):
        cfg = load_configuration(path)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "waitForPodsReady.newKnob" in warnings[0].getMessage()
    assert str(path) in warnings[0].getMessage()
    assert cfg.to_dict()["futureTopLevel"] == {"x": 1}


def test_a_clean_file_logs_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\n")
    with caplog.at_level(logging.WARNING, logger="jobframework.config"):
        load_configuration(path)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --- invalid values -------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "message"), [
    ({"waitForPodsReady": {"timeout": "abc"}},
     'waitForPodsReady.timeout: invalid duration "abc"'),
    ({"waitForPodsReady": {"timeout": 5}},
     'waitForPodsReady.timeout: invalid duration 5: must be a string such as "5m"'),
    ({"waitForPodsReady": {"timeout": "-1m"}},
     'waitForPodsReady.timeout: Invalid value: "-1m": must be greater than or equal to 0'),
    ({"waitForPodsReady": {"recoveryTimeout": "-1s"}},
     'waitForPodsReady.recoveryTimeout: Invalid value: "-1s": must be greater than or equal '
     "to 0"),
    ({"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Later"}}},
     'waitForPodsReady.requeuingStrategy.timestamp: Unsupported value: "Later": supported '
     'values: "Creation", "Eviction"'),
    ({"waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": -1}}},
     "waitForPodsReady.requeuingStrategy.backoffBaseSeconds: Invalid value: -1: must be "
     "greater than or equal to 0"),
    ({"manageJobsWithoutQueueName": "yes"},
     "manageJobsWithoutQueueName: input should be a valid boolean, got 'yes'"),
    ({"featureGates": {"ShortWorkloadNames": "on"}},
     "featureGates[ShortWorkloadNames]: input should be a valid boolean, got 'on'"),
    ({"featureGates": {"ObjectRetentionPolicies": False}},
     'featureGates: Invalid value: {"ObjectRetentionPolicies":false}: cannot set feature gate '
     "ObjectRetentionPolicies to false, feature is locked to true"),
    ({"featureGates": {"TopologyAwareScheduling": False, "TASProfileMixed": False,
                       "TASFailedNodeReplacement": False, "TASReplaceNodeOnNodeTaints": False,
                       "TASMultiLayerTopology": False, "TASHandleOverlappingFlavors": False,
                       "TASRecomputeAssignmentWithinSchedulingCycle": False,
                       "TASFailedNodeReplacementFailFast": True}},
     'featureGates: Invalid value: "TASFailedNodeReplacementFailFast": '
     "TASFailedNodeReplacementFailFast requires TopologyAwareScheduling to be enabled"),
    ({"integrations": {"frameworks": ["batch/job", "example.com/nope"]}},
     'integrations.frameworks[1]: Unsupported value: "example.com/nope": supported values: '
     '"batch/job", "deployment"'),
    ({"integrations": {"frameworks": ["batch/job", "batch/job"]}},
     'integrations.frameworks[1]: Duplicate value: "batch/job"'),
    ({"integrations": {"externalFrameworks": ["JobFlow"]}},
     "integrations.externalFrameworks[0]: Invalid value: \"JobFlow\": must be format, "
     "'Kind.version.group.com'"),
    ({"integrations": {"frameworks": ["workload.codeflare.dev/appwrapper"],
                       "externalFrameworks": ["AppWrapper.v1beta2.workload.codeflare.dev"]}},
     'integrations.externalFrameworks[0]: Duplicate value: '
     '"AppWrapper.v1beta2.workload.codeflare.dev"'),
    ({"integrations": {"labelKeysToCopy": ["bad key"]}},
     'integrations.labelKeysToCopy[0]: Invalid value: "bad key": name part must consist'),
    ({"managedJobsNamespaceSelector": {"matchExpressions": [{"key": "a",
                                                             "operator": "Near"}]}},
     'managedJobsNamespaceSelector.matchExpressions[0].operator: Invalid value: "Near": not a '
     "valid selector operator"),
    ({"managedJobsNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     "managedJobsNamespaceSelector.matchExpressions[0].values: Required value: must be "
     "specified when `operator` is 'In' or 'NotIn'"),
    ({"managedJobsNamespaceSelector": {"matchLabels": {}}},
     'managedJobsNamespaceSelector: Invalid value: {"matchLabels":{}}: should not match the '
     '"kube-system" namespace'),
    ({"objectRetentionPolicies": {"workloads": {"afterDeactivatedByKueue": "-5m"}}},
     "objectRetentionPolicies.workloads.afterDeactivatedByKueue: Invalid value: \"-5m\": must "
     "be greater than or equal to 0"),
    ({"objectRetentionPolicies": {"workloads": {"afterFinished": "1d"}}},
     'objectRetentionPolicies.workloads.afterFinished: unknown unit "d" in duration "1d"'),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1"},
     'apiVersion: Unsupported value: "config.kueue.x-k8s.io/v1beta1": supported values: '
     '"config.kueue.x-k8s.io/v1beta2"'),
    ({"kind": "KubeSchedulerConfiguration"},
     'kind: Unsupported value: "KubeSchedulerConfiguration": supported values: '
     '"Configuration"'),
])
def test_invalid_values_name_their_path(fields: dict[str, Any], message: str) -> None:
    errors = errors_of(doc(**fields))
    assert any(e.startswith(message) for e in errors), errors


def test_every_error_is_reported_and_the_source_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nwaitForPodsReady:\n"
                    "  timeout: abc\n  recoveryTimeout: 1x\n")
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    assert info.value.errors == [
        'waitForPodsReady.timeout: invalid duration "abc"',
        'waitForPodsReady.recoveryTimeout: unknown unit "x" in duration "1x"']
    assert str(info.value).startswith(f"invalid Kueue Configuration ({path}): ")


def test_documents_that_are_not_mappings_are_refused(tmp_path: Path) -> None:
    assert errors_of("- a\n- b") == ["the document must be a mapping (a Configuration object)"]
    assert errors_of("a: [")[0].startswith("not valid YAML: ")
    with pytest.raises(ConfigurationError, match="cannot read the file"):
        load_configuration(tmp_path / "missing.yaml")


def test_waitforpodsready_is_not_validated_when_disabled() -> None:
    # Kueue skips the checks when DisableWaitForPodsReady turns the feature off.
    cfg = parse_configuration(doc(featureGates={"DisableWaitForPodsReady": True},
                                  waitForPodsReady={"timeout": "-1m"}))
    assert not cfg.wait_for_pods_ready_enabled()


# --- the loaders ----------------------------------------------------------------------------


async def test_configmap_loading_through_the_api_server() -> None:
    server = APIServer()
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "kueue-system"}})
    text = (f"apiVersion: {API_VERSION}\nkind: {KIND}\nmanageJobsWithoutQueueName: true\n"
            "integrations:\n  frameworks: [batch/job]\n"
            "  externalFrameworks: [JobFlow.v1alpha1.api.practice.com]\n")
    await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": DEFAULT_CONFIGMAP_NAME,
                                      "namespace": "kueue-system"},
                         "data": {CONFIGMAP_KEY: text}})
    cfg = await load_configuration_from_configmap(client)
    assert cfg.manage_jobs_without_queue_name is True
    assert cfg.external_frameworks() == ["JobFlow.v1alpha1.api.practice.com"]
    assert by_framework_name(cfg.external_frameworks()) == ["jobflow"]


async def test_configmap_namespace_is_kueues_namespace() -> None:
    server = APIServer()
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "my-kueue"}})
    await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "cfg", "namespace": "my-kueue"},
                         "data": {CONFIGMAP_KEY: f"apiVersion: {API_VERSION}\nkind: {KIND}\n"}})
    cfg = await load_configuration_from_configmap(client, "my-kueue", "cfg")
    assert cfg.namespace == "my-kueue"
    selector = reconciler_options_from(cfg).managed_jobs_namespace_selector
    assert selector is not None
    assert not selector.matches({NS_LABEL: "my-kueue"})
    assert selector.matches({NS_LABEL: "kueue-system"}), "only Kueue's own namespace is exempt"


async def test_configmap_without_the_key_or_missing() -> None:
    server = APIServer()
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "kueue-system"}})
    with pytest.raises(NotFound):
        await load_configuration_from_configmap(client)
    await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": DEFAULT_CONFIGMAP_NAME,
                                      "namespace": "kueue-system"},
                         "data": {"config.yaml": "{}"}})
    with pytest.raises(ConfigurationError) as info:
        await load_configuration_from_configmap(client)
    assert info.value.errors == [f'data: Required value: no "{CONFIGMAP_KEY}" key']
    assert CONFIGMAP_GVK.kind == "ConfigMap"


def test_the_local_clusters_configuration_parses_cleanly(tmp_path: Path) -> None:
    generated = manifests.kueue_config(manifests.Topology(), webhook_port=9443,
                                       health_port=8081, metrics_port=8443, cert_dir=tmp_path)
    cfg = parse_configuration(generated)
    assert cfg.unknown_fields() == []
    assert tuple(by_framework_name(cfg.external_frameworks())) == DEFAULT_INTEGRATIONS
    assert Configuration.from_dict(copy.deepcopy(generated)).to_dict() == generated


# --- what each applied field changes --------------------------------------------------------


def test_default_options_are_a_stock_kueues() -> None:
    opts = reconciler_options_from(default_configuration())
    assert opts.features == FeatureGates()
    assert opts.wait_for_pods_ready is True
    assert opts.manage_jobs_without_queue_name is False
    assert opts.enabled_frameworks == frozenset({"batch/job"})
    assert opts.enabled_external_frameworks is None
    assert opts.label_keys_to_copy == frozenset()
    assert opts.workload_retention_policy is None
    selector = opts.managed_jobs_namespace_selector
    assert selector is not None
    assert not selector.matches({NS_LABEL: "kube-system"})
    assert selector.matches({NS_LABEL: "team-a"})


@pytest.mark.parametrize(("fields", "enabled", "team_a", "team_b"), [
    ({}, True, True, True),  # defaulted to enable: true, every LocalQueue
    ({"metrics": {"localQueueMetrics": {"enable": False}}}, False, False, False),
    # enable is a plain bool in Kueue's API: a selector alone leaves it false.
    ({"metrics": {"localQueueMetrics": {"localQueueSelector": {
        "matchLabels": {"team": "a"}}}}}, False, False, False),
    ({"metrics": {"localQueueMetrics": {"enable": True, "localQueueSelector": {
        "matchLabels": {"team": "a"}}}}}, True, True, False),
    ({"metrics": {"localQueueMetrics": {"enable": True, "localQueueSelector": {
        "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}}}},
     True, False, True),
    ({"featureGates": {"LocalQueueMetrics": False},
      "metrics": {"localQueueMetrics": {"enable": True}}}, False, False, False),
], ids=["default", "disabled", "selector without enable", "match labels",
        "match expressions", "gate off"])
def test_local_queue_metrics_reach_the_options(
        fields: dict[str, Any], enabled: bool, team_a: bool, team_b: bool) -> None:
    # metrics.localQueueMetrics as NewLocalQueueMetricsConfig and IsEnabled read it.
    lq = reconciler_options_from(parse_configuration(doc(**fields))).local_queue_metrics
    assert lq is not None
    assert lq.enabled is enabled
    selected = {team: lq.enabled and (lq.queue_selector is None
                                      or lq.queue_selector.matches({"team": team}))
                for team in ("a", "b")}
    assert selected == {"a": team_a, "b": team_b}


def test_feature_gates_reach_feature_gates() -> None:
    cfg = parse_configuration(doc(featureGates={"ShortWorkloadNames": True,
                                                "LocalQueueMetrics": False}))
    assert not FeatureGates().enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    opts = reconciler_options_from(cfg)
    assert opts.features.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    assert opts.features.overrides == {FeatureGate.SHORT_WORKLOAD_NAMES: True}


def test_the_version_profile_is_ours_not_the_documents() -> None:
    cfg = parse_configuration(doc(featureGates={"ShortWorkloadNames": True}))
    v019 = reconciler_options_from(cfg)
    main = reconciler_options_from(cfg, kueue_version=KueueVersion.MAIN)
    assert v019.features.version is KueueVersion.V0_19
    assert main.features.version is KueueVersion.MAIN
    gate = FeatureGate.WORKLOAD_PRIORITY_CLASS_DEFAULTING
    assert not v019.features.enabled(gate)
    assert main.features.enabled(gate)
    assert main.features.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    base = ReconcilerOptions(features=FeatureGates(version="main"))
    assert reconciler_options_from(cfg, base=base).features.version is KueueVersion.MAIN


def test_all_alpha_enables_alpha_gates_including_disable_wait_for_pods_ready() -> None:
    opts = reconciler_options_from(parse_configuration(doc(featureGates={"AllAlpha": True})))
    assert opts.features.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    assert opts.wait_for_pods_ready is False
    assert opts.features.enabled(FeatureGate.PARTIAL_ADMISSION), "beta gates keep defaults"


def test_disable_wait_for_pods_ready_turns_pods_ready_off() -> None:
    cfg = parse_configuration(doc(featureGates={"DisableWaitForPodsReady": True}))
    assert reconciler_options_from(cfg).wait_for_pods_ready is False


def test_manage_jobs_without_queue_name_and_selector_reach_the_options() -> None:
    cfg = parse_configuration(doc(manageJobsWithoutQueueName=True,
                                  managedJobsNamespaceSelector={"matchLabels": {"team": "a"}}))
    opts = reconciler_options_from(cfg)
    assert opts.manage_jobs_without_queue_name is True
    assert opts.managed_jobs_namespace_selector is not None
    assert opts.managed_jobs_namespace_selector.matches({"team": "a"})
    assert not opts.managed_jobs_namespace_selector.matches({"team": "b"})


def test_label_keys_to_copy_and_workload_custom_labels() -> None:
    custom = {"customLabels": [
        {"name": "team", "sourceKind": "Workload", "trackedValues": ["a"]},
        {"name": "cost", "sourceAnnotationKey": "example.com/cost", "sourceKind": "Workload",
         "trackedValues": ["x"]},
        {"name": "cq", "sourceLabelKey": "example.com/cq"}]}
    fields = {"integrations": {"labelKeysToCopy": ["project"]}, "metrics": custom}
    off = reconciler_options_from(parse_configuration(doc(**fields)))
    assert off.label_keys_to_copy == {"project"}
    assert off.annotations_to_copy == frozenset()
    on = reconciler_options_from(parse_configuration(
        doc(**fields, featureGates={"CustomMetricLabels": True})))
    assert on.label_keys_to_copy == {"project", "team"}
    assert on.annotations_to_copy == {"example.com/cost"}


def test_object_retention_policies() -> None:
    cfg = parse_configuration(doc(objectRetentionPolicies={"workloads": {
        "afterFinished": "1h", "afterDeactivatedByKueue": "10m"}}))
    assert reconciler_options_from(cfg).workload_retention_policy == WorkloadRetentionPolicy(
        after_deactivated_by_kueue=600.0)
    assert cfg.object_retention_policies is not None
    assert cfg.object_retention_policies.workloads is not None
    assert cfg.object_retention_policies.workloads.after_finished_seconds == 3600


def test_frameworks_and_overrides() -> None:
    cfg = parse_configuration(doc(integrations={
        "frameworks": ["batch/job", "pod"],
        "externalFrameworks": ["JobFlow.v1alpha1.api.practice.com"]}))
    clock = ManualClock()
    opts = reconciler_options_from(cfg, base=ReconcilerOptions(clock=clock, manager_name="x"),
                                   manage_jobs_without_queue_name=True)
    assert opts.enabled_frameworks == frozenset({"batch/job", "pod"})
    assert opts.enabled_external_frameworks == frozenset({"JobFlow.v1alpha1.api.practice.com"})
    assert opts.clock is clock
    assert opts.manager_name == "x"
    assert opts.manage_jobs_without_queue_name is True


# --- setup_controllers(configuration=...) ---------------------------------------------------


async def _setup(cfg: Configuration) -> tuple[World, Manager, WebhookServer, frozenset[str]]:
    w = World()
    await w.setup()
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, BATCH_CALLBACKS)
    mgr = Manager(w.client, clock=w.clock)
    webhooks = WebhookServer()
    done = await setup_controllers(mgr, im, options=ReconcilerOptions(clock=w.clock),
                                   webhook_server=webhooks, configuration=cfg)
    return w, mgr, webhooks, done


async def test_setup_controllers_follows_the_configuration() -> None:
    cfg = parse_configuration(doc(
        manageJobsWithoutQueueName=True,
        integrations={"frameworks": ["batch/job", "pod"], "labelKeysToCopy": ["team"],
                      "externalFrameworks": ["Foo.v1.example.com"]}))
    w, mgr, webhooks, done = await _setup(cfg)
    assert done == {FRAMEWORK_NAME}, "pod is Kueue's own: not registered here"
    w.server.add_mutating_webhook(webhooks.as_admission_hook("/mutate-batch-v1-job"),
                                  rules=[rule("batch", "v1", "jobs", ["CREATE"])])
    task = asyncio.create_task(mgr.start())
    try:
        # The webhook reads the job's Namespace from the manager's cache.
        await asyncio.wait_for(mgr.elected(), 10)
        job = base_job(queue=None, suspend=False)
        job["metadata"]["labels"] = {"team": "a", "other": "b"}
        created = await w.create_job(job)
        assert created["spec"]["suspend"] is True, \
            "manageJobsWithoutQueueName: a job without a queue name is suspended"
        for i in range(3000):
            if w.workloads():
                break
            await asyncio.sleep(0)
            if i % 20 == 19:
                w.clock.advance(0.01)
        [wl] = w.workloads()
        assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid", "team": "a"}
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def test_setup_controllers_skips_frameworks_the_configuration_does_not_list() -> None:
    cfg = parse_configuration(doc(integrations={"frameworks": ["pod"]}))
    _, mgr, _, done = await _setup(cfg)
    assert done == frozenset()
    assert "job" not in mgr._controller_names


def test_gate_table_agrees_with_the_v0_19_profile() -> None:
    # The Configuration's gate table and the v0.19 version profile describe one release.
    profile = VERSION_PROFILES[KueueVersion.V0_19].feature_gates
    for gate in FeatureGate:
        assert KUEUE_FEATURE_GATES[gate.value].default == profile[gate], gate
