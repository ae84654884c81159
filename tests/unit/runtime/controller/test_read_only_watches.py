"""The reference integrations' map-function watches on busy kinds (a JobFlow template's
Jobs, an AppWrapper's Pods, a batch Job's Workloads) promise to read only, so their
informers hand them stored objects instead of a copy per event."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.appwrapper import load_crds as load_appwrapper_crds
from integrations.appwrapper.controller import setup_controllers as setup_appwrapper
from integrations.jobflow import load_crds as load_jobflow_crds
from integrations.jobflow.controller import setup_controllers as setup_jobflow
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK
from jobframework.runtime.source import _reads_only
from jobframework.testing import APIServer


async def test_map_watches_of_the_integrations_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    watched: list[tuple[GVK, Any, tuple[Any, ...]]] = []
    original = ControllerBuilder.watches

    def recording(self: ControllerBuilder, gvk: GVK, handler: Any, **kwargs: Any) -> Any:
        watched.append((gvk, handler, tuple(kwargs.get("predicates", ()))))
        return original(self, gvk, handler, **kwargs)

    monkeypatch.setattr(ControllerBuilder, "watches", recording)
    server = APIServer(ManualClock())
    for crd in (*load_jobflow_crds(), *load_appwrapper_crds()):
        server.register_crd(crd)
    mgr = Manager(server.client(), clock=server.clock)
    await setup_jobflow(mgr)
    await setup_appwrapper(mgr)
    kinds = {gvk.kind: _reads_only(handler) and all(_reads_only(p) for p in predicates)
             for gvk, handler, predicates in watched}
    assert kinds == {"JobTemplate": True, "Job": True, "Pod": True, "Node": True}
