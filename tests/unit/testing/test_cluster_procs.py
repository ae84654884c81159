"""The local cluster's processes die with the process that started them.

A small parent process starts a child exactly as the cluster launcher starts etcd,
kube-apiserver and the rest (:class:`~jobframework.testing.cluster.procs.Processes`), then
is killed; the child must be gone within seconds. Without ``die_with_parent`` it must
outlive its parent (the ``up`` command's cluster, reused by later runs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobframework.testing.cluster.procs import DIE_WITH_PARENT_SUPPORTED, ProcRecord

pytestmark = pytest.mark.skipif(not DIE_WITH_PARENT_SUPPORTED,
                                reason="PR_SET_PDEATHSIG is Linux's")

#: The parent: starts ``sleep`` as the launcher starts a component (from the main thread,
#: or from a worker thread that ends at once, as ``asyncio.to_thread``'s may), prints its
#: record, then waits to be killed.
PARENT = """
import asyncio, json, sys, threading, time
from pathlib import Path
from jobframework.testing.cluster.procs import (
    Processes, ProcRecord, _proc_start_time, die_with_parent_preexec)

state, mode = Path(sys.argv[1]), sys.argv[2]
procs = Processes(state, die_with_parent=mode != "detached")

def start():
    return procs.start("sleeper", ["sleep", "300"], cwd=state / "run")

async def start_async():
    # As the fault suite starts its proxy and managers.
    preexec = die_with_parent_preexec() if mode == "asyncio" else None
    proc = await asyncio.create_subprocess_exec("sleep", "300", preexec_fn=preexec)
    return ProcRecord("sleeper", proc.pid, _proc_start_time(proc.pid), (), "")

if mode in ("asyncio", "asyncio-detached"):
    record = asyncio.run(start_async())
elif mode == "thread":
    out = []
    worker = threading.Thread(target=lambda: out.append(start()))
    worker.start()
    worker.join()
    record = out[0]
else:
    record = start()
print(json.dumps({"pid": record.pid, "start_time": record.start_time}), flush=True)
time.sleep(300)
"""


def _wait(what: str, check: object, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {limit:.0f}s waiting for {what}")


def _stays(record: ProcRecord, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not record.alive():
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[str], ProcRecord]]]:
    """Parents started by the test, and their children; whatever is left is killed."""
    out: list[tuple[subprocess.Popen[str], ProcRecord]] = []
    yield out
    for parent, child in out:
        if parent.poll() is None:
            parent.kill()
        parent.wait(10)
        if child.alive():
            os.kill(child.pid, signal.SIGKILL)


def _start(tmp_path: Path, mode: str,
           started: list[tuple[subprocess.Popen[str], ProcRecord]]
           ) -> tuple[subprocess.Popen[str], ProcRecord]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), mode],
                              stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line, f"the parent exited first (code {parent.wait(10)})"
    data = json.loads(line)
    child = ProcRecord("sleeper", int(data["pid"]), int(data["start_time"]), (), "")
    started.append((parent, child))
    assert child.alive()
    return parent, child


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("mode", ["main", "thread", "asyncio"])
def test_a_component_dies_with_its_parent(
        tmp_path: Path, started: list[tuple[subprocess.Popen[str], ProcRecord]],
        sig: signal.Signals, mode: str) -> None:
    parent, child = _start(tmp_path, mode, started)
    # Started from a thread that has ended, it still lives while its parent process does.
    assert _stays(child, 0.5), "the child died with the thread that started it"
    parent.send_signal(sig)
    parent.wait(10)
    _wait("the child to die with its parent", lambda: not child.alive())


@pytest.mark.parametrize("mode", ["detached", "asyncio-detached"])
def test_a_detached_component_outlives_its_parent(
        tmp_path: Path, started: list[tuple[subprocess.Popen[str], ProcRecord]],
        mode: str) -> None:
    parent, child = _start(tmp_path, mode, started)
    parent.kill()
    parent.wait(10)
    assert _stays(child, 1.0), "a detached child died with its parent"
