"""Version profiles: what Kueue v0.19.2 and Kueue's main branch do differently.

Every case runs under both profiles and asserts each one's exact reasons, labels and
events. v0.19's expectations follow the pinned Kueue v0.19.2 (``kube_features.go``,
``admissionchecks_test.go``'s ``TestSyncAdmittedCondition``, ``reconciler.go``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from tests.unit.batchjob.helpers import (
    World,
    base_job,
    base_wl,
    cond,
    conditions_of,
)

from integrations.batchjob import BatchJob
from jobframework import constants as c
from jobframework.api import Workload
from jobframework.base_webhook import BaseWebhook
from jobframework.constants import (
    DEFAULT_FEATURE_GATES,
    DEFAULT_FEATURES,
    DEFAULT_KUEUE_VERSION,
    FEATURE_GATE_DEFAULTS,
    VERSION_PROFILES,
    FeatureGate,
    FeatureGates,
    KueueVersion,
)
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import ReconcileError, update_workload_priority
from jobframework.runtime import errors
from jobframework.workload import sync_admitted_condition

V0_19, MAIN = KueueVersion.V0_19, KueueVersion.MAIN
VERSIONS = pytest.mark.parametrize("version", [V0_19, MAIN], ids=["v0.19", "main"])
WARNING, NORMAL = "Warning", "Normal"

# --- the profile table ------------------------------------------------------------------

G = FeatureGate
#: v0.19.2's defaults, read off its pkg/features/kube_features.go (last spec of each gate).
V0_19_DEFAULTS = {
    G.SHORT_WORKLOAD_NAMES: False,
    G.WORKLOAD_IDENTIFIER_ANNOTATIONS: True,
    G.ADMISSION_GATED_BY: True,
    G.FINISH_ORPHANED_WORKLOADS: True,
    G.PARTIAL_ADMISSION: True,
    G.RECLAIMABLE_PODS: True,
    G.TOPOLOGY_AWARE_SCHEDULING: True,
    G.ELASTIC_JOBS_VIA_WORKLOAD_SLICES: True,
    G.MULTIKUEUE: True,
    G.ASSIGN_QUEUE_LABELS_FOR_PODS: True,
    G.WORKLOAD_PRIORITY_CLASS_DEFAULTING: False,
    G.SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS: True,
    G.SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS: True,
    G.UNADMITTED_WORKLOADS_OBSERVABILITY: False,
    G.UNADMITTED_WORKLOADS_EXPLICIT_STATUS: False,
    G.CUSTOM_METRIC_LABELS: False,
    G.METRIC_FOR_WORKLOAD_CREATION_LATENCY: True,
    G.DISABLE_WAIT_FOR_PODS_READY: False,
    G.WORKLOAD_REQUEST_USE_MERGE_PATCH: False,
    G.TAS_MULTI_LAYER_TOPOLOGY: True,
    G.VALIDATE_RAY_AND_SPARK_JOB_UPDATES: True,
}
MAIN_DEFAULTS = {**V0_19_DEFAULTS, G.WORKLOAD_PRIORITY_CLASS_DEFAULTING: True,
                 G.UNADMITTED_WORKLOADS_OBSERVABILITY: True}
EXPECTED_DEFAULTS = {V0_19: V0_19_DEFAULTS, MAIN: MAIN_DEFAULTS}


@VERSIONS
def test_feature_gate_defaults(version: KueueVersion) -> None:
    want = EXPECTED_DEFAULTS[version]
    assert dict(FEATURE_GATE_DEFAULTS[version]) == want
    assert set(want) == set(FeatureGate)
    gates = FeatureGates(version=version)
    assert {g: gates.enabled(g) for g in FeatureGate} == want
    assert gates.version is version
    assert gates.profile is VERSION_PROFILES[version]


def test_default_profile_is_v0_19() -> None:
    assert DEFAULT_KUEUE_VERSION is V0_19
    assert DEFAULT_FEATURES.version is V0_19
    assert FeatureGates().version is V0_19
    assert dict(DEFAULT_FEATURE_GATES) == V0_19_DEFAULTS
    assert not DEFAULT_FEATURES.enabled(G.WORKLOAD_PRIORITY_CLASS_DEFAULTING)
    assert not DEFAULT_FEATURES.enabled(G.UNADMITTED_WORKLOADS_OBSERVABILITY)
    assert KueueVersion("v0.19") is V0_19 and KueueVersion("main") is MAIN
    with pytest.raises(ValueError):
        FeatureGates(version="v0.18")


@VERSIONS
def test_overrides_keep_their_version(version: KueueVersion) -> None:
    other = MAIN if version is V0_19 else V0_19
    gates = FeatureGates(version=version.value, ShortWorkloadNames=True)
    assert gates.version is version
    more = gates.with_gates(UnadmittedWorkloadsObservability=not MAIN_DEFAULTS[
        G.UNADMITTED_WORKLOADS_OBSERVABILITY])
    assert more.version is version
    assert more.enabled(G.SHORT_WORKLOAD_NAMES)
    assert not more.enabled(G.UNADMITTED_WORKLOADS_OBSERVABILITY)
    # The version's own default fills in every gate not overridden.
    assert more.enabled(G.WORKLOAD_PRIORITY_CLASS_DEFAULTING) is EXPECTED_DEFAULTS[version][
        G.WORKLOAD_PRIORITY_CLASS_DEFAULTING]
    moved = more.with_version(other)
    assert moved.version is other
    assert moved.overrides == more.overrides
    assert moved.enabled(G.WORKLOAD_PRIORITY_CLASS_DEFAULTING) is EXPECTED_DEFAULTS[other][
        G.WORKLOAD_PRIORITY_CLASS_DEFAULTING]
    # Same gate values, other version: the behaviour differs, so the sets differ.
    pinned = {g.value: v for g, v in EXPECTED_DEFAULTS[version].items()}
    assert FeatureGates(version=version) != FeatureGates(pinned, version=other)
    assert FeatureGates(version=version) == FeatureGates(pinned, version=version)
    assert hash(FeatureGates(version=version)) == hash(FeatureGates(pinned, version=version))
    want_repr = ("FeatureGates(ShortWorkloadNames=True)" if version is V0_19
                 else "FeatureGates(ShortWorkloadNames=True, version='main')")
    assert repr(gates) == want_repr


def test_profile_flags() -> None:
    assert not VERSION_PROFILES[V0_19].records_priority_class_not_found
    assert VERSION_PROFILES[MAIN].records_priority_class_not_found
    assert VERSION_PROFILES[V0_19].admitted_sync_follows_observability
    assert not VERSION_PROFILES[MAIN].admitted_sync_follows_observability


# --- SyncAdmittedCondition (TestSyncAdmittedCondition of v0.19.2) ---------------------------

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
SECOND_AGO = "2026-01-02T03:04:04Z"
READY = {"name": "check1", "state": "Ready", "lastTransitionTime": SECOND_AGO, "message": ""}
PENDING = {"name": "check2", "state": "Pending", "lastTransitionTime": SECOND_AGO,
           "message": ""}
QR_TRUE = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
           "message": "", "lastTransitionTime": SECOND_AGO}
ADMITTED_TRUE = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                 "lastTransitionTime": SECOND_AGO}


def workload(checks: list[dict[str, Any]], conditions: list[dict[str, Any]]) -> Workload:
    return Workload.from_dict({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": "foo", "namespace": "bar", "generation": 1},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]},
        "status": {"admissionChecks": [dict(x) for x in checks],
                   "conditions": [dict(x) for x in conditions]},
    })


# (case, gates, checks, conditions, {version: (changed, Admitted (status, reason) or None,
#  accumulated seconds)})
SYNC_CASES: list[tuple[str, dict[str, bool], list[dict[str, Any]], list[dict[str, Any]],
                       dict[KueueVersion, tuple[bool, tuple[str, str] | None, int | None]]]] = [
    ("check lost", {}, [READY, PENDING], [QR_TRUE, ADMITTED_TRUE],
     {V0_19: (True, ("False", "UnsatisfiedChecks"), 1),
      MAIN: (True, ("False", "UnsatisfiedAdmissionChecks"), 1)}),
    ("reservation and check lost", {}, [READY, PENDING], [ADMITTED_TRUE],
     {V0_19: (True, ("False", "NoReservationUnsatisfiedChecks"), 1),
      MAIN: (True, ("False", "NoReservation"), 1)}),
    ("reservation lost", {}, [READY], [ADMITTED_TRUE],
     {V0_19: (True, ("False", "NoReservation"), 1),
      MAIN: (True, ("False", "NoReservation"), 1)}),
    ("check lost, observability off", {"UnadmittedWorkloadsObservability": False},
     [READY, PENDING], [QR_TRUE, ADMITTED_TRUE],
     {V0_19: (True, ("False", "UnsatisfiedChecks"), 1),
      MAIN: (True, ("False", "UnsatisfiedAdmissionChecks"), 1)}),
    ("reservation and check lost, observability off",
     {"UnadmittedWorkloadsObservability": False}, [READY, PENDING], [ADMITTED_TRUE],
     {V0_19: (True, ("False", "NoReservationUnsatisfiedChecks"), 1),
      MAIN: (True, ("False", "NoReservationUnsatisfiedChecks"), 1)}),
    ("reservation, checks not ready, observability on",
     {"UnadmittedWorkloadsObservability": True}, [PENDING, READY], [QR_TRUE],
     {V0_19: (True, ("False", "UnsatisfiedAdmissionChecks"), None),
      MAIN: (False, None, None)}),
    ("stale reason re-derived, observability on", {"UnadmittedWorkloadsObservability": True},
     [PENDING], [{**QR_TRUE, "status": "False", "reason": "Pending"},
                 {**ADMITTED_TRUE, "status": "False",
                  "reason": "NoReservationUnsatisfiedChecks"}],
     {V0_19: (True, ("False", "NoReservation"), None),
      MAIN: (False, ("False", "NoReservationUnsatisfiedChecks"), None)}),
    ("no conditions yet, observability on", {"UnadmittedWorkloadsObservability": True},
     [PENDING], [],
     {V0_19: (False, None, None), MAIN: (False, None, None)}),
    ("no conditions yet", {}, [PENDING], [],
     {V0_19: (False, None, None), MAIN: (False, None, None)}),
]


@VERSIONS
@pytest.mark.parametrize(("case", "gates", "checks", "conditions", "want"), SYNC_CASES,
                         ids=[x[0] for x in SYNC_CASES])
def test_sync_admitted_condition(
    version: KueueVersion, case: str, gates: dict[str, bool], checks: list[dict[str, Any]],
    conditions: list[dict[str, Any]],
    want: dict[KueueVersion, tuple[bool, tuple[str, str] | None, int | None]],
) -> None:
    wl = workload(checks, conditions)
    changed = sync_admitted_condition(wl, NOW, features=FeatureGates(gates, version=version))
    want_changed, want_admitted, want_accumulated = want[version]
    assert changed is want_changed
    admitted = wl.find_condition("Admitted")
    got = (admitted.status, admitted.reason) if admitted is not None else None
    assert got == want_admitted
    if want_changed and admitted is not None:
        assert admitted.observed_generation == 1
    assert wl.status is not None
    assert wl.status.accumulated_past_execution_time_seconds == want_accumulated


# --- the job reconciler after an eviction -----------------------------------------------------


async def world(version: KueueVersion, **options: Any) -> World:
    w = World(features=FeatureGates(version=version), **options)
    await w.setup()
    return w


EVICTION_WANT = {
    # (QuotaReserved reason, Admitted reason without checks, Admitted reason with a check
    # that Kueue reset to Pending on eviction)
    V0_19: ("Pending", "NoReservation", "NoReservationUnsatisfiedChecks"),
    MAIN: ("PendingEvaluation", "NoReservation", "NoReservation"),
}


@VERSIONS
@pytest.mark.parametrize("with_check", [False, True], ids=["no-checks", "pending-check"])
async def test_eviction_releases_quota_with_the_versions_reasons(
        version: KueueVersion, with_check: bool) -> None:
    w = await world(version)
    job = base_job(suspend=False)
    job = await w.create_job(job)
    wl = base_wl(admitted_at=w.ts(1))
    wl["status"]["conditions"].append(cond("Evicted", "True", "Preempted",
                                           "Preempted to accommodate a workload", w.ts()))
    if with_check:
        wl["status"]["admissionChecks"] = [{"name": "check", "state": "Pending",
                                            "lastTransitionTime": w.ts(), "message": ""}]
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.workload("wl")
    assert "admission" not in got["status"]
    qr_reason, admitted_plain, admitted_checked = EVICTION_WANT[version]
    conds = conditions_of(got)
    assert conds["QuotaReserved"] == ("False", qr_reason,
                                      "Preempted to accommodate a workload")
    admitted_reason = admitted_checked if with_check else admitted_plain
    admitted_message = {
        "NoReservation": "The workload has no reservation",
        "NoReservationUnsatisfiedChecks":
            "The workload has no reservation and not all checks ready",
    }[admitted_reason]
    assert conds["Admitted"] == ("False", admitted_reason, admitted_message)
    assert conds["Requeued"] == ("True", "Preempted", "Preempted to accommodate a workload")
    assert got["status"]["accumulatedPastExecutionTimeSeconds"] == 1
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [(NORMAL, "Stopped", "Preempted to accommodate a workload")]


# --- a missing WorkloadPriorityClass ------------------------------------------------------------

NOT_FOUND_EVENT = (WARNING, "WorkloadPriorityClassNotFound",
                   'WorkloadPriorityClass "missing-wpc" not found')


@VERSIONS
async def test_missing_priority_class_on_create(version: KueueVersion) -> None:
    w = await world(version)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = "missing-wpc"
    await w.create_job(job)
    with pytest.raises(errors.NotFound):
        await w.reconcile()
    assert w.workloads() == []
    assert w.recorder.events == ([NOT_FOUND_EVENT] if version is MAIN else [])


@VERSIONS
async def test_missing_priority_class_on_label_change(version: KueueVersion) -> None:
    w = await world(version)
    await w.wpc("test-wpc", 100)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = "missing-wpc"
    job = await w.create_job(job)
    wl = base_wl(reserved=False)
    wl["spec"]["priorityClassRef"] = {"group": c.WORKLOAD_PRIORITY_CLASS_GROUP,
                                      "kind": c.WORKLOAD_PRIORITY_CLASS_KIND, "name": "test-wpc"}
    wl["spec"]["priority"] = 100
    await w.create_workload(wl, owner=job)
    with pytest.raises(ReconcileError, match="prepare workload priority"):
        await w.reconcile()
    assert w.workload("wl")["spec"]["priorityClassRef"]["name"] == "test-wpc"
    assert w.recorder.events == ([NOT_FOUND_EVENT] if version is MAIN else [])


@VERSIONS
async def test_update_workload_priority_takes_one_workload(version: KueueVersion) -> None:
    """v0.19.2's ``UpdateWorkloadPriority`` takes one Workload; main's takes several."""
    w = await world(version)
    await w.wpc("test-wpc", 100)
    await w.wpc("test-wpc-high", 200)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = "test-wpc-high"
    job = await w.create_job(job)
    wl = base_wl(reserved=False)
    wl["spec"]["priorityClassRef"] = {"group": c.WORKLOAD_PRIORITY_CLASS_GROUP,
                                      "kind": c.WORKLOAD_PRIORITY_CLASS_KIND, "name": "test-wpc"}
    wl["spec"]["priority"] = 100
    stored = Workload.from_dict(await w.create_workload(wl, owner=job))
    features = FeatureGates(version=version)
    await update_workload_priority(w.client, w.recorder, BatchJob(job, features=features),
                                   stored, features=features)
    got = w.workload("wl")["spec"]
    assert (got["priorityClassRef"]["name"], got["priority"]) == ("test-wpc-high", 200)
    assert w.recorder.events == [(NORMAL, "UpdatedWorkload",
                                  "Updated workload priority class: ns/wl")]


# --- webhook defaulting of the priority-class label ---------------------------------------------

WPC_DEFAULT = {"apiVersion": c.KUEUE_API_VERSION, "kind": "WorkloadPriorityClass",
               "metadata": {"name": "default"}, "value": 100}


@VERSIONS
async def test_default_priority_class_label(version: KueueVersion, kit: Any) -> None:
    hook = BaseWebhook(kit.FakeJob, kit.MemReader(WPC_DEFAULT),
                       integration_manager=IntegrationManager(),
                       features=FeatureGates(version=version))
    obj = kit.make_job(labels={c.QUEUE_LABEL: "lq"})
    await hook.default(obj)
    labels = obj["metadata"]["labels"]
    if version is MAIN:
        assert labels == {c.QUEUE_LABEL: "lq", c.WORKLOAD_PRIORITY_CLASS_LABEL: "default"}
    else:
        assert labels == {c.QUEUE_LABEL: "lq"}
