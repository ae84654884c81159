"""The fault run's lifecycle objects, built from each registered integration's probe
object: every integration in the registry takes part (not marked ``faults``: runs with the
unit tests)."""

from __future__ import annotations

import json

import pytest

from integrations.catalog import reference_names

from .harness import (
    POD_CPU,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    lifecycle_object,
    reference_integration_suspended,
    watched_kinds,
)


def containers(node: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    if isinstance(node, dict):
        out += [c for c in node.get("containers") or [] if isinstance(c, dict)]
        for value in node.values():
            out += containers(value)
    elif isinstance(node, list):
        for value in node:
            out += containers(value)
    return out


@pytest.mark.parametrize("integration", sorted(reference_names()))
def test_every_registered_integration_gets_a_queued_prioritised_object(
        integration: str) -> None:
    obj = lifecycle_object(integration, f"{integration}-0007", "ns", "q", "faults-high")
    meta = obj["metadata"]
    assert (meta["name"], meta["namespace"]) == (f"{integration}-0007", "ns")
    assert meta["labels"][QUEUE_LABEL] == "q"
    assert meta["labels"][PRIORITY_LABEL] == "faults-high"
    found = containers(obj["spec"])
    assert found, "the probe object has pod templates"
    assert all(c["resources"]["requests"]["cpu"] == POD_CPU for c in found)  # type: ignore[index]


def test_nested_objects_are_renamed_per_lifecycle() -> None:
    """An AppWrapper's wrapped Pod has a name of its own: two lifecycles must not share it."""
    a = json.dumps(lifecycle_object("appwrapper", "appwrapper-0001", "ns", "q", "low"))
    b = json.dumps(lifecycle_object("appwrapper", "appwrapper-0002", "ns", "q", "low"))
    assert '"name": "appwrapper-0001-0"' in a
    assert '"name": "appwrapper-0002-0"' in b


def test_a_kind_is_watched_for_every_registered_integration() -> None:
    kinds = watched_kinds(reference_names())
    assert [k.gvk.kind for k in kinds] == ["AppWrapper", "Job", "DaemonJob", "JobFlow"]


@pytest.mark.parametrize("integration", sorted(reference_names()))
def test_suspension_is_read_through_the_integrations_own_adapter(integration: str) -> None:
    obj = lifecycle_object(integration, "x", "ns", "q", "low")
    obj["spec"]["suspend"] = True
    assert reference_integration_suspended(integration, obj)
    obj["spec"]["suspend"] = False
    assert not reference_integration_suspended(integration, obj)
