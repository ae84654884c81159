"""Bad input (issue #14) through the real API server and the real Kueue.

The fault suite's cluster (``faults_cluster``: Kueue's own ``batch/job`` integration off,
``Job.v1.batch`` an external framework) with our manager in-process
(:class:`~integrations.manager.ExternalFrameworkManager`, every reference integration,
batch/v1 Jobs included), its webhooks served on loopback and registered by URL.

1. Through the webhooks: for every kind a fixed number of broken objects (``strategies``)
   is created with ``dryRun=All`` and, from a parked valid object, updated with
   ``dryRun=All``. No refusal is a server error (a webhook that answers with an error
   code, or fails, comes back as one) and every refusal names a field; no webhook handler
   and no reconcile fails with a Python error. The hand-written semantic cases are refused
   by our validating webhook, naming their field.
2. Webhooks bypassed: our webhook configurations are deleted, then the semantic cases our
   controllers report (:data:`REPORTED`: all but Kueue's own rules) are written for real.
   Each gets a condition or Warning event saying what is wrong, no reconcile fails with a
   Python error, the manager keeps running, and a valid object of each kind created
   afterwards runs to its end through real Kueue (kwok completes the pods).

Everything lives in the namespace :data:`NS`, deleted at the end (while the manager still
runs, to remove the AppWrapper finalizers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final

import pytest

from integrations.catalog import reference_names
from integrations.manager import (
    MUTATING_GVK,
    VALIDATING_GVK,
    ExternalFrameworkManager,
    ManagerOptions,
)
from jobframework import constants as c
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError, Conflict, NotFound
from jobframework.runtime.objects import GVK, Object, name_of
from jobframework.testing.cluster import ClusterInfo, LocalCluster

from .badinput import KUEUE_RULES, CrashLog, mentions, refusal_problem, signals
from .harness import eventually
from .strategies import (
    GVKS,
    KINDS,
    QUEUE,
    SEMANTIC_CASES,
    SemanticCase,
    draw_examples,
    field_paths,
    seeds,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(1200)]

NS: Final = "jf-badinput"
#: The LocalQueue the parked objects name: it does not exist, so they stay suspended.
PARKED_QUEUE: Final = "jf-badinput-parked"
#: The fault suite's ClusterQueue (``Topology.cluster_queue``), selecting every namespace.
CLUSTER_QUEUE: Final = "cluster-queue"
#: Our webhook configurations' name: not the default, in case another manager's are there.
CONFIG_NAME: Final = "kueue-jobframework-badinput"
NAMESPACE_GVK: Final = GVK("", "v1", "Namespace")
LOCAL_QUEUE_GVK: Final = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "LocalQueue")
JOB_GVK: Final = GVK("batch", "v1", "Job")
#: Broken objects created, and updated, with dryRun per kind.
CREATES: Final = 25
UPDATES: Final = 12
TIMEOUT: Final = 240.0

#: The semantic cases written with the webhooks bypassed: every one but Kueue's own rules
#: (:data:`~.badinput.KUEUE_RULES`, which Kueue reports with no condition or event; the
#: in-memory run checks what it does instead). Our controllers run their webhook's checks
#: before acting, so each is reported whatever happens first (written without our mutating
#: webhook, an object is not suspended): a JobFlow or DaemonJob is failed (``InvalidSpec``),
#: an AppWrapper fails its first phase (``CreateFailed``), a JobTemplate or a DaemonJob run
#: by MultiKueue gets a Warning event; a DaemonJob no node suits waits (``NoEligibleNodes``)
#: and an AppWrapper of a kind the cluster does not serve fails at creation, once admitted.
REPORTED: Final = {
    kind: tuple(case.name for case in cases if str(case) not in KUEUE_RULES)
    for kind, cases in SEMANTIC_CASES.items()
    if any(str(case) not in KUEUE_RULES for case in cases)
}
#: The seed each kind's valid object is made from, and how to tell it finished well.
GOOD_SEED: Final = {"jobflow": 0, "daemonjob": 1, "appwrapper": 0, "batchjob": 0}


def _case(kind: str, name: str) -> SemanticCase:
    return next(case for case in SEMANTIC_CASES[kind] if case.name == name)


def _in_ns(obj: Object, name: str | None = None) -> Object:
    obj["metadata"]["namespace"] = NS
    if name is not None:
        obj["metadata"]["name"] = name
    return obj


def _component_names(obj: Object) -> None:
    """Name an AppWrapper's wrapped objects after it (they would clash otherwise)."""
    spec = obj.get("spec")
    for i, comp in enumerate((spec or {}).get("components") or []
                             if isinstance(spec, dict) else []):
        meta = (comp.get("template") or {}).get("metadata") if isinstance(comp, dict) else None
        if isinstance(meta, dict):
            meta["name"] = f"{name_of(obj)[:50]}-{i}"


