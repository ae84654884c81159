"""Constants: spot checks against the reference, message truncation, feature gates."""

from __future__ import annotations

import pytest

from jobframework import constants as c
from jobframework.constants import (
    DEFAULT_FEATURES,
    FeatureGate,
    FeatureGates,
    custom_conditions_field_manager,
    truncate_condition_message,
    truncate_event_message,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (c.QUEUE_LABEL, "kueue.x-k8s.io/queue-name"),
        (c.RESOURCE_IN_USE_FINALIZER_NAME, "kueue.x-k8s.io/resource-in-use"),
        (c.JOB_UID_LABEL, "kueue.x-k8s.io/job-uid"),
        (c.PREBUILT_WORKLOAD_LABEL, "kueue.x-k8s.io/prebuilt-workload-name"),
        (c.MAX_EXEC_TIME_SECONDS_LABEL, "kueue.x-k8s.io/max-exec-time-seconds"),
        (c.PROV_REQ_ANNOTATION_PREFIX, "provreq.kueue.x-k8s.io/"),
        (c.TOPOLOGY_SCHEDULING_GATE, "kueue.x-k8s.io/topology"),
        (c.REASON_JOB_NESTING_TOO_DEEP, "JobNestingTooDeep"),
        (c.FAILED_TO_START_FINISHED_REASON, "FailedToStart"),
        (c.PODS_READY_FIELD_MANAGER, "kueue-job-controller-PodsReady"),
        (c.MSG_WORKLOAD_FINISHED.format("ns/wl"), "Workload 'ns/wl' is declared finished"),
        (c.MSG_UPDATED_ADMISSION_GATED_BY.format("a/b"),
         'Updated workload AdmissionGatedBy to "a/b"'),
        (c.MAX_POD_SETS, 18),
    ],
)
def test_strings(value: object, expected: object) -> None:
    assert value == expected


def test_field_manager_for_custom_conditions() -> None:
    assert custom_conditions_field_manager("RayJob") == "kueue-rayjob-controller"


def test_truncation() -> None:
    assert truncate_event_message("short") == "short"
    exact = "x" * 1024
    assert truncate_event_message(exact) == exact
    cut = truncate_event_message("y" * 2000)
    assert len(cut) == 1024
    assert cut.endswith("y ...")
    assert len(truncate_condition_message("z" * 40000).encode()) == 32 * 1024
    # A multi-byte character cut in half is dropped, never emitted as invalid UTF-8.
    text = "é" * 1000
    assert len(truncate_event_message(text).encode()) <= 1024


def test_feature_gates() -> None:
    assert not DEFAULT_FEATURES.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    assert DEFAULT_FEATURES.enabled(FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS)
    short = FeatureGates(ShortWorkloadNames=True)
    assert short.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    both = short.with_gates(MultiKueue=False)
    assert both.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    assert not both.enabled(FeatureGate.MULTIKUEUE)
    assert not short.overrides.get(FeatureGate.MULTIKUEUE)
    assert FeatureGates({FeatureGate.MULTIKUEUE: True}) == FeatureGates()
    assert hash(FeatureGates({FeatureGate.MULTIKUEUE: True})) == hash(FeatureGates())
    with pytest.raises(ValueError):
        FeatureGates(NoSuchGate=True)
    assert repr(short) == "FeatureGates(ShortWorkloadNames=True)"
