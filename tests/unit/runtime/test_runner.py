"""jobframework.runtime.runner: the event loop chosen, the collector tuned, the signals.

Only the last test needs uvloop (it runs a coroutine on it); the choice itself is tested
with a stand-in module, so these pass whether or not ``[speed]`` is installed.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator

import pytest

from jobframework.runtime import runner


@pytest.fixture
def gc_restored() -> Iterator[None]:
    """The collector as it was, whatever a test's run() did to it."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.fixture
def fake_uvloop(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("uvloop")

    def run(main: object) -> None:
        raise AssertionError("not called by these tests")

    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", module)
    return module


def test_auto_and_uvloop_pick_uvloop_when_it_is_installed(
        fake_uvloop: types.ModuleType) -> None:
    assert runner.loop_runner("auto") is fake_uvloop.run
    assert runner.loop_runner("uvloop") is fake_uvloop.run
    assert runner.loop_runner("asyncio") is asyncio.run


def test_without_uvloop_auto_is_asyncio_and_uvloop_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert runner.loop_runner("auto") is asyncio.run
    with pytest.raises(runner.EventLoopNotInstalledError, match=r"uvloop is not installed "
                       r"\(pip install 'kueue-jobframework\[speed\]'\)"):
        runner.loop_runner("uvloop")
    with pytest.raises(ValueError, match="event_loop must be one of auto, asyncio, uvloop"):
        runner.loop_runner("trio")  # type: ignore[arg-type]


def test_run_refuses_a_missing_loop_before_touching_the_collector(
        monkeypatch: pytest.MonkeyPatch, gc_restored: None) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    before = gc.get_threshold()

    async def main(stop: asyncio.Event) -> None:
        raise AssertionError("must not run")

    with pytest.raises(runner.EventLoopNotInstalledError):
        runner.run(main, event_loop="uvloop")
    assert gc.get_threshold() == before


def test_run_tunes_the_collector_and_returns_what_main_returns(gc_restored: None) -> None:
    before = gc.get_threshold()

    async def main(stop: asyncio.Event) -> tuple[tuple[int, int, int], int, bool]:
        return gc.get_threshold(), gc.get_freeze_count(), stop.is_set()

    threshold, frozen, stopped = runner.run(main, event_loop="asyncio")
    assert threshold == (runner.GC_GEN0_THRESHOLD, before[1], before[2])
    assert frozen > 0, "what was loaded before the manager is out of the collector's walks"
    assert stopped is False


def test_run_without_gc_tuning_leaves_the_collector_alone(gc_restored: None) -> None:
    gc.unfreeze()
    before = gc.get_threshold()

    async def main(stop: asyncio.Event) -> tuple[tuple[int, int, int], int]:
        return gc.get_threshold(), gc.get_freeze_count()

    assert runner.run(main, event_loop="asyncio", gc_tuning=False) == (before, 0)


def test_run_propagates_mains_error(gc_restored: None) -> None:
    async def main(stop: asyncio.Event) -> None:
        raise LookupError("from main")

    with pytest.raises(LookupError, match="from main"):
        runner.run(main, event_loop="asyncio", gc_tuning=False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_shutdown_signal_sets_the_stop_event(sig: signal.Signals) -> None:
    async def main(stop: asyncio.Event) -> str:
        assert not stop.is_set()
        os.kill(os.getpid(), sig)
        await asyncio.wait_for(stop.wait(), 30)
        return "stopped"

    assert runner.run(main, event_loop="asyncio", gc_tuning=False) == "stopped"


def test_only_the_signals_asked_for_are_handled() -> None:
    async def main(stop: asyncio.Event) -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        # remove_signal_handler says whether a handler of the loop's was installed.
        return loop.remove_signal_handler(signal.SIGUSR1), \
            loop.remove_signal_handler(signal.SIGTERM)

    assert runner.run(main, event_loop="asyncio", gc_tuning=False,
                      signals=(signal.SIGUSR1,)) == (True, False)


def _python(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=120)


def test_a_second_signal_ends_a_hanging_shutdown_with_exit_code_1() -> None:
    # As controller-runtime's SetupSignalHandler: the first asks, the second insists.
    proc = _python("""
        import asyncio, os, signal, sys
        from jobframework.runtime import run

        async def main(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            await stop.wait()
            print("graceful shutdown started", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(600)  # a shutdown that hangs
            return 0

        sys.exit(run(main, event_loop="asyncio"))
    """)
    assert proc.returncode == runner.FORCED_EXIT_CODE == 1, proc.stderr
    assert proc.stdout == "graceful shutdown started\n"


def test_uvloop_runs_main_on_its_loop(gc_restored: None) -> None:
    uvloop = pytest.importorskip("uvloop", reason="the [speed] extra is not installed")

    async def main(stop: asyncio.Event) -> bool:
        return isinstance(asyncio.get_running_loop(), uvloop.Loop)

    assert runner.run(main, event_loop="uvloop", gc_tuning=False) is True
    assert runner.run(main, event_loop="auto", gc_tuning=False) is True
