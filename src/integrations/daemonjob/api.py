"""The ``api.practice.com/v1alpha1`` DaemonJob API, as a typed read-only view.

A DaemonJob is a batch/v1 JobSpec (its fields inlined at ``spec`` level, as the original
operator's embedded ``batchv1.JobSpec``) plus ``globalParams``, ``excludeNodeList`` (a
comma-separated string of node names) and, new here, ``failurePolicy``. It runs one Job
per eligible node, named ``<daemonjob>-<node>``.

``spec.managedBy`` is the DaemonJob's own (which controller runs the DaemonJob, as a
Job's names the controller of the Job), not a JobSpec field copied to the node Jobs: see
:data:`DAEMONJOB_MANAGED_BY_CONTROLLER` and :func:`managed_elsewhere`.

Objects stay plain JSON dicts; :class:`DaemonJobSpec` is a frozen view parsed from one.
Also here: the names this integration writes on other objects, the ``status.state``
values kept from the original operator, per-node phases, and the CRD manifest.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from jobframework import managedby
from jobframework.runtime.objects import GVK, Object, annotations_of

from .._manifests import load_yaml_folder

GROUP: Final = "api.practice.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

DAEMONJOB_GVK: Final = GVK(GROUP, VERSION, "DaemonJob")
JOB_GVK: Final = GVK("batch", "v1", "Job")
NODE_GVK: Final = GVK("", "v1", "Node")

#: Child Job (and pod) label: the owning DaemonJob's name.
DAEMONJOB_NAME_LABEL: Final = "daemonjob.api.practice.com/name"
#: Child Job (and pod) label: the node the Job runs on (shortened with a hash suffix when
#: the node name is not a valid label value; the annotation of the same key is exact).
NODE_LABEL: Final = "daemonjob.api.practice.com/node"
#: Child Job annotation: the exact node name.
NODE_ANNOTATION: Final = NODE_LABEL
#: DaemonJob annotation: the admission's pod-set infos (JSON), set by the Kueue adapter.
POD_SETS_INFO_ANNOTATION: Final = "daemonjob.api.practice.com/pod-sets-info"
#: DaemonJob annotation: the nodes of this run (a JSON list), fixed when it first starts.
NODES_ANNOTATION: Final = "daemonjob.api.practice.com/nodes"
#: Child Job annotation: what was injected into its pod template and what it replaced.
INJECTED_INFO_ANNOTATION: Final = "daemonjob.api.practice.com/injected-pod-set-info"

#: The Workload's one PodSet.
POD_SET_NAME: Final = "main"
#: Longest Job name: the Job controller copies it into a label value on every pod.
MAX_JOB_NAME_LENGTH: Final = 63
#: Hex digits of the hash that ends a shortened name.
HASH_LENGTH: Final = 10
#: JobSpec fields a DaemonJob may not set, with why.
FORBIDDEN_JOB_FIELDS: Final = {
    "selector": "each node's Job gets its own generated selector",
    "manualSelector": "each node's Job gets its own generated selector",
}

#: ``spec.managedBy`` value naming the DaemonJob controller (absent means the same), as
#: ``kubernetes.io/job-controller`` names the Job controller and
#: ``workload.codeflare.dev/appwrapper-controller`` the AppWrapper one. Any other value
#: (MultiKueue's ``kueue.x-k8s.io/multikueue`` on a manager cluster) hands the DaemonJob
#: to that controller: the per-node controller leaves it alone (:func:`managed_elsewhere`).
DAEMONJOB_MANAGED_BY_CONTROLLER: Final = f"{GROUP}/daemonjob-controller"
#: Longest ``spec.managedBy``, as batch/v1 Job's.
MAX_MANAGED_BY_LENGTH: Final = managedby.MAX_MANAGED_BY_LENGTH


class State(enum.StrEnum):
    """``status.state``, spelled as the original operator (``Succeed``, not Succeeded)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEED = "Succeed"
    FAILED = "Failed"
    TERMINATING = "Terminating"


