"""The users' pytest plugin: loaded by its entry point, and working under pytest-asyncio's
strict and auto modes, run on the documented example test file and a minimal one."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from jobframework.testing import EventCollector, KueueStandIn
from jobframework.testing.kueue import WORKLOAD_GVK
from jobframework.testing.pytest_plugin import KueueManagerFactory

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "examples" / \
    "test_user_integration.py"

MINIMAL = '''
import pytest
import pytest_asyncio

from jobframework.testing import KueueStandIn
from jobframework.testing.kueue import RESOURCE_FLAVOR_GVK, WORKLOAD_GVK


@pytest_asyncio.fixture
async def flavored(kueue: KueueStandIn) -> KueueStandIn:
    await kueue.resource_flavor("f")
    return kueue


@pytest.mark.asyncio
async def test_fixtures_share_one_server(flavored, kueue_server, kueue_client, kueue_clock,
                                         event_recorder, kueue_manager) -> None:
    assert flavored.server is kueue_server and kueue_server.clock is kueue_clock
    flavors = (await kueue_client.list(RESOURCE_FLAVOR_GVK)).items
    assert [o["metadata"]["name"] for o in flavors] == ["f"]
    assert flavored.recorder is event_recorder


def test_sync_fixtures_too(kueue_server) -> None:
    assert kueue_server.kind_info(WORKLOAD_GVK).plural == "workloads"
'''


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_example_and_fixtures_run_in_both_asyncio_modes(tmp_path: pathlib.Path,
                                                        mode: str) -> None:
    shutil.copy(EXAMPLE, tmp_path / "test_example.py")
    (tmp_path / "test_minimal.py").write_text(MINIMAL)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
         f"asyncio_mode={mode}", "-o", "asyncio_default_fixture_loop_scope=function",
         "-W", "error::pytest.PytestUnraisableExceptionWarning", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "5 passed" in out.stdout, out.stdout
    assert "skipped" not in out.stdout and "warning" not in out.stdout.lower(), out.stdout


async def test_plugin_fixtures_are_loaded_by_entry_point(
    kueue: KueueStandIn, event_recorder: EventCollector, kueue_manager: KueueManagerFactory,
) -> None:
    # This file has no conftest providing them: the pytest11 entry point does.
    assert kueue.recorder is event_recorder
    assert kueue.server.kind_info(WORKLOAD_GVK).plural == "workloads"
    assert kueue_manager.started == []


def test_docs_show_the_whole_example_as_it_runs() -> None:
    docs = (EXAMPLE.parents[1] / "testing.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in docs
