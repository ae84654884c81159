"""The reference-integration catalog and the manager's webhook configuration specs."""

from __future__ import annotations

import argparse

import pytest

from integrations.__main__ import _integrations
from integrations.catalog import (
    DEFAULT_INTEGRATIONS,
    FRAMEWORK_NAMES,
    MODULES,
    by_framework_name,
    reference_integration,
    reference_integrations,
)
from integrations.manager import webhook_specs
from jobframework.runtime.objects import GVK


def test_jobflow_surface() -> None:
    jf = reference_integration("jobflow")
    assert jf.framework_name == "JobFlow.v1alpha1.api.practice.com"
    assert jf.gvk == GVK("api.practice.com", "v1alpha1", "JobFlow")
    assert {c["metadata"]["name"] for c in jf.load_crds()} == {
        "jobflows.api.practice.com", "jobtemplates.api.practice.com"}
    probe = jf.probe_object("ns1")
    assert probe["metadata"]["namespace"] == "ns1"
    assert probe["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "probe"
    assert not probe["spec"].get("suspend")


def test_unknown_integration_is_named() -> None:
    with pytest.raises(ValueError, match="unknown integration 'nope'; known: jobflow"):
        reference_integration("nope")


def test_duplicates_are_dropped_in_order() -> None:
    assert [i.name for i in reference_integrations(["jobflow", "jobflow"])] == ["jobflow"]


def test_every_default_integration_loads() -> None:
    for name in DEFAULT_INTEGRATIONS:
        integration = reference_integration(name)
        assert integration.name == name
        assert integration.framework_name == FRAMEWORK_NAMES[name]


def test_by_framework_name_keeps_known_entries_only() -> None:
    names = ["AppWrapper.v1beta2.workload.codeflare.dev", "Other.v1.example.com",
             "JobFlow.v1alpha1.api.practice.com"]
    assert by_framework_name(names) == ["jobflow", "appwrapper"]


def test_cli_integrations_flag() -> None:
    assert _integrations(" jobflow , jobflow") == ("jobflow", "jobflow")
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown integration.*bogus"):
        _integrations("jobflow,bogus")
    with pytest.raises(argparse.ArgumentTypeError, match="none given"):
        _integrations(" , ")
    assert set(MODULES) >= set(DEFAULT_INTEGRATIONS)


def test_webhook_specs_from_paths_and_crds() -> None:
    resources = reference_integration("jobflow").webhook_resources()
    paths = ["/mutate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobtemplate"]
    mutating, validating = webhook_specs(paths, resources)
    assert [s.name for s in mutating] == ["mjobflow.api.practice.com"]
    assert [s.name for s in validating] == ["vjobflow.api.practice.com",
                                            "vjobtemplate.api.practice.com"]
    rule = validating[1].rules[0]
    assert rule["resources"] == ["jobtemplates"]
    assert rule["apiGroups"] == ["api.practice.com"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert mutating[0].rules[0]["operations"] == ["CREATE"]


def test_webhook_path_of_an_unknown_kind_is_an_error() -> None:
    resources = reference_integration("jobflow").webhook_resources()
    with pytest.raises(ValueError, match="/validate-example-com-v1-widget"):
        webhook_specs(["/validate-example-com-v1-widget"], resources)


def test_batchjob_surface_and_its_webhooks_skip_system_namespaces() -> None:
    # batch/v1 has no CRD of ours: the Job webhooks come from webhook_resources(), scoped
    # as Kueue's own (kube-system and kueue-system left alone).
    bj = reference_integration("batchjob")
    assert bj.framework_name == "Job.v1.batch"
    assert bj.gvk == GVK("batch", "v1", "Job")
    assert bj.load_crds() == []
    assert bj.probe_object("ns1")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "probe"
    assert "batchjob" not in DEFAULT_INTEGRATIONS
    assert by_framework_name(["Job.v1.batch"]) == ["batchjob"]
    mutating, validating = webhook_specs(
        ["/mutate-batch-v1-job", "/validate-batch-v1-job"], bj.webhook_resources())
    # Webhook names need three DNS labels: a one-label group gets our domain.
    assert [s.name for s in mutating + validating] == [
        "mjob.batch.kueue-jobframework.io", "vjob.batch.kueue-jobframework.io"]
    assert validating[0].rules[0]["resources"] == ["jobs"]
    selector = mutating[0].namespace_selector
    assert selector is not None
    assert selector["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
