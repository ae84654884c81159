"""Health/readiness endpoints (controller-runtime's output) and the metrics endpoint."""

from __future__ import annotations

import aiohttp
import pytest

from jobframework.runtime.healthz import Checks, ProbeServer, parse_bind_address, ping
from jobframework.runtime.metrics import Metrics


async def test_aggregate_output_matches_controller_runtime() -> None:
    checks = Checks("healthz")
    assert await checks.check_all() == (200, "ok")
    assert await checks.check_all(verbose=True) == (200, "[+]ping ok\nhealthz check passed\n")

    broken = {"fail": True}

    def db() -> None:
        if broken["fail"]:
            raise RuntimeError("secret detail")

    async def cache() -> None:
        return None

    checks.add("ping", ping)
    checks.add("db", db)
    checks.add("cache", cache)
    status, body = await checks.check_all()
    assert status == 500
    assert body == ("[+]cache ok\n[-]db failed: reason withheld\n[+]ping ok\n"
                    "healthz check failed\n")
    assert "secret" not in body
    status, body = await checks.check_all(exclude=frozenset({"db", "nope"}))
    assert status == 200, "excluded failing check"
    status, body = await checks.check_all(verbose=True, exclude=frozenset({"db", "nope"}))
    assert body == ('[+]cache ok\n[+]db excluded: ok\n[+]ping ok\n'
                    'warn: some health checks cannot be excluded: no matches for "nope"\n'
                    "healthz check passed\n")
    assert await checks.check_one("db") == (500, "internal server error: secret detail\n")
    broken["fail"] = False
    assert await checks.check_one("db") == (200, "ok")
    assert (await checks.check_one("missing"))[0] == 404
    with pytest.raises(ValueError):
        checks.add("db", db)


async def test_probe_server_answers_over_http() -> None:
    healthz = Checks("healthz")
    readyz = Checks("readyz")
    healthz.add("ping", ping)
    ready = {"ok": False}

    def synced() -> None:
        if not ready["ok"]:
            raise RuntimeError("not synced")

    readyz.add("synced", synced)
    metrics = Metrics()
    metrics.reconcile_total.labels("c", "success").inc()
    server = ProbeServer("127.0.0.1:0", healthz=healthz, readyz=readyz,
                         registry=metrics.registry)
    await server.start()
    try:
        assert server.port > 0
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{server.url}/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok")
                assert r.headers["X-Content-Type-Options"] == "nosniff"
            async with s.get(f"{server.url}/readyz") as r:
                assert r.status == 500
                assert "[-]synced failed: reason withheld" in await r.text()
            async with s.get(f"{server.url}/readyz/synced") as r:
                assert (r.status, await r.text()) == (500, "internal server error: not synced\n")
            ready["ok"] = True
            async with s.get(f"{server.url}/readyz?verbose") as r:
                assert (r.status, await r.text()) == (200,
                                                      "[+]synced ok\nreadyz check passed\n")
            async with s.get(f"{server.url}/metrics") as r:
                assert r.status == 200
                text = await r.text()
                assert r.headers["Content-Type"].startswith("text/plain")
                assert ('controller_runtime_reconcile_total{controller="c",result="success"} 1.0'
                        in text)
    finally:
        await server.stop()


def test_parse_bind_address() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9") == ("::1", 9)
    with pytest.raises(ValueError):
        parse_bind_address("8080")


def test_metrics_registries_are_per_instance() -> None:
    a, b = Metrics(), Metrics()
    a.reconcile_total.labels("x", "success").inc()
    assert a.sample("controller_runtime_reconcile_total",
                    {"controller": "x", "result": "success"}) == 1
    assert b.sample("controller_runtime_reconcile_total",
                    {"controller": "x", "result": "success"}) is None
    provider = a.workqueue_provider()
    provider.new_depth_metric("q").inc()
    provider.new_retries_metric("q").inc()
    provider.new_longest_running_processor_seconds_metric("q").set(2.5)
    labels = {"name": "q", "controller": "q"}
    assert a.sample("workqueue_depth", labels) == 1
    assert a.sample("workqueue_retries_total", labels) == 1
    assert a.sample("workqueue_longest_running_processor_seconds", labels) == 2.5
