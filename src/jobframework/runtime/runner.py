"""Running a manager as a process of its own: the event loop, the collector, the signals.

What ``python -m integrations run`` does around its manager, for a user's own main (an
embedded integration, a plugin run by one's own program)::

    from jobframework.runtime import Manager, run

    async def main(stop: asyncio.Event) -> None:
        async with await RestClient.from_kubeconfig() as client:
            mgr = Manager(client)
            ...  # setup_controllers(mgr, ..., configuration=cfg)
            await mgr.start(stop)

    sys.exit(run(main))

- :func:`run` picks the event loop (:func:`loop_runner`: uvloop when installed, else
  asyncio's), tunes the garbage collector for a long-lived process (:func:`tune_gc`) and
  hands ``main`` an :class:`asyncio.Event` set on SIGTERM or SIGINT
  (:func:`setup_signal_handler`); ``await mgr.start(stop)`` then returns once the
  manager has shut down, as controller-runtime's ``mgr.Start(ctrl.SetupSignalHandler())``.
- A second signal ends the process at once with exit code 1, as controller-runtime's
  signal handler does: a shutdown that hangs can still be cut short.

A program that already owns its loop and signals (kopf, an ASGI server) calls none of
this: it starts the manager as a task (``docs/runtime.md``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Literal, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ``event_loop`` choices: ``auto`` is uvloop when it is installed, else asyncio's loop.
EventLoop = Literal["auto", "asyncio", "uvloop"]
EVENT_LOOPS: Final[tuple[EventLoop, ...]] = ("auto", "asyncio", "uvloop")
#: What stops a manager run by :func:`run` (a Deployment's pod gets SIGTERM, a terminal
#: SIGINT), as controller-runtime's ``SetupSignalHandler``.
SHUTDOWN_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
#: The collector's first-generation threshold under :func:`tune_gc` (CPython's default is
#: 700). Every watch event and API answer decodes into hundreds of dicts and lists, so at
#: 700 the collector ran several times per Job and its older generations, which walk the
#: whole cache, often enough to cost 4 % of the manager's CPU.
GC_GEN0_THRESHOLD: Final = 20_000
#: Exit code after a second shutdown signal (controller-runtime's ``os.Exit(1)``).
FORCED_EXIT_CODE: Final = 1


class EventLoopNotInstalledError(ImportError):
    """``event_loop="uvloop"`` was asked for and uvloop is not installed."""


class LoopRunner(Protocol):
    """Runs a coroutine to completion on a new event loop (``asyncio.run``, ``uvloop.run``)."""

    def __call__(self, main: Coroutine[Any, Any, T], /) -> T:
        """Run ``main`` and return its result."""
        ...


def loop_runner(event_loop: EventLoop = "auto") -> LoopRunner:
    """``uvloop.run`` for ``uvloop``, and for ``auto`` when uvloop is installed (about a
    third less CPU per reconciled job, most of it TLS); else ``asyncio.run``.

    Raises :class:`EventLoopNotInstalledError` for ``uvloop`` when it is not installed
    (``pip install 'kueue-jobframework[speed]'``).
    """
    if event_loop not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(EVENT_LOOPS)}, "
                         f"not {event_loop!r}")
    if event_loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if event_loop == "uvloop":
                raise EventLoopNotInstalledError(
                    "uvloop is not installed (pip install 'kueue-jobframework[speed]')"
                ) from None
        else:
            runner: LoopRunner = uvloop.run
            return runner
    return asyncio.run


def tune_gc() -> None:
    """Collect less often (:data:`GC_GEN0_THRESHOLD`), and never walk what was loaded
    before (modules, classes, the API models): ``gc.freeze`` moves it to a generation the
    collector skips. For a process that runs a manager; it changes the whole process, so
    a program that embeds a manager among other work decides for itself."""
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def setup_signal_handler(signals: Sequence[signal.Signals] = SHUTDOWN_SIGNALS
                         ) -> asyncio.Event:
    """An event set on the first of ``signals`` the process receives; a second one ends
    the process at once (exit code :data:`FORCED_EXIT_CODE`), as controller-runtime's
    ``SetupSignalHandler``. Call it inside the running loop that owns the signals; pass
    the event to :meth:`~jobframework.runtime.manager.Manager.start`."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def received(sig: signal.Signals) -> None:
        if stop.is_set():
            log.error("second %s: exiting without a graceful shutdown", sig.name)
            logging.shutdown()
            os._exit(FORCED_EXIT_CODE)
        log.info("%s received: shutting down", sig.name)
        stop.set()

    for sig in signals:
        loop.add_signal_handler(sig, received, sig)
    return stop


def run(
    main: Callable[[asyncio.Event], Awaitable[T]],
    *,
    event_loop: EventLoop = "auto",
    gc_tuning: bool = True,
    signals: Sequence[signal.Signals] = SHUTDOWN_SIGNALS,
) -> T:
    """Run ``main(stop)`` on a new event loop (:func:`loop_runner`) as the shipped manager
    runs: the collector tuned (:func:`tune_gc`, unless ``gc_tuning`` is False) and
    ``stop`` set on the first of ``signals`` (:func:`setup_signal_handler`). Returns what
    ``main`` returns; what it raises propagates.

    Raises :class:`EventLoopNotInstalledError` before anything runs when
    ``event_loop="uvloop"`` is not installed.
    """
    runner = loop_runner(event_loop)
    if gc_tuning:
        tune_gc()

    async def process() -> T:
        return await main(setup_signal_handler(signals))

    return runner(process())


__all__ = [
    "EVENT_LOOPS",
    "FORCED_EXIT_CODE",
    "GC_GEN0_THRESHOLD",
    "SHUTDOWN_SIGNALS",
    "EventLoop",
    "EventLoopNotInstalledError",
    "LoopRunner",
    "loop_runner",
    "run",
    "setup_signal_handler",
    "tune_gc",
]
