"""The shipped CRD: a structural schema the original sample passes unchanged; the sample
runs; what the schema prunes and refuses."""

from __future__ import annotations

import copy

import pytest

from integrations.daemonjob import DAEMONJOB_GVK, load_crds, load_samples
from integrations.daemonjob.webhook import default_daemonjob, validate_daemonjob
from jobframework.runtime.errors import Invalid
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer

from .helpers import Harness, daemonjob


def the_crd() -> Object:
    (crd,) = load_crds()
    return crd


def in_default(doc: Object) -> Object:
    """``doc`` as ``kubectl apply`` sends it in the default namespace."""
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("namespace", "default")
    return doc


def sample() -> Object:
    """The original operator's sample."""
    (doc,) = load_samples()["example.yaml"]
    return in_default(doc)


def all_samples() -> list[tuple[str, Object]]:
    return [(name, doc) for name, docs in load_samples().items() for doc in docs]


def test_crd_names_scope_and_subresources() -> None:
    crd = the_crd()
    assert crd["metadata"]["name"] == "daemonjobs.api.practice.com"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"], names["listKind"]) == (
        "DaemonJob", "daemonjobs", "daemonjob", "DaemonJobList")
    assert names["shortNames"] == ["dj"]
    assert crd["spec"]["group"] == "api.practice.com"
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    assert "x-kubernetes-preserve-unknown-fields" not in schema, "structural, not open"
    assert "x-kubernetes-preserve-unknown-fields" not in schema["properties"]["status"]


def test_printer_columns() -> None:
    (version,) = the_crd()["spec"]["versions"]
    columns = [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
               for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Status", "string", ".status.state", 0),
        ("Desired", "integer", ".status.desired", 0),
        ("Running", "integer", ".status.running", 0),
        ("Succeeded", "integer", ".status.succeeded", 0),
        ("Failed", "integer", ".status.failed", 0),
        ("Failed-Node", "string", ".status.failedNode", 1),
        ("Suspended", "boolean", ".spec.suspend", 1),
        ("Managed-By", "string", ".spec.managedBy", 1),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]


def test_the_original_sample_is_shipped() -> None:
    doc = sample()
    assert doc["metadata"]["name"] == "daemonjob-example"
    assert doc["spec"]["excludeNodeList"] == "node1, node2"
    assert doc["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize("name,doc", all_samples(), ids=lambda v: str(v)[:30])
async def test_sample_is_valid_and_stored_without_losing_a_field(
    server: APIServer, name: str, doc: Object
) -> None:
    assert doc["kind"] == "DaemonJob"
    assert validate_daemonjob(doc) == [], name
    created = await server.client().create(in_default(doc))
    assert created["spec"] == doc["spec"], f"{name}: the schema pruned something"


async def test_sample_runs_to_succeed(h: Harness) -> None:
    await h.add_nodes("node1", "node2", "node3", "node4")
    doc = sample()
    default_daemonjob(doc)
    await h.api.create(doc)
    await h.reconcile("daemonjob-example")
    jobs = await h.jobs()
    assert set(jobs) == {"daemonjob-example-node3", "daemonjob-example-node4"}
    for name in jobs:
        await h.complete(name)
    await h.reconcile("daemonjob-example")
    dj = await h.get("daemonjob-example")
    assert dj["status"]["state"] == "Succeed"
    assert (dj["status"]["desired"], dj["status"]["succeeded"]) == (2, 2)


async def test_unknown_fields_are_pruned_outside_the_embedded_types(
    server: APIServer,
) -> None:
    api = server.client()
    dj = daemonjob(globalParams={"env": [{"name": "A", "value": "1", "valu": "typo"}],
                                 "label": {"typo": "x"}, "labels": {"a": "b"}},
                   completionMode="Indexed",
                   podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {
                       "operator": "In", "values": [42]}}]},
                   pod={"futureField": {"x": 1}})
    dj["kindd"] = "typo"
    # A misspelt JobSpec field at spec level is pruned, not copied into every node Job.
    dj["spec"]["paralelism"] = 3
    dj["spec"]["template"]["metadata"] = {"labels": {"x": "y"}}
    created = await api.create(dj)
    assert "kindd" not in created
    assert "paralelism" not in created["spec"]
    assert created["spec"]["globalParams"] == {"env": [{"name": "A", "value": "1"}],
                                               "labels": {"a": "b"}}
    # The embedded pod template and the inlined JobSpec fields are kept as written.
    assert created["spec"]["template"] == dj["spec"]["template"]
    assert created["spec"]["completionMode"] == "Indexed"
    assert created["spec"]["podFailurePolicy"] == dj["spec"]["podFailurePolicy"]
    created["status"] = {"state": "Running", "statee": "typo",
                         "nodes": [{"name": "n1", "phase": "Running", "phaze": "typo"}]}
    stored = await api.update_status(created)
    assert stored["status"] == {"state": "Running", "nodes": [{"name": "n1",
                                                               "phase": "Running"}]}


@pytest.mark.parametrize("spec,path", [
    ({"failurePolicy": "Retry"}, "spec.failurePolicy"),
    ({"failurePolicy": "failfast"}, "spec.failurePolicy"),
    ({"excludeNodeList": ["n1"]}, "spec.excludeNodeList"),
    ({"parallelism": "2"}, "spec.parallelism"),
    ({"suspend": "yes"}, "spec.suspend"),
    ({"globalParams": {"env": [{"value": "no name"}]}}, "spec.globalParams.env[0].name"),
    ({"globalParams": {"labels": {"a": 1}}}, "spec.globalParams.labels.a"),
])
async def test_schema_refuses(server: APIServer, spec: dict[str, object], path: str) -> None:
    with pytest.raises(Invalid) as info:
        await server.client().create(daemonjob(**spec))
    assert path in str(info.value)


async def test_failure_policy_enum_accepts_both_values(server: APIServer) -> None:
    api = server.client()
    for i, policy in enumerate(("FailFast", "Continue")):
        created = await api.create(daemonjob(f"dj{i}", failurePolicy=policy))
        assert created["spec"]["failurePolicy"] == policy


async def test_status_state_enum(server: APIServer) -> None:
    api = server.client()
    await api.create(daemonjob())
    obj = await api.get(DAEMONJOB_GVK, "dj", namespace="default")
    obj["status"] = {"state": "Succeeded"}
    with pytest.raises(Invalid) as info:
        await api.update_status(obj)
    assert "status.state" in str(info.value)
    obj["status"] = {"state": "Succeed"}
    assert (await api.update_status(obj))["status"]["state"] == "Succeed"
