"""Checks shared by the bad-input tests (``test_bad_input.py`` on the in-memory server,
``test_bad_input_cluster.py`` on the real one): what a refusal must say, which logged
errors are crashes, and what reports a problem on an object.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any, Final, Protocol

import attrs

from jobframework.runtime.client import ObjectList
from jobframework.runtime.errors import ApiError
from jobframework.runtime.events import EVENT_GVK
from jobframework.runtime.objects import GVK, Object, name_of, uid_of
from jobframework.workload import WORKLOAD_GVK

from .strategies import field_paths

#: Refusals that name no field, and why they are right to: substrings of the API error's
#: message. None so far; the list stays, explicit.
NOT_A_FIELD: Final[dict[str, str]] = {}

#: Semantic cases whose rule is Kueue's own (its generic jobframework's: the queue name and
#: maximum execution time labels; its batch/v1 Job integration's: the Job annotations), so
#: what happens past the webhook is Kueue v0.19.2's, which no condition or event reports:
#: none of our controllers checks Kueue's rules (written to our kinds, they run as usual).
#: What Kueue does instead, with where (``pkg/controller/...``, v0.19.2):
KUEUE_RULES: Final[dict[str, str]] = {
    **{f"{kind}/queue-name-not-a-name": (
        "the API server refuses its Workload (spec.queueName: a DNS subdomain); "
        "jobframework/reconciler.go handleJobWithNoWorkload returns the create error, "
        "which controller-runtime logs and retries with backoff, after stopping a job that "
        "runs (Normal Stopped); no Warning event (the package's only one is "
        "JobNestingTooDeep)")
       for kind in ("jobflow", "daemonjob", "appwrapper", "batchjob")},
    **{f"{kind}/max-exec-time-{what}": (
        "jobframework/utils.go MaximumExecutionTimeSecondsForObject reads a value that is "
        "no positive int32 as unset: its Workload has no maximumExecutionTimeSeconds")
       for kind in ("jobflow", "daemonjob", "appwrapper", "batchjob")
       for what in ("not-a-number", "zero")},
    "batchjob/min-parallelism-not-a-number": (
        "jobs/job/job_controller.go minPodsCount reads a value that is no integer as unset: "
        "its Workload's PodSet has no minCount"),
    "batchjob/min-parallelism-too-big": (
        "jobs/job/job_controller.go minPodsCount takes it as it is; the API server refuses "
        "the Workload (the PodSet's CEL rule minCount <= count), the create error is logged "
        "and retried with backoff, as for a queue name"),
    "batchjob/completions-equal-parallelism-not-a-bool": (
        "jobs/job/job_controller.go syncCompletionWithParallelism reads a value that is no "
        "bool as false: the Job is admitted and started as without it"),
}

#: Condition types that report a problem when True.
PROBLEM_CONDITIONS: Final = frozenset({"Failed", "Unhealthy", "NoEligibleNodes",
                                       "JobTemplateMissing", "Invalid"})


def refusal_problem(err: ApiError) -> str | None:
    """What is wrong with an API server's refusal, or None: a server error (a webhook
    answering with an error, or failing, comes back as one), or no field named and not
    listed in :data:`NOT_A_FIELD`."""
    if err.code >= 500:
        return f"the API server failed: {err!r}"
    if any(known in err.message for known in NOT_A_FIELD) or field_paths(err.message):
        return None
    return f"refused without naming a field: {err!r}"


@attrs.frozen
class Crash:
    """A reconcile (or an event handler) that failed with a Python error."""

    logger: str
    #: ``namespace/name`` of the reconcile request ("" when the record names none).
    key: str
    error: BaseException

    @property
    def where(self) -> str:
        """The innermost frame of ``src/`` it failed in (``package/module.py:line``)."""
        frames = [f for f in traceback.extract_tb(self.error.__traceback__)
                  if "/src/" in f.filename]
        return f"{frames[-1].filename.split('/src/')[-1]}:{frames[-1].lineno}" if frames else ""

    def __str__(self) -> str:
        return (f"{self.logger} {self.key}: {type(self.error).__name__}: {self.error} "
                f"(at {self.where})")


class CrashLog(logging.Handler):
    """Keeps the errors logged with a built-in exception (``AttributeError``,
    ``TypeError``...): a bug, where a refusal by the API server or a conflict is not.
    Every error logged with an exception is kept too (:attr:`errors`): a failed reconcile
    retried with backoff is how Kueue reports some bad input (its log line).

    Attach it to the ``jobframework`` logger; the controllers log a failed reconcile with
    the request as the first argument, so :attr:`Crash.key` names the object.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.crashes: list[Crash] = []
        self.errors: list[Crash] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep ``record`` when it has an exception; as a crash when a built-in one."""
        # A failed reconcile's record carries it as ``error``, with a traceback only when
        # the API server did not answer it.
        err = record.exc_info[1] if record.exc_info else getattr(record, "error", None)
        if err is None:
            return
        request = record.args[0] if isinstance(record.args, tuple) and record.args else None
        key = (f"{request.namespace}/{request.name}"
               if hasattr(request, "namespace") and hasattr(request, "name") else "")
        self.errors.append(Crash(record.name, key, err))
        if type(err).__module__ == "builtins":
            self.crashes.append(Crash(record.name, key, err))

    def of(self, namespace: str, name: str) -> list[Crash]:
        """The crashes of reconciles of ``namespace/name``."""
        return [c for c in self.crashes if c.key == f"{namespace}/{name}"]

    def errors_of(self, namespace: str, name: str) -> list[Crash]:
        """Every error logged by reconciles of ``namespace/name``."""
        return [c for c in self.errors if c.key == f"{namespace}/{name}"]


class Reader(Protocol):
    """The reads :func:`signals` makes (an in-memory client or a RestClient)."""

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """Read one object."""

    async def list(self, gvk: GVK, *, namespace: str | None = None) -> ObjectList:
        """List objects."""


async def signals(client: Reader, obj: Object) -> list[str]:
    """What says something is wrong with ``obj``: the notes of the Warning events about
    it, the ``reason: message`` of its conditions that are True and of a problem type
    (:data:`PROBLEM_CONDITIONS`), and the messages of its Workload's ``QuotaReserved=False``
    (Kueue refusing it or keeping it waiting)."""
    namespace = str(obj["metadata"]["namespace"])
    current = await client.get(GVK.of(obj), name_of(obj), namespace=namespace)
    out = [str(e.get("note") or "")
           for e in (await client.list(EVENT_GVK, namespace=namespace)).items
           if e.get("type") == "Warning"
           and (e.get("regarding") or {}).get("uid") == uid_of(current)]
    status: Any = current.get("status")
    for cond in (status.get("conditions") or []) if isinstance(status, dict) else []:
        if cond.get("status") == "True" and cond.get("type") in PROBLEM_CONDITIONS:
            out.append(f"{cond.get('reason')}: {cond.get('message')}")
    for wl in (await client.list(WORKLOAD_GVK, namespace=namespace)).items:
        if not any(o.get("uid") == uid_of(current)
                   for o in wl["metadata"].get("ownerReferences") or []):
            continue
        for cond in (wl.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "QuotaReserved" and cond.get("status") == "False" \
                    and cond.get("reason") in ("Inadmissible", "Pending"):
                out.append(f"Workload: {cond.get('message')}")
    return out


def mentions(found: list[str], hint: str) -> bool:
    """Whether one of the ``found`` signals contains ``hint`` (case-insensitively)."""
    return any(hint.lower() in s.lower() for s in found)
