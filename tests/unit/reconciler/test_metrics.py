"""Kueue's job metrics (``pkg/metrics``) as the jobframework records them: workload creation
latency (Kueue v0.19.2 TestRecordWorkloadCreationLatency) and time to ready."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from jobframework import constants as c
from jobframework.api import Workload
from jobframework.config import parse_configuration, reconciler_options_from
from jobframework.constants import FeatureGates
from jobframework.metrics import (
    LOCAL_QUEUE_GVK,
    WAIT_TIME_BUCKETS,
    WORKLOAD_CREATION_LATENCY_BUCKETS,
    JobMetrics,
    LocalQueueMetricsConfig,
    job_metrics_for,
    record_workload_creation_latency,
)
from jobframework.reconciler import GenericReconciler
from jobframework.runtime.clock import ManualClock, rfc3339
from jobframework.runtime.manager import Manager
from jobframework.runtime.selectors import LabelSelector

from .helpers import MockJob, World, admitted_status

LATENCY = "kueue_workload_creation_latency_seconds"
READY = "kueue_ready_wait_time_seconds"
ADMITTED_READY = "kueue_admitted_until_ready_wait_time_seconds"
LQ_READY = "kueue_local_queue_ready_wait_time_seconds"
LQ_ADMITTED_READY = "kueue_local_queue_admitted_until_ready_wait_time_seconds"
CQ = {"cluster_queue": "default-cq", "priority_class": "", "replica_role": "standalone"}
LQ = {"name": "test-lq", "namespace": "default", "priority_class": "",
      "replica_role": "standalone"}


def job_object(kind: str, api_version: str, created: dt.datetime) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "test-job", "namespace": "default", "uid": "test-job",
                         "labels": {c.QUEUE_LABEL: "test-lq"},
                         "creationTimestamp": rfc3339(created)}}


@pytest.mark.kueue_case(
    "TestRecordWorkloadCreationLatency/LeaderWorkerSet",
    "TestRecordWorkloadCreationLatency/GenericJob",
    "TestRecordWorkloadCreationLatency/StatefulSet",
)
@pytest.mark.parametrize(("kind", "api_version"), [
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1"),
    ("Job", "batch/v1"),
    ("StatefulSet", "apps/v1"),
])
def test_record_workload_creation_latency(kind: str, api_version: str) -> None:
    metrics = JobMetrics()
    base = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    job = job_object(kind, api_version, base - dt.timedelta(seconds=5))
    wl = Workload.from_dict({"metadata": {"name": "job-test-job", "namespace": "default",
                                          "creationTimestamp": rfc3339(base)},
                             "spec": {"podSets": []}})
    labels = {"job_kind": kind, "replica_role": "standalone"}
    job["metadata"]["generation"] = 2
    record_workload_creation_latency(metrics, job, kind, wl)
    assert metrics.sample(f"{LATENCY}_count", labels) is None
    job["metadata"]["generation"] = 1
    record_workload_creation_latency(metrics, job, kind, wl)
    assert metrics.sample(f"{LATENCY}_count", labels) == 1.0
    assert metrics.sample(f"{LATENCY}_sum", labels) == 5.0


def test_record_workload_creation_latency_needs_its_gate() -> None:
    metrics = JobMetrics()
    base = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    job = job_object("Job", "batch/v1", base - dt.timedelta(seconds=2))
    wl = Workload.from_dict({"metadata": {"name": "w", "namespace": "default",
                                          "creationTimestamp": rfc3339(base)},
                             "spec": {"podSets": []}})
    record_workload_creation_latency(
        metrics, job, "Job", wl, features=FeatureGates(MetricForWorkloadCreationLatency=False))
    assert metrics.sample(f"{LATENCY}_count", {"job_kind": "Job",
                                               "replica_role": "standalone"}) is None


def families(metrics: JobMetrics) -> dict[str, Any]:
    return {f.name: f for f in metrics.registry.collect()}


def test_names_labels_buckets_as_kueue_v0192() -> None:
    metrics = JobMetrics(role=lambda: "leader")
    metrics.record_workload_creation_latency("Job", 0.5)
    metrics.ready_wait_time("cq", "pc", 3.0)
    metrics.report_admitted_until_ready_wait_time("cq", "pc", 2.0)
    metrics.local_queue_ready_wait_time("lq", "ns", "pc", 3.0)
    metrics.report_local_queue_admitted_until_ready_wait_time("lq", "ns", "pc", 2.0)
    fams = families(metrics)
    assert set(fams) == {"kueue_workload_creation_latency_seconds", "kueue_ready_wait_time_seconds",
                         "kueue_admitted_until_ready_wait_time_seconds",
                         "kueue_local_queue_ready_wait_time_seconds",
                         "kueue_local_queue_admitted_until_ready_wait_time_seconds"}
    assert all(f.type == "histogram" for f in fams.values())

    def bucket_bounds(name: str) -> list[float]:
        return [float(s.labels["le"]) for s in fams[name].samples
                if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]

    def label_names(name: str) -> list[str]:
        [sample] = [s for s in fams[name].samples if s.name.endswith("_count")]
        return list(sample.labels)

    assert bucket_bounds(LATENCY) == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56,
                                      5.12, 10.24]
    wait = [1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0,
            5120.0, 10240.0]
    for name in (READY, ADMITTED_READY, LQ_READY, LQ_ADMITTED_READY):
        assert bucket_bounds(name) == wait
    assert list(WAIT_TIME_BUCKETS) == wait
    assert len(WORKLOAD_CREATION_LATENCY_BUCKETS) == 11
    assert label_names(LATENCY) == ["job_kind", "replica_role"]
    assert label_names(READY) == ["cluster_queue", "priority_class", "replica_role"]
    assert label_names(ADMITTED_READY) == ["cluster_queue", "priority_class", "replica_role"]
    assert label_names(LQ_READY) == ["name", "namespace", "priority_class", "replica_role"]
    assert label_names(LQ_ADMITTED_READY) == ["name", "namespace", "priority_class",
                                              "replica_role"]
    assert metrics.sample(f"{READY}_sum", {"cluster_queue": "cq", "priority_class": "pc",
                                           "replica_role": "leader"}) == 3.0


def test_one_job_metrics_per_registry() -> None:
    registry = CollectorRegistry()
    first = job_metrics_for(registry)
    assert job_metrics_for(registry) is first
    assert first.registry is registry
    assert job_metrics_for(CollectorRegistry()) is not first


async def test_reconciler_records_the_creation_latency_of_a_new_workload() -> None:
    w = World()
    await w.create_job()
    assert isinstance(w.clock, ManualClock)
    w.clock.advance(3)
    await w.reconcile(MockJob())
    assert len(w.workloads()) == 1
    labels = {"job_kind": "Job", "replica_role": "standalone"}
    assert w.reconciler.metrics.sample(f"{LATENCY}_count", labels) == 1.0
    assert w.reconciler.metrics.sample(f"{LATENCY}_sum", labels) == 3.0


async def test_reconciler_skips_the_creation_latency_of_a_changed_job() -> None:
    w = World()
    job = await w.create_job()
    job["spec"]["parallelism"] = 2
    updated = await w.client.update(job)
    assert updated["metadata"]["generation"] == 2
    await w.reconcile(MockJob())
    assert len(w.workloads()) == 1
    assert w.reconciler.metrics.sample(
        f"{LATENCY}_count", {"job_kind": "Job", "replica_role": "standalone"}) is None


async def ready_world(*, requeued_ago: float | None = None, **options: Any) -> World:
    """A running job whose Workload was created at t0 and admitted at t0+10; now t0+15."""
    w = World(wait_for_pods_ready=True, **options)
    assert isinstance(w.clock, ManualClock)
    await w.create_job(suspend=False, status={"ready": 1, "active": 1})
    await w.create_workload()
    w.clock.advance(10)
    extra = [{"type": "PodsReady", "status": "False", "reason": "WaitForStart",
              "message": "Not all pods are ready or succeeded", "lastTransitionTime": w.ts()}]
    w.clock.advance(5)
    if requeued_ago is not None:
        extra.append({"type": "Requeued", "status": "True", "reason": "Preempted",
                      "message": "m", "lastTransitionTime": w.ts(requeued_ago)})
    status = admitted_status(w, extra=extra)
    for cond in status["conditions"]:
        if cond["type"] in ("QuotaReserved", "Admitted"):
            cond["lastTransitionTime"] = w.ts(5)
    name = "job-test-job-1"
    await w.client.apply(
        {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
         "metadata": {"name": name, "namespace": "default"}, "status": status},
        field_manager=c.ADMISSION_NAME, force=True, subresource="status")
    return w


async def test_time_to_ready_recorded_when_pods_first_become_ready() -> None:
    w = await ready_world()
    await w.reconcile(MockJob())
    conds = {x["type"]: x for x in w.workloads()[0]["status"]["conditions"]}
    assert (conds["PodsReady"]["status"], conds["PodsReady"]["reason"]) == ("True", "Started")
    m = w.reconciler.metrics
    assert m.sample(f"{READY}_count", CQ) == 1.0
    assert m.sample(f"{READY}_sum", CQ) == 15.0
    assert m.sample(f"{ADMITTED_READY}_count", CQ) == 1.0
    assert m.sample(f"{ADMITTED_READY}_sum", CQ) == 5.0
    # No LocalQueue object to expose: no LocalQueue series.
    assert m.sample(f"{LQ_READY}_count", LQ) is None
    # A second pass finds the condition written: nothing more is observed.
    await w.reconcile(MockJob())
    assert m.sample(f"{READY}_count", CQ) == 1.0


async def test_time_to_ready_counts_from_the_last_requeue() -> None:
    w = await ready_world(requeued_ago=7)
    await w.reconcile(MockJob())
    assert w.reconciler.metrics.sample(f"{READY}_sum", CQ) == 7.0


async def test_recovery_is_not_a_new_time_to_ready() -> None:
    w = World(wait_for_pods_ready=True)
    await w.create_job(suspend=False, status={"ready": 1, "active": 1})
    await w.create_workload(status=admitted_status(w, extra=[{
        "type": "PodsReady", "status": "False", "reason": "WaitForRecovery",
        "message": "At least one pod has failed, waiting for recovery",
        "lastTransitionTime": w.ts()}]))
    await w.reconcile(MockJob())
    conds = {x["type"]: x for x in w.workloads()[0]["status"]["conditions"]}
    assert conds["PodsReady"]["reason"] == "Recovered"
    assert w.reconciler.metrics.sample(f"{READY}_count", CQ) is None
    assert w.reconciler.metrics.sample(f"{ADMITTED_READY}_count", CQ) is None


async def register_local_queue(w: World, *, cluster_queue: str = "default-cq",
                               labels: dict[str, str] | None = None) -> None:
    w.server.register_kind(LOCAL_QUEUE_GVK, "localqueues", True)
    await w.client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "LocalQueue",
                           "metadata": {"name": "test-lq", "namespace": "default",
                                        "labels": labels or {}},
                           "spec": {"clusterQueue": cluster_queue}})


async def test_local_queue_time_to_ready() -> None:
    w = await ready_world()
    await register_local_queue(w)
    await w.reconcile(MockJob())
    m = w.reconciler.metrics
    assert m.sample(f"{LQ_READY}_count", LQ) == 1.0
    assert m.sample(f"{LQ_READY}_sum", LQ) == 15.0
    assert m.sample(f"{LQ_ADMITTED_READY}_sum", LQ) == 5.0


@pytest.mark.parametrize("case", ["disabled", "selector", "other cluster queue"])
async def test_local_queue_time_to_ready_not_exposed(case: str) -> None:
    config = LocalQueueMetricsConfig()
    if case == "disabled":
        config = LocalQueueMetricsConfig(enabled=False)
    elif case == "selector":
        config = LocalQueueMetricsConfig(queue_selector=LabelSelector.parse("team=a"))
    w = await ready_world(metrics=JobMetrics(local_queue_metrics=config))
    await register_local_queue(w, labels={"team": "b"},
                               cluster_queue="other" if case == "other cluster queue"
                               else "default-cq")
    await w.reconcile(MockJob())
    m = w.reconciler.metrics
    assert m.sample(f"{READY}_count", CQ) == 1.0
    assert m.sample(f"{LQ_READY}_count", LQ) is None
    assert m.sample(f"{LQ_ADMITTED_READY}_count", LQ) is None


async def test_local_queue_selector_match() -> None:
    metrics = JobMetrics(local_queue_metrics=LocalQueueMetricsConfig(
        queue_selector=LabelSelector.parse("team=a")))
    w = await ready_world(metrics=metrics)
    await register_local_queue(w, labels={"team": "a"})
    await w.reconcile(MockJob())
    assert metrics.sample(f"{LQ_READY}_count", LQ) == 1.0


@pytest.mark.parametrize(("team", "exposed"), [("a", True), ("b", False)])
async def test_configured_local_queue_selector_reaches_the_reconciler(
        team: str, exposed: bool) -> None:
    # Configuration metrics.localQueueMetrics -> reconciler_options_from -> the metrics
    # the reconciler records into.
    cfg = parse_configuration({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "metrics": {"localQueueMetrics": {"enable": True, "localQueueSelector": {
            "matchLabels": {"team": "a"}}}}})
    options = reconciler_options_from(cfg)
    w = await ready_world(local_queue_metrics=options.local_queue_metrics)
    await register_local_queue(w, labels={"team": team})
    await w.reconcile(MockJob())
    m = w.reconciler.metrics
    assert m.sample(f"{READY}_count", CQ) == 1.0
    assert m.sample(f"{LQ_READY}_count", LQ) == (1.0 if exposed else None)


def test_local_queue_metrics_option_reaches_the_manager_registry_metrics() -> None:
    config = LocalQueueMetricsConfig(enabled=False)
    w = World(local_queue_metrics=config)
    assert w.reconciler.metrics.local_queue_metrics is config
    mgr = Manager(w.client, clock=w.clock)
    GenericReconciler(w.reconciler, MockJob).setup_with_manager(mgr)
    assert w.reconciler.metrics.registry is mgr.get_metrics().registry
    assert w.reconciler.metrics.local_queue_metrics is config


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> AsyncIterator[None]:
    task = asyncio.create_task(mgr.start())
    try:
        yield
    finally:
        if not task.done():
            await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def test_served_on_the_manager_metrics_endpoint() -> None:
    w = World()
    mgr = Manager(w.client, clock=w.clock, metrics_bind_address="127.0.0.1:0")
    reconciler = GenericReconciler(w.reconciler, MockJob)
    assert w.reconciler.options.metrics is None
    reconciler.setup_with_manager(mgr)
    assert w.reconciler.metrics.registry is mgr.get_metrics().registry
    await w.create_job()
    async with running(mgr):
        await mgr.elected()
        for _ in range(2000):
            if w.workloads():
                break
            await asyncio.sleep(0.001)
        assert len(w.workloads()) == 1
        assert mgr.metrics_server is not None
        async with aiohttp.ClientSession() as s, \
                s.get(f"{mgr.metrics_server.url}/metrics") as r:
            text = await r.text()
    assert ('kueue_workload_creation_latency_seconds_count{job_kind="Job",'
            'replica_role="standalone"} 1.0') in text
    assert "# TYPE kueue_ready_wait_time_seconds histogram" in text


def test_explicit_metrics_option_is_kept_by_setup_with_manager() -> None:
    own = JobMetrics()
    w = World(metrics=own)
    mgr = Manager(w.client, clock=w.clock)
    GenericReconciler(w.reconciler, MockJob).setup_with_manager(mgr)
    assert w.reconciler.metrics is own
