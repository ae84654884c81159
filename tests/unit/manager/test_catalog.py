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
from integrations.manager import _webhook_specs
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
    crds = reference_integration("jobflow").load_crds()
    paths = ["/mutate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobtemplate"]
    mutating, validating = _webhook_specs(paths, crds)
    assert [s.name for s in mutating] == ["mjobflow.api.practice.com"]
    assert [s.name for s in validating] == ["vjobflow.api.practice.com",
                                            "vjobtemplate.api.practice.com"]
    rule = validating[1].rules[0]
    assert rule["resources"] == ["jobtemplates"]
    assert rule["apiGroups"] == ["api.practice.com"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert mutating[0].rules[0]["operations"] == ["CREATE"]


def test_webhook_path_of_an_unknown_kind_is_an_error() -> None:
    crds = reference_integration("jobflow").load_crds()
    with pytest.raises(ValueError, match="/validate-example-com-v1-widget"):
        _webhook_specs(["/validate-example-com-v1-widget"], crds)
