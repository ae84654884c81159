"""Start, track and stop the cluster's processes.

Each component runs in its own session (process group) with its output in
``<state>/logs/<name>.log``. ``<state>/pids/<name>.json`` records the pid and the
kernel's start time of the process, so ``down`` (possibly from another Python
process) signals exactly the processes this launcher started and never a
recycled pid.

With ``die_with_parent`` (the default) each component also dies with the process that
started it, however that process ends (SIGTERM, SIGKILL, a crash): on Linux the kernel
sends it SIGKILL when its parent goes (``PR_SET_PDEATHSIG``). The kernel's "parent" is
the *thread* that forked the child, so every component is forked by one daemon thread
that lives as long as the process (:func:`_spawn`), never by a short-lived worker
thread such as ``asyncio.to_thread``'s, whose exit would kill it.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from jobframework.testing.cluster.kube import FatalWait

_T = TypeVar("_T")

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, resolved in the parent: the forked child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()

#: Whether this platform can tie a child's life to its parent's (Linux).
DIE_WITH_PARENT_SUPPORTED = _PRCTL is not None


def _die_with_parent_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent thread
    ends; None where ``prctl`` is missing."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal would come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def die_with_parent_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child that must not outlive this process (a proxy, a manager
    a test starts), forked by a thread that lives as long as the process, such as the
    main thread's event loop: ``asyncio.create_subprocess_exec(...,
    preexec_fn=die_with_parent_preexec())``. None where the platform cannot do it."""
    return _die_with_parent_preexec()


_spawn_lock = threading.Lock()
_spawn_queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_spawn_thread: threading.Thread | None = None


def _spawn_loop() -> None:
    while True:
        fn, future = _spawn_queue.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn())
        except BaseException as err:  # handed to the caller, which re-raises it
            future.set_exception(err)


def _spawn(fn: Callable[[], _T]) -> _T:
    """Run ``fn`` (which forks) on the process's one spawner thread and return its result.

    The thread is a daemon that waits for work until the process exits, so the children
    it forks with ``PR_SET_PDEATHSIG`` die with the process and not before.
    """
    global _spawn_thread
    with _spawn_lock:
        # After a fork, the child process has no spawner thread: it starts its own.
        if _spawn_thread is None or not _spawn_thread.is_alive():
            _spawn_thread = threading.Thread(target=_spawn_loop, name="cluster-spawner",
                                             daemon=True)
            _spawn_thread.start()
    if threading.current_thread() is _spawn_thread:
        return fn()
    future: Future[_T] = Future()
    _spawn_queue.put((fn, future))
    return future.result()


class ProcessDied(FatalWait):
    """A cluster component exited while the launcher waited on it."""


def _proc_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces; split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # zombie: exited, waiting to be reaped
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcRecord:
    name: str
    pid: int
    start_time: int
    argv: tuple[str, ...]
    log: str

    def alive(self) -> bool:
        return _proc_start_time(self.pid) == self.start_time


class Processes:
    """The processes of one state directory.

    With ``die_with_parent`` (the default) each process started dies with this Python
    process (Linux; elsewhere it is ignored); without it, the processes outlive it until
    :meth:`stop` (a cluster started by the ``up`` command, for later runs to reuse).
    """

    def __init__(self, state_dir: Path, *, die_with_parent: bool = True) -> None:
        self.pid_dir = state_dir / "pids"
        self.log_dir = state_dir / "logs"
        self.die_with_parent = die_with_parent
        self._popen: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> ProcRecord:
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cwd.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        preexec = _die_with_parent_preexec() if self.die_with_parent else None
        with log_path.open("ab") as log:
            log.write(f"# {' '.join(argv)}\n".encode())
            log.flush()

            def popen() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    env=dict(env) if env is not None else None,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=preexec,
                )

            proc = _spawn(popen) if preexec is not None else popen()
        start_time = None
        for _ in range(100):
            start_time = _proc_start_time(proc.pid)
            if start_time is not None or proc.poll() is not None:
                break
            time.sleep(0.01)
        if start_time is None:
            raise RuntimeError(f"{name} exited immediately; see {log_path}:\n{tail(log_path)}")
        record = ProcRecord(name, proc.pid, start_time, tuple(argv), str(log_path))
        self._popen[name] = proc
        (self.pid_dir / f"{name}.json").write_text(
            json.dumps(
                {
                    "name": name,
                    "pid": record.pid,
                    "start_time": start_time,
                    "argv": list(argv),
                    "log": str(log_path),
                }
            )
        )
        return record

    def records(self) -> list[ProcRecord]:
        out: list[ProcRecord] = []
        if not self.pid_dir.is_dir():
            return out
        for path in sorted(self.pid_dir.glob("*.json")):
            try:
                data = json.loads(path.read_text())
                out.append(
                    ProcRecord(
                        str(data["name"]),
                        int(data["pid"]),
                        int(data["start_time"]),
                        tuple(data["argv"]),
                        str(data["log"]),
                    )
                )
            except (OSError, ValueError, KeyError):
                continue
        return out

    def record(self, name: str) -> ProcRecord | None:
        for rec in self.records():
            if rec.name == name:
                return rec
        return None

    def check_alive(self, name: str) -> None:
        """Raise with the log tail if ``name`` has died."""
        rec = self.record(name)
        if rec is None or not rec.alive():
            log = self.log_dir / f"{name}.log"
            raise ProcessDied(f"{name} is not running; last lines of {log}:\n{tail(log)}")

    def stop(self, name: str, timeout: float = 15.0) -> bool:
        """SIGTERM the process group of ``name``, SIGKILL after ``timeout``."""
        rec = self.record(name)
        if rec is None:
            return False
        stopped = False
        if rec.alive():
            stopped = True
            _signal_group(rec.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while rec.alive() and time.monotonic() < deadline:
                self._reap(name)
                time.sleep(0.05)
            if rec.alive():
                _signal_group(rec.pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
                while rec.alive() and time.monotonic() < deadline:
                    self._reap(name)
                    time.sleep(0.05)
        self._reap(name)
        if rec.alive():
            raise RuntimeError(f"{name} (pid {rec.pid}) survived SIGKILL")
        (self.pid_dir / f"{name}.json").unlink(missing_ok=True)
        return stopped

    def _reap(self, name: str) -> None:
        proc = self._popen.get(name)
        if proc is not None and proc.poll() is not None:
            self._popen.pop(name, None)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # start_new_session=True made the child a session and group leader (pgid == pid).
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def tail(path: Path, lines: int = 40) -> str:
    try:
        content = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])