class NodePhase(enum.StrEnum):
    """``status.nodes[].phase``: where one node's Job is."""

    #: No Job yet (the DaemonJob waits for admission, or the Job is about to be created).
    PENDING = "Pending"
    #: Its Job runs.
    RUNNING = "Running"
    #: Its Job exists and is suspended (the DaemonJob is suspended or was evicted).
    SUSPENDED = "Suspended"
    #: Its Job has the ``Complete`` condition.
    SUCCEEDED = "Succeeded"
    #: Its Job has the ``Failed`` condition.
    FAILED = "Failed"
    #: The node does not have the labels of the flavor Kueue admitted: no Job runs there
    #: in this admission and its pods are given back.
    OUTSIDE_FLAVOR = "OutsideFlavor"
    #: The node was deleted before its Job finished; its Job was deleted.
    NODE_DELETED = "NodeDeleted"
    #: Under ``failurePolicy: FailFast``, it will not run: another node's Job failed.
    SKIPPED = "Skipped"
    #: Under ``failurePolicy: FailFast``, it was running when another node's Job failed;
    #: its Job was suspended.
    STOPPED = "Stopped"


#: Phases whose pods will not run again in this admission (their quota is given back).
DONE_PHASES: Final = frozenset({NodePhase.SUCCEEDED, NodePhase.FAILED,
                                NodePhase.OUTSIDE_FLAVOR, NodePhase.NODE_DELETED,
                                NodePhase.SKIPPED, NodePhase.STOPPED})


class FailurePolicy(enum.StrEnum):
    """``spec.failurePolicy``: what one node's failed Job does to the DaemonJob."""

    #: The first failed node Job fails the DaemonJob; unfinished Jobs are suspended.
    FAIL_FAST = "FailFast"
    #: Every node Job runs to its end; the DaemonJob fails if any of them failed.
    CONTINUE = "Continue"


class ConditionType(enum.StrEnum):
    """``status.conditions[].type`` of a DaemonJob."""

    #: True once every node Job of the run completed.
    SUCCEEDED = "Succeeded"
    #: True once the DaemonJob failed (the message names the node and why).
    FAILED = "Failed"
    #: True while ``spec.suspend`` holds the DaemonJob.
    SUSPENDED = "Suspended"
    #: True while no node is eligible (the DaemonJob waits for one).
    NO_ELIGIBLE_NODES = "NoEligibleNodes"


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


@attrs.frozen
class GlobalParams:
    """``spec.globalParams``: merged into every node Job and its pod template.

    ``node_name`` is parsed only so the webhook can refuse it: a DaemonJob pins each Job
    to its own node.
    """

    env: tuple[dict[str, Any], ...] = ()
    labels: dict[str, str] = attrs.field(factory=dict)
    annotations: dict[str, str] = attrs.field(factory=dict)
    node_name: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GlobalParams:
        """Parse ``spec.globalParams`` (absent fields are empty)."""
        d = data or {}
        env = tuple(dict(e) for e in d.get("env") or () if isinstance(e, Mapping))
        return cls(env=env, labels=_str_map(d.get("labels")),
                   annotations=_str_map(d.get("annotations")),
                   node_name=str(d.get("nodeName") or ""))


#: ``spec`` keys that are DaemonJob fields; every other key is an inlined JobSpec field.
#: ``managedBy`` is the DaemonJob's (never copied into the node Jobs, which are run by the
#: Job controller of the cluster running the DaemonJob).
DAEMONJOB_FIELDS: Final = frozenset({"globalParams", "excludeNodeList", "failurePolicy",
                                     "suspend", "managedBy"})


def parse_exclude_list(value: str) -> list[str]:
    """Node names in an ``excludeNodeList`` string: comma-separated, blanks around each name
    ignored. Empty entries are kept (as ``""``) so the webhook can point at them; a blank
    string is no entry at all."""
    if not value.strip():
        return []
    return [part.strip() for part in value.split(",")]


