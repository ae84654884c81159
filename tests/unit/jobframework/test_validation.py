"""validate_job_on_create / validate_job_on_update, after Kueue's validation_test.go and
base_webhook_test.go, with the exact messages."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.constants import FeatureGates
from jobframework.field import ErrorList
from jobframework.runtime.objects import GVK
from jobframework.validation import (
    go_atoi,
    is_dns1123_label,
    is_dns1123_subdomain,
    maximum_execution_time_seconds_for_object,
    parse_csv,
    prebuilt_workload_name_for,
    set_prebuilt_workload_name,
    should_validate_ray_or_spark_job_on_update,
    support_prebuilt_workload,
    validate_job_on_create,
    validate_job_on_update,
    workload_slice_enabled,
)

Q = "kueue.x-k8s.io/queue-name"
MAXEXEC = "kueue.x-k8s.io/max-exec-time-seconds"
WPC = "kueue.x-k8s.io/priority-class"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
GATED = "kueue.x-k8s.io/admission-gated-by"
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
WIA_OFF = FeatureGates(WorkloadIdentifierAnnotations=False)


def msgs(errs: ErrorList) -> list[str]:
    return [str(e) for e in errs]


# --- create ---------------------------------------------------------------------------------


def test_valid_job(kit: Any) -> None:
    assert validate_job_on_create(kit.FakeJob(kit.make_job(labels={Q: "queue"}))) == []


def test_invalid_queue_name(kit: Any) -> None:
    errs = validate_job_on_create(kit.FakeJob(kit.make_job(labels={Q: "a_b"})))
    assert msgs(errs) == [
        f'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b": {SUBDOMAIN_MSG}']


def test_too_long_queue_name_joins_messages(kit: Any) -> None:
    name = "A" * 254
    errs = validate_job_on_create(kit.FakeJob(kit.make_job(labels={Q: name})))
    assert msgs(errs) == [
        f'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "{name}": '
        f"must be no more than 253 characters,{SUBDOMAIN_MSG}"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: "
              "should be greater than 0"),
        ("-5", "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: -5: "
               "should be greater than 0"),
        ("abc", 'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "abc": '
                'strconv.Atoi: parsing "abc": invalid syntax'),
        ("", 'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "": '
             'strconv.Atoi: parsing "": invalid syntax'),
        ("99999999999999999999", 'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: '
         'Invalid value: "99999999999999999999": strconv.Atoi: parsing "99999999999999999999": '
         'value out of range'),
    ],
)
def test_max_exec_time(kit: Any, value: str, message: str) -> None:
    errs = validate_job_on_create(kit.FakeJob(kit.make_job(labels={MAXEXEC: value})))
    assert msgs(errs) == [message]


def test_max_exec_time_valid(kit: Any) -> None:
    assert validate_job_on_create(kit.FakeJob(kit.make_job(labels={MAXEXEC: "+30"}))) == []
    assert maximum_execution_time_seconds_for_object(kit.make_job(labels={MAXEXEC: "30"})) == 30
    for bad in ("0", "x", str(2**31)):
        assert maximum_execution_time_seconds_for_object(
            kit.make_job(labels={MAXEXEC: bad})) is None


@pytest.mark.kueue_case(
    "TestValidateJobOnCreate/elastic annotation on batch/v1.Job is allowed",
    "TestValidateJobOnCreate/elastic annotation on unsupported framework is rejected",
    "TestValidateJobOnCreate/elastic annotation without feature gate is ignored",
)
def test_elastic_annotation(kit: Any) -> None:
    obj = kit.make_job(annotations={ELASTIC: "true"})
    assert validate_job_on_create(kit.FakeJob(obj)) == []
    errs = validate_job_on_create(kit.FakeJob(obj, JOBSET))
    assert msgs(errs) == [
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not "
        'supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"']
    off = FeatureGates(ElasticJobsViaWorkloadSlices=False)
    assert validate_job_on_create(kit.FakeJob(obj, JOBSET), features=off) == []


def test_prebuilt_unsupported_kind(kit: Any) -> None:
    obj = kit.make_job(labels={PREBUILT: "wl"})
    custom = GVK("example.com", "v1", "Sample")
    assert validate_job_on_create(kit.FakeJob(obj)) == []
    assert msgs(validate_job_on_create(kit.FakeJob(obj, custom))) == [
        "metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Forbidden: Is not supported "
        'for "example.com/v1, Kind=Sample"']


def test_prebuilt_accepted_on_a_kind_its_integration_declares(kit: Any) -> None:
    obj = kit.make_job(labels={PREBUILT: "wl"})
    declared = GVK("example.com", "v1", "Declared")
    assert msgs(validate_job_on_create(kit.FakeJob(obj, declared))) != []
    support_prebuilt_workload(declared)
    assert validate_job_on_create(kit.FakeJob(obj, declared)) == []
    # Our integrations declare theirs when they register (MultiKueue's worker copies).
    from integrations.daemonjob import DAEMONJOB_GVK
    from integrations.daemonjob import register as register_dj
    from integrations.jobflow import JOBFLOW_GVK
    from integrations.jobflow import register as register_jf
    from jobframework.integrations import IntegrationManager
    im = IntegrationManager()
    register_jf(im)
    register_dj(im)
    for gvk in (JOBFLOW_GVK, DAEMONJOB_GVK):
        assert validate_job_on_create(kit.FakeJob(obj, gvk)) == []


def test_prebuilt_invalid_names(kit: Any) -> None:
    label = kit.make_job(labels={PREBUILT: "workload name"})
    assert msgs(validate_job_on_create(kit.FakeJob(label))) == [
        'metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: '
        f'"workload name": {SUBDOMAIN_MSG}']
    ann = kit.make_job(annotations={PREBUILT: "workload name"})
    assert msgs(validate_job_on_create(kit.FakeJob(ann))) == [
        'metadata.annotations[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: '
        f'"workload name": {SUBDOMAIN_MSG}']
    # Gate off: a short annotation is ignored, the label is validated.
    assert validate_job_on_create(kit.FakeJob(ann), features=WIA_OFF) == []


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("example.com/gate", []),
        ("example.com/a, example.com/b", []),
        ("example.com/a,,example.com/b", [
            f'metadata.annotations[{GATED}]: Invalid value: "example.com/a,,example.com/b": '
            "cannot contain empty gate names"]),
        ("example.com/a,example.com/a", [
            f'metadata.annotations[{GATED}]: Invalid value: "example.com/a,example.com/a": '
            "duplicate gate name: example.com/a"]),
        ("nogate", [
            f'metadata.annotations[{GATED}]: Invalid value: "nogate": must be a '
            'domain-prefixed path (such as "acme.io/foo")']),
        ("Bad_Host/x", [
            f'metadata.annotations[{GATED}]: Invalid value: "Bad_Host": {SUBDOMAIN_MSG}']),
        ("example.com/" + "a" * 60, [
            f"metadata.annotations[{GATED}]: Too long: may not be more than 63 bytes"]),
        ("example.com/a b", [
            f'metadata.annotations[{GATED}]: Invalid value: "a b": Invalid path (regex used '
            "for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"]),
    ],
)
def test_admission_gated_by_format(kit: Any, value: str, messages: list[str]) -> None:
    obj = kit.make_job(annotations={GATED: value})
    assert msgs(validate_job_on_create(kit.FakeJob(obj))) == messages
    assert validate_job_on_create(kit.FakeJob(obj),
                                  features=FeatureGates(AdmissionGatedBy=False)) == []


def test_aggregate_of_several_errors(kit: Any) -> None:
    obj = kit.make_job(labels={Q: "a_b", MAXEXEC: "0"})
    agg = validate_job_on_create(kit.FakeJob(obj)).to_aggregate()
    assert agg is not None
    assert str(agg) == (
        f'[metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b": {SUBDOMAIN_MSG}, '
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be "
        "greater than 0]")


# --- update ---------------------------------------------------------------------------------


def no_default(ns: str) -> bool:
    return False


def with_default(ns: str) -> bool:
    return True


def update(kit: Any, old: dict[str, Any], new: dict[str, Any], default: Any = no_default,
           features: FeatureGates | None = None, gvk: GVK | None = None) -> list[str]:
    kw = {"features": features} if features else {}
    args = (gvk,) if gvk else ()
    return msgs(validate_job_on_update(kit.FakeJob(old, *args), kit.FakeJob(new, *args),
                                       default, **kw))


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/local queue cannot be changed if job is not suspended",
)
def test_queue_immutable_while_running(kit: Any) -> None:
    old = kit.make_job(labels={Q: "lq1"}, suspend=False)
    new = kit.make_job(labels={Q: "lq2"}, suspend=False)
    assert update(kit, old, new) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "lq2": field is immutable']


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/local queue can be changed",
    "TestValidateJobOnUpdate/local queue can be changed from default",
)
def test_queue_changes_while_suspended(kit: Any) -> None:
    assert update(kit, kit.make_job(labels={Q: "lq1"}, suspend=True),
                  kit.make_job(labels={Q: "lq2"}, suspend=True)) == []
    assert update(kit, kit.make_job(labels={Q: "default"}, suspend=True),
                  kit.make_job(labels={Q: "lq2"}, suspend=True)) == []


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/local queue cannot be removed if default queue exists and feature "
    "is enabled",
    "TestValidateJobOnUpdate/local queue can be removed if default queue does not exists and "
    "feature is enabled",
)
def test_queue_removal_with_default_queue(kit: Any) -> None:
    old = kit.make_job(labels={Q: "lq1"}, suspend=True)
    new = kit.make_job(suspend=True)
    assert update(kit, old, new, with_default) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": queue-name must not be '
        "empty in namespace with default queue"]
    assert update(kit, old, new, no_default) == []


def test_queue_removal_namespace_is_passed(kit: Any) -> None:
    seen: list[str] = []

    def lookup(ns: str) -> bool:
        seen.append(ns)
        return False

    update(kit, kit.make_job(namespace="ns1", labels={Q: "q"}, suspend=True),
           kit.make_job(namespace="ns1", suspend=True), lookup)
    assert seen == ["ns1"]


def test_custom_failure_example_from_base_webhook(kit: Any) -> None:
    old = kit.make_job(labels={Q: "queue"}, suspend=False)
    new = kit.make_job(labels={Q: "changed"}, suspend=False)
    assert update(kit, old, new) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "changed": field is '
        "immutable"]


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/elastic job enabled annotation cannot be removed on update",
    "TestValidateJobOnUpdate/elastic job enabled annotation cannot be added on update",
)
@pytest.mark.parametrize(("old_ann", "new_ann"), [({ELASTIC: "true"}, {}), ({}, {ELASTIC: "true"})])
def test_elastic_toggle_is_immutable(kit: Any, old_ann: dict[str, str],
                                     new_ann: dict[str, str]) -> None:
    got = update(kit, kit.make_job(annotations=old_ann, suspend=True),
                 kit.make_job(annotations=new_ann, suspend=True))
    value = "true" if new_ann else "false"
    assert got == [f"metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: {value}: "
                   "field is immutable"]


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/prebuilt workload label valid on update",
    "TestValidateJobOnUpdate/prebuilt workload annotation valid on update, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload label fallback valid on update, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload same label and annotation on update, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload invalid label format with fallback on update, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload annotation update, WorkloadIdentifierAnnotations "
    "enabled",
    "TestValidateJobOnUpdate/prebuilt workload annotation valid for long names > 63 chars when "
    "WorkloadIdentifierAnnotations disabled",
    "TestValidateJobOnUpdate/prebuilt workload annotation update not suspended, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload label to annotation update, "
    "WorkloadIdentifierAnnotations enabled",
    "TestValidateJobOnUpdate/prebuilt workload annotation to label update, "
    "WorkloadIdentifierAnnotations enabled",
)
def test_prebuilt_rules_on_update(kit: Any) -> None:
    # X21: label valid on update, WIA disabled.
    assert update(kit, kit.make_job(labels={PREBUILT: "wl"}, suspend=True),
                  kit.make_job(labels={PREBUILT: "wl"}, suspend=True), features=WIA_OFF) == []
    # X22-X24: annotation, label fallback, both.
    for meta in ({"annotations": {PREBUILT: "wl"}}, {"labels": {PREBUILT: "wl"}},
                 {"annotations": {PREBUILT: "wl"}, "labels": {PREBUILT: "wl"}}):
        assert update(kit, kit.make_job(suspend=True, **meta),
                      kit.make_job(suspend=True, **meta)) == []
    # X25: invalid label with fallback.
    assert update(kit, kit.make_job(labels={PREBUILT: "wl"}, suspend=True),
                  kit.make_job(labels={PREBUILT: "workload name"}, suspend=True)) == [
        'metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: '
        f'"workload name": {SUBDOMAIN_MSG}']
    # X27: annotation changes while suspended.
    assert update(kit, kit.make_job(annotations={PREBUILT: "wl1"}, suspend=True),
                  kit.make_job(annotations={PREBUILT: "wl2"}, suspend=True)) == []
    # X28: long annotation valid with WIA disabled.
    long = "a" * 77
    assert prebuilt_workload_name_for(kit.make_job(annotations={PREBUILT: long}),
                                      features=WIA_OFF) == long
    assert update(kit, kit.make_job(annotations={PREBUILT: long}, suspend=True),
                  kit.make_job(annotations={PREBUILT: long}, suspend=True),
                  features=WIA_OFF) == []
    # X29: annotation changes while running.
    assert update(kit, kit.make_job(annotations={PREBUILT: "wl1"}, suspend=False),
                  kit.make_job(annotations={PREBUILT: "wl2"}, suspend=False)) == [
        'metadata.annotations[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: "wl2": '
        "field is immutable"]
    # X30/X31: moving between label and annotation while suspended.
    assert update(kit, kit.make_job(labels={PREBUILT: "wl"}, suspend=True),
                  kit.make_job(annotations={PREBUILT: "wl"}, suspend=True)) == []
    assert update(kit, kit.make_job(annotations={PREBUILT: "wl"}, suspend=True),
                  kit.make_job(labels={PREBUILT: "wl"}, suspend=True)) == []


def test_max_exec_time_immutable_unless_both_suspended(kit: Any) -> None:
    msg = ('metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "20": '
           "field is immutable")
    for old_s, new_s, errs in ((True, True, []), (False, True, [msg]), (True, False, [msg])):
        assert update(kit, kit.make_job(labels={MAXEXEC: "10"}, suspend=old_s),
                      kit.make_job(labels={MAXEXEC: "20"}, suspend=new_s)) == errs


def test_workload_priority_class_rules(kit: Any) -> None:
    add = update(kit, kit.make_job(suspend=False), kit.make_job(labels={WPC: "high"},
                                                                suspend=False))
    assert add == ['metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
                   "WorkloadPriorityClass cannot be added to a non-suspended workload"]
    assert update(kit, kit.make_job(suspend=True),
                  kit.make_job(labels={WPC: "high"}, suspend=True)) == []
    for suspend in (True, False):
        assert update(kit, kit.make_job(labels={WPC: "high"}, suspend=suspend),
                      kit.make_job(suspend=suspend)) == [
            'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
            "WorkloadPriorityClass cannot be removed from a workload"]
    assert update(kit, kit.make_job(labels={WPC: "low"}, suspend=False),
                  kit.make_job(labels={WPC: "high"}, suspend=False)) == []


def test_admission_gated_by_on_update(kit: Any) -> None:
    path = f"metadata.annotations[{GATED}]"
    assert update(kit, kit.make_job(suspend=True),
                  kit.make_job(annotations={GATED: "example.com/a"}, suspend=True)) == [
        f"{path}: Forbidden: cannot add admission gate after creation"]
    assert update(kit, kit.make_job(annotations={GATED: "example.com/a"}, suspend=True),
                  kit.make_job(annotations={GATED: "example.com/a,example.com/b"},
                               suspend=True)) == [
        f"{path}: Forbidden: can only remove gates, not add new ones"]
    assert update(kit, kit.make_job(annotations={GATED: "example.com/a,example.com/b"},
                                    suspend=True),
                  kit.make_job(annotations={GATED: "example.com/b"}, suspend=True)) == []
    assert update(kit, kit.make_job(annotations={GATED: "example.com/a"}, suspend=True),
                  kit.make_job(suspend=True)) == []


def test_should_validate_ray_or_spark_update(kit: Any) -> None:
    with_q = kit.FakeJob(kit.make_job(labels={Q: "q"}))
    without = kit.FakeJob(kit.make_job())
    assert should_validate_ray_or_spark_job_on_update(without, with_q, False)
    assert should_validate_ray_or_spark_job_on_update(without, without, True)
    assert should_validate_ray_or_spark_job_on_update(with_q, without, False)
    assert not should_validate_ray_or_spark_job_on_update(
        with_q, without, False, features=FeatureGates(ValidateRayAndSparkJobUpdates=False))
    assert not should_validate_ray_or_spark_job_on_update(without, without, False)


# --- helpers ----------------------------------------------------------------------------------


def test_name_checks() -> None:
    assert is_dns1123_subdomain("a.b-c") == []
    assert is_dns1123_subdomain("abc\n") != []
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_label("A")[0].startswith("a lowercase RFC 1123 label must consist")
    assert go_atoi("-12") == -12
    with pytest.raises(ValueError, match="invalid syntax"):
        go_atoi(" 1")
    assert parse_csv(" a , b,") == ["a", "b", ""]
    assert parse_csv("  ") == []


def test_prebuilt_name_helpers(kit: Any) -> None:
    obj = kit.make_job(labels={PREBUILT: "lbl"}, annotations={PREBUILT: "ann"})
    assert prebuilt_workload_name_for(obj) == "ann"
    assert prebuilt_workload_name_for(obj, features=WIA_OFF) == "lbl"
    fresh = kit.make_job()
    set_prebuilt_workload_name(fresh, "wl", features=WIA_OFF)
    assert fresh["metadata"]["labels"] == {PREBUILT: "wl"}
    set_prebuilt_workload_name(fresh, "x" * 64, features=WIA_OFF)
    assert fresh["metadata"]["annotations"] == {PREBUILT: "x" * 64}
    assert workload_slice_enabled(kit.make_job(annotations={ELASTIC: "true"}))
    assert not workload_slice_enabled(kit.make_job(annotations={ELASTIC: "yes"}))
    assert not workload_slice_enabled(None)