async def _running(efm: ExternalFrameworkManager) -> bool:
    """Whether the manager still runs (``wait`` returns once it stopped)."""
    try:
        await asyncio.wait_for(efm.wait(), timeout=0.2)
    except TimeoutError:
        return True
    return False


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
async def client(faults_cluster: tuple[LocalCluster, ClusterInfo]) -> AsyncIterator[RestClient]:
    """An admin client of the fault suite's cluster."""
    _, info = faults_cluster
    async with await RestClient.from_kubeconfig(info.kubeconfig) as rest:
        yield rest


@pytest.fixture
def crash_log() -> Iterator[CrashLog]:
    """The Python errors the manager (webhook handlers included) logs while a test runs."""
    handler = CrashLog()
    logger = logging.getLogger("jobframework")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.fixture
async def manager(client: RestClient, crash_log: CrashLog
                  ) -> AsyncIterator[ExternalFrameworkManager]:
    """Our manager running every reference integration, webhooks registered."""
    options = ManagerOptions(integrations=reference_names(),
                             webhook_configuration_name=CONFIG_NAME,
                             ready_timeout=120.0)
    async with ExternalFrameworkManager(client, options) as efm:
        yield efm


@pytest.fixture
async def namespace(client: RestClient, manager: ExternalFrameworkManager) -> AsyncIterator[str]:
    """:data:`NS` with a LocalQueue :data:`QUEUE` of the suite's ClusterQueue; deleted
    (everything in it) before the manager stops."""
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.create({"apiVersion": LOCAL_QUEUE_GVK.api_version, "kind": "LocalQueue",
                         "metadata": {"name": QUEUE, "namespace": NS},
                         "spec": {"clusterQueue": CLUSTER_QUEUE}})
    try:
        yield NS
    finally:
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACE_GVK, NS,
                                propagation_policy=PropagationPolicy.BACKGROUND)

        async def gone() -> bool:
            try:
                await client.get(NAMESPACE_GVK, NS)
            except NotFound:
                return True
            return False
        await eventually(f"namespace {NS} deleted", gone, 180)


# --- 1. through the webhooks ------------------------------------------------------------------


async def _park_seeds(client: RestClient) -> dict[tuple[str, int], Object]:
    """Each seed created for real, in a LocalQueue that does not exist: it stays
    suspended, an object to update."""
    out: dict[tuple[str, int], Object] = {}
    for kind in KINDS:
        for i, seed in enumerate(seeds(kind)):
            obj = _in_ns(seed, f"parked-{kind}-{i}")
            labels = obj["metadata"].setdefault("labels", {})
            if c.QUEUE_LABEL in labels:
                labels[c.QUEUE_LABEL] = PARKED_QUEUE
            _component_names(obj)
            out[(kind, i)] = await client.create(obj)
    return out


async def _dry_update(client: RestClient, kind: str, name: str,
                      edit: Callable[[Object], object]) -> ApiError | None:
    """``edit`` applied to the stored object, sent as a dry-run update (again from the
    latest object when a controller wrote it in between)."""
    for _ in range(5):
        obj = await client.get(GVKS[kind], name, namespace=NS)
        edit(obj)
        try:
            await client.update(obj, dry_run=True)
        except Conflict:
            continue
        except ApiError as err:
            return err
        return None
    raise AssertionError(f"{kind} {name}: conflicts on every dry-run update")