@attrs.frozen
class DaemonJobSpec:
    """``spec`` of a DaemonJob."""

    global_params: GlobalParams = attrs.field(factory=GlobalParams)
    exclude_nodes: tuple[str, ...] = ()
    failure_policy: str = FailurePolicy.FAIL_FAST.value
    suspend: bool = False
    #: The inlined JobSpec fields, as written.
    job_spec: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> DaemonJobSpec:
        """Parse ``spec`` (absent fields are empty; ``failurePolicy`` defaults to
        ``FailFast``, ``suspend`` to false)."""
        d = data or {}
        return cls(
            global_params=GlobalParams.from_dict(d.get("globalParams")),
            exclude_nodes=tuple(n for n in parse_exclude_list(str(d.get("excludeNodeList")
                                                                  or "")) if n),
            failure_policy=str(d.get("failurePolicy") or FailurePolicy.FAIL_FAST.value),
            suspend=bool(d.get("suspend") or False),
            job_spec={k: copy.deepcopy(v) for k, v in d.items() if k not in DAEMONJOB_FIELDS},
        )

    @classmethod
    def of(cls, daemonjob: Mapping[str, Any]) -> DaemonJobSpec:
        """The parsed spec of a DaemonJob object."""
        return cls.from_dict(daemonjob.get("spec"))

    @property
    def fail_fast(self) -> bool:
        """Whether one failed node Job fails the DaemonJob at once."""
        return self.failure_policy != FailurePolicy.CONTINUE.value


def managed_by(daemonjob: Mapping[str, Any]) -> str | None:
    """``spec.managedBy`` (None when absent)."""
    spec = daemonjob.get("spec")
    value = spec.get("managedBy") if isinstance(spec, Mapping) else None
    return None if value is None else str(value)


def managed_elsewhere(daemonjob: Mapping[str, Any]) -> bool:
    """Whether ``spec.managedBy`` names a controller other than the DaemonJob controller
    (MultiKueue on a manager cluster): then the per-node controller creates no Job, writes
    no status and fixes no nodes; the status is that controller's (MultiKueue copies the
    worker's)."""
    value = managed_by(daemonjob)
    return value is not None and value != DAEMONJOB_MANAGED_BY_CONTROLLER


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def shorten(name: str, limit: int = MAX_JOB_NAME_LENGTH) -> str:
    """``name`` if it has at most ``limit`` characters, else a prefix and a hash of the
    whole name (``<prefix>-<10 hex digits>``): deterministic, and distinct names stay
    distinct. The prefix loses trailing ``-``, ``.`` and ``_`` so the result stays a valid
    name and label value."""
    if len(name) <= limit:
        return name
    prefix = name[: limit - HASH_LENGTH - 1].rstrip("-._")
    return f"{prefix}-{_hash(name)}"


def child_job_name(daemonjob_name: str, node_name: str) -> str:
    """The name of a node's Job: ``<daemonjob>-<node>``, shortened when too long."""
    return shorten(f"{daemonjob_name}-{node_name}")


def node_label_value(node_name: str) -> str:
    """The :data:`NODE_LABEL` value for ``node_name``: the name itself when it is a valid
    label value (at most 63 characters; node names use only label-safe characters)."""
    return shorten(node_name)


def job_status_key(job_name: str, namespace: str) -> str:
    """The ``status.jobStatusList`` key: ``<job>/<namespace>`` (name first, as the original)."""
    return f"{job_name}/{namespace}"


def frozen_nodes(daemonjob: Mapping[str, Any]) -> list[str] | None:
    """The run's nodes (the :data:`NODES_ANNOTATION` list), or None before the first start."""
    raw = annotations_of(daemonjob).get(NODES_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    return [str(v) for v in value]


def nodes_annotation_value(nodes: list[str]) -> str:
    """The :data:`NODES_ANNOTATION` text for ``nodes``."""
    return json.dumps(sorted(nodes))


def load_crds() -> list[Object]:
    """The DaemonJob CRD manifest shipped in ``crds/``."""
    return load_yaml_folder(__package__, "crds")["daemonjobs.yaml"]


def load_samples() -> dict[str, list[Object]]:
    """The sample manifests (file name → documents), as shipped."""
    return load_yaml_folder(__package__, "samples")
