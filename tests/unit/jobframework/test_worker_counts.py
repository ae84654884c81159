"""What a manager takes from Kueue's Configuration besides the reconciler options: the
workers per controller (``controller.groupKindConcurrency``) and the lean cache, the same
for ``setup_controllers(configuration=...)`` (embedded) as for the shipped manager."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import attrs
from tests.unit.batchjob.helpers import World, base_job

from integrations.batchjob import CALLBACKS as BATCH_CALLBACKS
from integrations.batchjob import FRAMEWORK_NAME
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.config import (
    API_VERSION,
    KIND,
    KUEUE_GROUP_KIND_CONCURRENCY,
    MANAGER_CACHE_TRANSFORM,
    Configuration,
    group_kind_concurrency_from,
    parse_configuration,
)
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import ReconcilerOptions, setup_controllers
from jobframework.runtime.cache import strip_managed_fields
from jobframework.runtime.controller import Controller
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer
from jobframework.webhook import WebhookServer

SPARK = GVK("analytics.example.com", "v1", "SparkApp")
JOB = GVK("batch", "v1", "Job")


def config(**fields: Any) -> Configuration:
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND, **fields})


def test_kueue_v0_19_2s_shipped_table_and_five_for_each_job_kind() -> None:
    table = group_kind_concurrency_from(None, [SPARK, GVK("batch", "v1", "Job")])
    assert table == {
        "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10,
        "LocalQueue.kueue.x-k8s.io": 5, "Cohort.kueue.x-k8s.io": 1,
        "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
        "SparkApp.analytics.example.com": 5,
    }
    # A Configuration without the section changes nothing.
    assert group_kind_concurrency_from(config(), [SPARK]) == table


def test_the_configurations_entries_win_and_the_others_keep_their_default() -> None:
    cfg = config(controller={"groupKindConcurrency": {
        "Job.batch": 2, "SparkApp.analytics.example.com": 8, "Pod": 0,
        "Example.other.io": 3}})
    table = group_kind_concurrency_from(cfg, [SPARK])
    assert table["Job.batch"] == 2 and table["SparkApp.analytics.example.com"] == 8
    assert table["Example.other.io"] == 3
    assert table["Pod"] == 1, "controller-runtime runs one worker for a count below 1"
    assert table["Workload.kueue.x-k8s.io"] == KUEUE_GROUP_KIND_CONCURRENCY[
        "Workload.kueue.x-k8s.io"] == 10


async def _embedded(cfg: Configuration | None, w: World | None = None,
                    **manager: Any) -> tuple[Manager, Controller]:
    """batch/job set up the documented embedded way; its controller."""
    if w is None:
        w = World()
        await w.setup()
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, BATCH_CALLBACKS)
    mgr = Manager(w.client, clock=w.clock, **manager)
    if cfg is None:
        await setup_controllers(mgr, im, options=ReconcilerOptions(clock=w.clock),
                                enabled_frameworks=[FRAMEWORK_NAME])
    else:
        await setup_controllers(mgr, im, options=ReconcilerOptions(clock=w.clock),
                                configuration=cfg)
    [controller] = [r for r in mgr._leader.runnables if isinstance(r, Controller)]
    return mgr, controller


async def test_setup_controllers_takes_the_workers_from_the_configuration() -> None:
    _, job = await _embedded(config())
    assert job.max_concurrent_reconciles == 5, "Kueue ships Job.batch: 5"
    _, job = await _embedded(config(controller={"groupKindConcurrency": {"Job.batch": 7}}))
    assert job.max_concurrent_reconciles == 7


async def test_the_managers_own_entries_win_over_the_configuration() -> None:
    # As controller-runtime: options given in code win over Kueue's file.
    mgr, job = await _embedded(
        config(controller={"groupKindConcurrency": {"Job.batch": 7, "Pod": 2}}),
        group_kind_concurrency={"Job.batch": 3})
    assert job.max_concurrent_reconciles == 3
    assert mgr.group_kind_concurrency["Pod"] == 2


async def test_without_a_configuration_the_manager_alone_decides() -> None:
    _, job = await _embedded(None)
    assert job.max_concurrent_reconciles == 1, "controller-runtime's default"


@attrs.frozen
class _Wiring:
    webhook_paths: tuple[str, ...] = ()


async def test_embedded_and_shipped_managers_get_the_same_table() -> None:
    # (batch/job as one of Kueue's frameworks for the embedded side, by default.)
    cfg = config(controller={"groupKindConcurrency": {"Job.batch": 4, "Pod": 9}})
    embedded, _ = await _embedded(cfg)
    shipped = ExternalFrameworkManager(APIServer().client(), ManagerOptions(
        kueue_config=cfg, integrations=("batchjob",), install_crds=False,
        register_webhooks=False, probe_namespace=None, ready_timeout=10.0))
    tables: list[dict[str, int]] = []

    async def setup(mgr: Manager, *, webhook_server: WebhookServer | None = None,
                    kueue: ReconcilerOptions | None = None) -> _Wiring:
        tables.append(dict(mgr.group_kind_concurrency))
        return _Wiring()

    shipped.integrations = [attrs.evolve(i, setup=setup) for i in shipped.integrations]
    async with shipped:
        pass
    assert tables == [dict(embedded.group_kind_concurrency)]
    assert tables[0]["Job.batch"] == 4 and tables[0]["Pod"] == 9


async def test_the_configuration_gives_an_embedded_manager_the_lean_cache() -> None:
    w = World()
    await w.setup()
    mgr, _ = await _embedded(config(), w)
    assert mgr.get_cache().transform is MANAGER_CACHE_TRANSFORM
    created = await w.create_job(base_job("lean"))
    assert created["metadata"].get("managedFields"), "the server records them"
    task = asyncio.create_task(mgr.start())
    try:
        cached = await asyncio.wait_for(
            mgr.get_client().get(JOB, "lean", namespace="ns"), 30)
        # As Kueue's manager (Cache.DefaultTransform): no managedFields in the cache.
        assert cached["metadata"]["name"] == "lean"
        assert "managedFields" not in cached["metadata"]
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def test_a_cache_transform_of_ones_own_is_kept() -> None:
    mgr, _ = await _embedded(config(), cache_options={"transform": strip_managed_fields})
    assert mgr.get_cache().transform is strip_managed_fields
    mgr, _ = await _embedded(None)
    assert mgr.get_cache().transform is None, "without a Configuration nothing changes"