async def test_real_api_server_refusals_name_the_field(
        client: RestClient, manager: ExternalFrameworkManager, namespace: str,
        crash_log: CrashLog) -> None:
    parked = await _park_seeds(client)
    problems: list[str] = []
    outcomes: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        counts = outcomes.setdefault(kind, {"accepted": 0, "refused": 0})
        for bad in draw_examples(kind, CREATES):
            try:
                await client.create(_in_ns(bad.obj), dry_run=True)
                counts["accepted"] += 1
            except ApiError as err:
                counts["refused"] += 1
                if (problem := refusal_problem(err)) is not None:
                    problems.append(f"create {bad.describe()}: {problem}")
        for bad in draw_examples(kind, UPDATES, rename=False):
            def edit(obj: Object, bad: Any = bad) -> None:
                for mutation in bad.mutations:
                    mutation.apply(obj)
            err = await _dry_update(client, kind, name_of(parked[(kind, bad.seed)]), edit)
            if err is not None and (problem := refusal_problem(err)) is not None:
                problems.append(f"update {bad.describe()}: {problem}")
    for cases in SEMANTIC_CASES.values():
        for case in cases:
            try:
                await client.create(_in_ns(case.build()), dry_run=True)
            except ApiError as err:
                if not err.message.startswith('admission webhook "v') or \
                        case.field not in field_paths(err.message):
                    problems.append(f"{case}: expected our webhook to refuse it naming "
                                    f"{case.field}, got {err!r}")
            else:
                problems.append(f"{case}: accepted")
    assert not problems, "\n".join(problems)
    assert not crash_log.crashes, "\n".join(str(x) for x in crash_log.crashes)
    # Every kind's seeds were accepted (parked above) and its hostile objects refused; most
    # kinds also see some mutated objects through (AppWrapper's rules refuse nearly all).
    assert all(n["refused"] for n in outcomes.values()), outcomes
    assert len(parked) >= len(KINDS)
    assert sum(1 for n in outcomes.values() if n["accepted"]) >= len(KINDS) - 1, outcomes
    assert await _running(manager)


# --- 2. webhooks bypassed ---------------------------------------------------------------------


async def _delete_webhook_configurations(client: RestClient) -> None:
    """Delete our configurations, then wait until the API server stops calling them (its
    view of them lags): a semantic case is then accepted by a dry run."""
    for gvk in (MUTATING_GVK, VALIDATING_GVK):
        with contextlib.suppress(NotFound):
            await client.delete(gvk, CONFIG_NAME)
    probe = _case("jobflow", "unknown-dependency")

    async def bypassed() -> bool:
        try:
            await client.create(_in_ns(probe.build(), "bypass-probe"), dry_run=True)
        except ApiError:
            return False
        return True
    await eventually("the API server to stop calling our webhooks", bypassed, 60)


def _good(kind: str) -> Object:
    """A valid object as our mutating webhook would have stored it: queued, suspended."""
    obj = _in_ns(seeds(kind)[GOOD_SEED[kind]], f"good-{kind}")
    _component_names(obj)
    obj["spec"]["suspend"] = True
    return obj


def _finished_well(kind: str, obj: Object) -> bool:
    status = obj.get("status") or {}
    if kind in ("jobflow", "daemonjob"):
        return bool(status.get("state") == "Succeed")
    if kind == "appwrapper":
        return bool(status.get("phase") == "Succeeded")
    return any(cond.get("type") == "Complete" and cond.get("status") == "True"
               for cond in status.get("conditions") or [])


async def test_bypassed_objects_are_reported_and_valid_ones_still_run(
        client: RestClient, manager: ExternalFrameworkManager, namespace: str,
        crash_log: CrashLog) -> None:
    await _delete_webhook_configurations(client)
    written: dict[str, tuple[SemanticCase, Object]] = {}
    for kind, names in REPORTED.items():
        for name in names:
            case = _case(kind, name)
            # A case about the name keeps its own.
            obj = _in_ns(case.build(), None if case.field == "metadata.name"
                         else f"bypass-{kind[:3]}-{name}")
            _component_names(obj)
            written[str(case)] = (case, await client.create(obj))

    async def unreported() -> dict[str, list[str]]:
        out = {}
        for what, (case, obj) in written.items():
            found = await signals(client, obj)
            if not mentions(found, case.expected_hint):
                out[what] = found
        return out

    missing: dict[str, list[str]] = {}

    async def all_reported() -> bool:
        missing.clear()
        missing.update(await unreported())
        return not missing
    with contextlib.suppress(AssertionError):
        await eventually("every bypassing write to be reported", all_reported, TIMEOUT)
    assert not missing, "\n".join(
        f"{what}: no condition or Warning event mentions "
        f"{written[what][0].expected_hint!r}; found {found}" for what, found in missing.items())
    for _, obj in written.values():
        assert not crash_log.of(NS, name_of(obj)), [str(x) for x in crash_log.of(NS,
                                                                               name_of(obj))]
    assert await _running(manager)

    # The controllers keep serving: a valid object of each kind runs to its end.
    good = {kind: await client.create(_good(kind)) for kind in GOOD_SEED}

    async def finished() -> bool:
        for kind, obj in good.items():
            current = await client.get(GVKS[kind], name_of(obj), namespace=NS)
            if not _finished_well(kind, current):
                return False
        return True
    await eventually("the valid objects to finish", finished, TIMEOUT)
    assert not crash_log.crashes, "\n".join(str(x) for x in crash_log.crashes)
