"""The controllers wired into a running manager: informer cache, indexes, Owns and the
JobTemplate watch, against the in-memory server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from integrations.jobflow import JOB_GVK, JOBFLOW_GVK, JOBTEMPLATE_GVK, setup
from jobframework.runtime.events import EVENT_GVK
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.testing.running import running, until

from .helpers import finish, flow, jobflow, jobtemplate


async def test_flow_runs_through_the_manager(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    wiring = await setup(mgr)
    assert wiring.kueue_reconciler is None

    async def jobs() -> dict[str, Object]:
        return {j["metadata"]["name"]: j for j in (await api.list(JOB_GVK,
                                                                   namespace="default")).items}

    async def state() -> str:
        wf = await api.get(JOBFLOW_GVK, "wf", namespace="default")
        return str(wf.get("status", {}).get("state", ""))

    async with running(mgr):
        await api.create(jobflow("wf", [flow("a"), flow("b", "a", ref="tpl")]))
        await until(lambda: _has(jobs, "wf-a"), "the root Job")
        await until(lambda: _eq(state, "Running"), "Running")
        job = (await jobs())["wf-a"]
        await api.update_status(finish(job))
        # The Job's update event (Owns) brings the flow to the missing template.
        async def waiting() -> bool:
            wf = await api.get(JOBFLOW_GVK, "wf", namespace="default")
            return any(f["phase"] == "WaitingForTemplate"
                       for f in wf.get("status", {}).get("flows", []))
        await until(waiting, "WaitingForTemplate")
        # Creating the template (watched through the template-ref index) unblocks it.
        await api.create(jobtemplate("tpl"))
        await until(lambda: _has(jobs, "wf-b"), "the templated Job")

        async def dependency_list() -> bool:
            t = await api.get(JOBTEMPLATE_GVK, "tpl", namespace="default")
            return bool(t.get("status", {}).get("dependencyList") == ["wf-b"])
        await until(dependency_list, "dependencyList")
        await api.update_status(finish((await jobs())["wf-b"]))
        await until(lambda: _eq(state, "Succeed"), "Succeed")

        async def succeeded_event() -> bool:
            events = (await api.list(EVENT_GVK, namespace="default")).items
            return any(e.get("reason") == "Succeeded" for e in events)
        await until(succeeded_event, "the Succeeded event")


async def _has(jobs: Callable[[], Awaitable[dict[str, Object]]], name: str) -> bool:
    return name in await jobs()


async def _eq(fn: Callable[[], Awaitable[str]], value: str) -> bool:
    return await fn() == value


async def test_kueue_mode_creates_the_workload_through_the_manager(server: APIServer) -> None:
    from jobframework import constants as c
    from jobframework.reconciler import ReconcilerOptions

    from .helpers import Harness
    from .test_kueue import WORKLOAD, Kueue, queued

    kq = Kueue(Harness(server))
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    wiring = await setup(mgr, kueue=ReconcilerOptions(clock=server.clock,
                                                      integration_manager=kq.im))
    assert wiring.kueue_reconciler is not None

    async def workloads() -> list[Object]:
        return list((await api.list(WORKLOAD, namespace="default")).items)

    async with running(mgr):
        await api.create(queued("wf", [flow("a"), flow("b", "a")]))

        async def created() -> bool:
            return len(await workloads()) == 1
        await until(created, "the Workload")
        (wl,) = await workloads()
        assert [p["name"] for p in wl["spec"]["podSets"]] == ["a", "b"]
        assert wl["metadata"]["labels"][c.JOB_UID_LABEL]
        assert (await api.list(JOB_GVK, namespace="default")).items == [], "still queued"
