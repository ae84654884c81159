"""Integrate your own CRD with Kueue in Python: a ``SleepJob`` (``example.com/v1``).

A SleepJob runs ``spec.replicas`` pods from ``spec.template`` while ``spec.suspend`` is
false; its controller (not shown) fills ``status.active`` and sets
``status.phase: Succeeded`` or ``Failed``. This file is the whole integration: the job
adapter, the registration, and a demo on the in-memory API server where the demo plays
Kueue's scheduler. Run it with ``python docs/examples/sleepjob.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Sequence
from typing import Any

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.indexer import setup_workload_owner_index
from jobframework.integrations import IntegrationCallbacks, IntegrationManager
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo, merge_into_template, restore_pod_spec
from jobframework.reconciler import new_generic_reconciler_factory
from jobframework.runtime.client import Client
from jobframework.runtime.clock import ManualClock, rfc3339
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer

SLEEPJOB = GVK("example.com", "v1", "SleepJob")
WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")


class SleepJob(GenericJob):
    """The adapter: how Kueue sees a SleepJob (one pod set of ``replicas`` pods)."""

    def __init__(self, obj: Object | None = None) -> None:
        self.obj: Object = obj if obj is not None else {}

    def object(self) -> Object:
        return self.obj

    def gvk(self) -> GVK:
        return SLEEPJOB

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    def is_active(self) -> bool:
        return bool((self.obj.get("status") or {}).get("active"))

    async def pods_ready(self, client: Client) -> bool:
        ready = int((self.obj.get("status") or {}).get("ready", 0))
        return ready >= int(self.obj["spec"]["replicas"])

    def finished(self) -> FinishedResult:
        phase = (self.obj.get("status") or {}).get("phase")
        return FinishedResult(f"SleepJob {phase}", phase == "Succeeded",
                              phase in ("Succeeded", "Failed"))

    async def pod_sets(self, client: Client) -> list[PodSet]:
        spec = self.obj["spec"]
        return [PodSet(name="main", count=spec["replicas"],
                       template=copy.deepcopy(spec["template"]))]

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        # Unsuspend and inject the admission (node selectors of the flavor, labels...).
        self.obj["spec"]["suspend"] = False
        merge_into_template(self.obj["spec"]["template"], pod_sets_info[0])

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return restore_pod_spec(self.obj["spec"]["template"], pod_sets_info[0])


CALLBACKS = IntegrationCallbacks(
    new_job=SleepJob,
    new_reconciler=new_generic_reconciler_factory(SleepJob),
    setup_webhook=lambda *args, **kwargs: [],  # see BaseWebhook for a real one
    job_type=SLEEPJOB,
    setup_indexes=lambda indexer: setup_workload_owner_index(indexer, SLEEPJOB),
)


async def admit(client: Client, wl: Object, now: str) -> None:
    """What Kueue's scheduler does when the Workload fits: reserve quota, admit."""
    await client.apply({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": wl["metadata"]["name"], "namespace": wl["metadata"]["namespace"]},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": now}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "on-demand"}, "count": 2}]}},
    }, field_manager=c.ADMISSION_NAME, force=True, subresource="status")


async def demo() -> list[str]:
    """Create a SleepJob, see its Workload, admit it, see it start. Returns a trace."""
    clock = ManualClock()
    server = APIServer(clock)
    server.register_kind(SLEEPJOB, "sleepjobs", True)
    server.register_kind(WORKLOAD, "workloads", True)
    server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor"),
                         "resourceflavors", False, status_subresource=False)
    client = server.client()
    await client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                         "metadata": {"name": "on-demand"},
                         "spec": {"nodeLabels": {"instance-type": "on-demand"}}})

    integrations = IntegrationManager()
    integrations.register_integration("example.com/sleepjob", CALLBACKS)
    integrations.enable_integration("example.com/sleepjob")
    mgr = Manager(client, clock=clock)
    await setup_workload_owner_index(mgr.get_cache(), SLEEPJOB)
    assert CALLBACKS.new_reconciler is not None
    CALLBACKS.new_reconciler(mgr.get_client(), mgr.get_cache(),
                             mgr.get_event_recorder_for("example.com/sleepjob-kueue-controller"),
                             clock=clock, integration_manager=integrations
                             ).setup_with_manager(mgr)

    trace: list[str] = []

    async def until(cond: Any) -> None:
        for i in range(2000):
            if cond():
                return
            await asyncio.sleep(0)
            if i % 20 == 19:
                clock.advance(0.01)
        raise TimeoutError

    task = asyncio.create_task(mgr.start())
    try:
        await client.create({
            "apiVersion": "example.com/v1", "kind": "SleepJob",
            "metadata": {"name": "nap", "namespace": "default",
                         "labels": {c.QUEUE_LABEL: "user-queue"}},
            "spec": {"suspend": True, "replicas": 2,
                     "template": {"spec": {"containers": [
                         {"name": "sleep", "image": "busybox", "args": ["sleep", "60"],
                          "resources": {"requests": {"cpu": "1"}}}]}}}})
        await until(lambda: server.objects(WORKLOAD, "default"))
        [wl] = server.objects(WORKLOAD, "default")
        trace.append(f"workload {wl['metadata']['name']} in queue {wl['spec']['queueName']}")
        await admit(client, wl, rfc3339(clock.now()))

        def job() -> Object:
            return server.objects(SLEEPJOB, "default")[0]

        await until(lambda: job()["spec"]["suspend"] is False)
        trace.append("started on " + str(job()["spec"]["template"]["spec"]["nodeSelector"]))
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task
    return trace


if __name__ == "__main__":
    for line in asyncio.run(demo()):
        print(line)
