"""Bad input (issue #14) on the in-memory API server: hostile objects of every kind our
webhooks serve (see ``strategies``), sent as the API server sends them, and written with the
webhooks bypassed.

Through the webhooks (fixture ``world``): every integration wired as our manager wires it,
its manager running. Each object is created (and, from a stored valid object, updated)
with ``dryRun`` through the in-memory server's admission chain, where our handlers answer
AdmissionReviews exactly as over HTTPS: the mutating webhook sees the object as decoded
(any JSON, for a custom resource), then the CRD schema and the server's checks run, then
the validating webhook. No webhook may answer with an error code (a handler that raises
is answered with a 500), and every refusal, by a webhook or by the server, must name a
field path. Objects the webhooks accept are then created for real: no reconcile may fail
with a Python error on them.

Webhooks bypassed (fixture ``bypassed``): the same wiring with no webhook on the chain.
Objects that break a webhook rule but pass the schema (``SEMANTIC_CASES``) and random
broken objects are written; no reconcile may fail with a Python error, each semantic case
must get a condition or Warning event naming the problem (our controllers run their
webhook's checks again), but for the cases whose rule is Kueue's own
(:data:`~.badinput.KUEUE_RULES`), where Kueue v0.19.2's own behaviour, which reports none,
is asserted instead; and valid objects created afterwards still start.
Written without our mutating webhook, an object is not suspended: its controller may act
before the generic reconciler suspends it (a valid JobFlow creates its ready flows' Jobs;
an invalid one is failed by the controller's checks, whichever runs first). The in-memory
server leaves out Kueue's Workload schema and the API server's Job validation; validating
hooks stand in for the parts broken jobs reach (see ``_workload_schema`` and
``_job_validation``).

Not marked ``faults``: this runs with the unit tests (20 to 30 s). It lives beside the
cluster test so that both import ``strategies`` the same way: ``tests/faults`` is a
package and pytest's ``--import-mode=importlib`` resolves ``from .strategies import ...``
through it, while ``tests/unit`` is no package (a test there could not import it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from integrations.catalog import reference_names
from jobframework.config import default_configuration, reconciler_options_from
from jobframework.field import Path
from jobframework.integrations import IntegrationManager
from jobframework.jsonshape import POD_TEMPLATE_SHAPE, shape_errors
from jobframework.plugins import load_integrations
from jobframework.runtime import errors
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object, name_of, uid_of
from jobframework.testing import APIServer
from jobframework.testing.authorization import Authorizer, AuthorizingClient
from jobframework.testing.kueue import KueueStandIn, register_kueue_kinds
from jobframework.testing.pytest_plugin import wire_webhooks
from jobframework.validation import is_dns1123_label, is_dns1123_subdomain
from jobframework.webhook import WebhookServer, rule
from jobframework.workload import WORKLOAD_GVK

from .badinput import KUEUE_RULES, Crash, CrashLog, mentions, refusal_problem, signals
from .strategies import (
    GVKS,
    KINDS,
    QUEUE,
    SemanticCase,
    bad_inputs,
    draw_examples,
    field_paths,
    seeds,
    semantic_cases,
)

#: Where the objects go (dry-run creates and accepted objects; the bypassing writes in
#: their own namespace, so that the two worlds' managers, which log to the same loggers,
#: never share an object key), and where the valid objects updates start from live.
CREATE_NS: Final = "bad"
BYPASS_NS: Final = "bypass"
STORED_NS: Final = "stored"
NODES: Final = ("node-a", "node-b")
TAINTED_NODE: Final = "control-plane"
NODE_GVK: Final = GVK("", "v1", "Node")
JOB_GVK: Final = GVK("batch", "v1", "Job")
POD_GVK: Final = GVK("", "v1", "Pod")

_SETTINGS: Final = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                            suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                   HealthCheck.too_slow])


# --- the world ----------------------------------------------------------------------------


@attrs.define
class Answer:
    """One AdmissionReview a webhook answered."""

    webhook: str
    operation: str
    response: dict[str, Any]

    @property
    def code(self) -> int:
        return int((self.response.get("status") or {}).get("code") or 200)

    @property
    def message(self) -> str:
        return str((self.response.get("status") or {}).get("message") or "")


async def _workload_schema(review: dict[str, Any]) -> dict[str, Any]:
    # The in-memory server serves Workloads without Kueue's CRD schema; this stands in for
    # the parts a broken job can break: spec.podSets is a non-empty map keyed by name (a
    # DNS-1123 label), each pod template a typed PodTemplateSpec (quantities included),
    # a PodSet's minCount at most its count (a CEL rule), spec.queueName a DNS-1123
    # subdomain, a PodSpec has containers.
    request = review["request"]
    spec = request["object"].get("spec") or {}
    pod_sets = spec.get("podSets") or []
    names = [str(p.get("name")) for p in pod_sets]
    problems = [] if pod_sets else ["spec.podSets: Invalid value: 0: must have at least 1 item"]
    for i, name in enumerate(names):
        if name in names[:i]:
            problems.append(f'spec.podSets[{i}]: Duplicate value: {{"name":"{name}"}}')
        problems.extend(f'spec.podSets[{i}].name: Invalid value: "{name}": {msg}'
                        for msg in is_dns1123_label(name))
    for i, pod_set in enumerate(pod_sets):
        template = pod_set.get("template")
        path = Path.new("spec", "podSets").index_(i).child("template")
        problems.extend(str(e) for e in shape_errors(template, POD_TEMPLATE_SHAPE, path))
        if not ((template or {}).get("spec") or {}).get("containers"):
            problems.append(f"{path}.spec.containers: Required value")
        count, min_count = pod_set.get("count"), pod_set.get("minCount")
        if min_count is not None and not 0 < min_count <= count:
            problems.append(f'spec.podSets[{i}]: Invalid value: "object": minCount should be '
                            "positive and less or equal to count")
    queue = str(spec.get("queueName") or "")
    problems.extend(f'spec.queueName: Invalid value: "{queue}": {msg}'
                    for msg in (is_dns1123_subdomain(queue) if queue else []))
    response: dict[str, Any] = {"uid": request["uid"], "allowed": not problems}
    if problems:
        response["status"] = {"code": 422, "reason": "Invalid", "message": "; ".join(problems)}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _job_validation(review: dict[str, Any]) -> dict[str, Any]:
    # The in-memory server does not validate a Job's pod template; this stands in for the
    # parts of the real API server's validation that broken parents produce (containers,
    # restart policy, a name that fits the pod label it becomes).
    request = review["request"]
    pod = ((request["object"].get("spec") or {}).get("template") or {}).get("spec") or {}
    problems = []
    name = str(request["object"]["metadata"].get("name") or "")
    if len(name) > 63:  # the API server labels the pods with it (batch.kubernetes.io/job-name)
        problems.append(f'spec.template.labels: Invalid value: "{name}": must be no more than '
                        "63 characters")
    if not pod.get("containers"):
        problems.append("spec.template.spec.containers: Required value")
    if pod.get("restartPolicy") not in ("OnFailure", "Never"):
        problems.append(f'spec.template.spec.restartPolicy: Unsupported value: '
                        f'"{pod.get("restartPolicy")}": supported values: "OnFailure", "Never"')
    response: dict[str, Any] = {"uid": request["uid"], "allowed": not problems}
    if problems:
        response["status"] = {"code": 422, "reason": "Invalid", "message": "; ".join(problems)}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class World:
    """The in-memory server with every integration wired as our manager wires it, the
    manager running, Kueue played by :class:`KueueStandIn`.

    ``webhooks``: put the handlers on the server's admission chain (the answers are kept
    in :attr:`answers`); else they are bypassed.
    """

    def __init__(self, *, webhooks: bool, namespace: str) -> None:
        self.namespace = namespace
        self.clock = ManualClock()
        self.server = APIServer(self.clock, builtin_defaults=True)
        register_kueue_kinds(self.server)
        self.integrations = load_integrations(list(reference_names()))
        for integration in self.integrations:
            for crd in integration.load_crds():
                self.server.register_crd(crd)
        self.admin = self.server.client()
        self.kueue = KueueStandIn(self.server)
        self.webhooks_on = webhooks
        self.webhook_server = WebhookServer(clock=self.clock)
        self.manager: Manager | None = None
        self.task: asyncio.Task[None] | None = None
        self.answers: list[Answer] = []
        self.paths: list[str] = []
        self.crash_log = CrashLog()

    async def setup(self) -> None:
        """Namespaces, Kueue's queues, Ready nodes, then the integrations, running."""
        self.server.add_validating_webhook(
            _workload_schema, name="workload-crd.kueue.x-k8s.io",
            rules=[rule("kueue.x-k8s.io", "*", "workloads", ["CREATE", "UPDATE"])])
        self.server.add_validating_webhook(
            _job_validation, name="job-validation.k8s.io",
            rules=[rule("batch", "v1", "jobs", ["CREATE"])])
        for ns in (self.namespace, STORED_NS):
            await self.admin.create({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
        # None in STORED_NS: the stored objects stay suspended whatever ran before.
        await self.kueue.local_queue(QUEUE, "cq", self.namespace)
        await self.kueue.resource_flavor("default-flavor")
        await self.kueue.cluster_queue("cq", {"default-flavor": {"cpu": "1000",
                                                                 "memory": "1000Gi"}})
        for name in (*NODES, TAINTED_NODE):
            node = await self.admin.create({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
            node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
            await self.admin.update_status(node)
        # As a control-plane node is: DaemonJobs without a toleration skip it.
        await self.admin.patch(NODE_GVK, TAINTED_NODE, {"spec": {"taints": [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}})
        im = IntegrationManager()
        for integration in self.integrations:
            integration.register(im)
        options = attrs.evolve(reconciler_options_from(default_configuration(),
                                                       integration_manager=im),
                               clock=self.clock)
        # The AppWrapper webhook asks SubjectAccessReviews: an authorizer allowing all.
        self.manager = Manager(AuthorizingClient(self.server.client(), Authorizer()),
                               clock=self.clock)
        for integration in self.integrations:
            wiring = await integration.setup(self.manager, webhook_server=self.webhook_server,
                                             kueue=options)
            self.paths.extend(wiring.webhook_paths)
        if self.webhooks_on:
            wire_webhooks(self.server, self.webhook_server, self.paths)
            for hook in self.server.admission.webhooks:
                if hook.name.endswith(".kb.io"):
                    hook.fn = self._recording(hook.name, hook.fn)
        logging.getLogger("jobframework").addHandler(self.crash_log)
        # Running, as our webhooks run beside the controllers: they read through its cache
        # (the DaemonJob webhook counts the eligible Nodes there).
        self.task = asyncio.create_task(self.manager.start())
        async with asyncio.timeout(30):
            await self.manager.get_cache().wait_for_cache_sync()

    async def stop(self) -> None:
        """Stop the manager."""
        logging.getLogger("jobframework").removeHandler(self.crash_log)
        if self.manager is not None and self.task is not None:
            await self.manager.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task

    def _recording(self, name: str, fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
                   ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def call(review: dict[str, Any]) -> dict[str, Any]:
            out = await fn(review)
            self.answers.append(Answer(name, review["request"]["operation"],
                                       dict(out.get("response") or {})))
            return out
        return call

    @property
    def running(self) -> bool:
        """Whether the manager still runs (a failed runnable stops it)."""
        return self.task is not None and not self.task.done()

    async def settle(self, rounds: int = 3) -> None:
        """Let the controllers and Kueue work: each round runs the loop until the server
        is quiet, lets Kueue schedule, and moves the clock a second (rate-limited
        retries come due)."""
        for _ in range(rounds):
            last, quiet = "", 0
            for _ in range(20000):
                await asyncio.sleep(0)
                if self.server.resource_version != last:
                    last, quiet = self.server.resource_version, 0
                elif (quiet := quiet + 1) >= 30:
                    break
            await self.kueue.schedule()
            self.clock.advance(1.0)

    def crashes_of(self, obj: Object) -> list[Crash]:
        """The Python errors of reconciles of ``obj``."""
        return self.crash_log.of(self.namespace, name_of(obj))


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for the module: its worlds outlive a single hypothesis example."""
    with asyncio.Runner() as r:
        yield r


@pytest.fixture(scope="module")
def world(runner: asyncio.Runner) -> Iterator[World]:
    """Webhooks on the chain; one stored valid object per seed in :data:`STORED_NS`."""
    w = World(webhooks=True, namespace=CREATE_NS)
    runner.run(w.setup())
    runner.run(_store_seeds(w))
    yield w
    runner.run(w.stop())


async def _store_seeds(w: World) -> None:
    for kind in KINDS:
        for i, seed in enumerate(seeds(kind)):
            seed["metadata"].update(namespace=STORED_NS, name=f"{kind}-{i}")
            _unique_components(seed)
            await w.admin.create(seed)
    w.answers.clear()


async def _stored(w: World, kind: str, seed: int) -> Object:
    return await w.admin.get(GVKS[kind], f"{kind}-{seed}", namespace=STORED_NS)


def _unique_components(obj: Object) -> None:
    """Name an AppWrapper's wrapped objects after it: two AppWrappers from one seed would
    otherwise wrap objects of the same name."""
    spec = obj.get("spec")
    components = spec.get("components") if isinstance(spec, dict) else None
    for i, comp in enumerate(components if isinstance(components, list) else []):
        template = comp.get("template") if isinstance(comp, dict) else None
        meta = template.get("metadata") if isinstance(template, dict) else None
        if isinstance(meta, dict):
            meta["name"] = f"{str(name_of(obj))[:50]}-{i}"


def _in_namespace(obj: Object, namespace: str) -> Object:
    obj["metadata"]["namespace"] = namespace
    return obj


_names = itertools.count()


def _fresh_name(obj: Object, prefix: str) -> Object:
    """``obj`` under a name no other object of the module has (a valid one)."""
    obj["metadata"]["name"] = f"{prefix}-{next(_names)}"
    _unique_components(obj)
    return obj


# --- checks ---------------------------------------------------------------------------------


def check_answers(w: World, what: str) -> None:
    """No webhook answered with an error; every denial names a field."""
    for answer in w.answers:
        assert answer.code < 500, f"{what}: webhook {answer.webhook} failed: {answer.response}"
        if not answer.response.get("allowed"):
            assert field_paths(answer.message), (
                f"{what}: webhook {answer.webhook} denied {answer.operation} without naming "
                f"a field: {answer.message!r}")


def check_refusal(err: errors.ApiError, what: str) -> None:
    """The API server's refusal is no server error and names a field (or is listed in
    ``NOT_A_FIELD``)."""
    problem = refusal_problem(err)
    assert problem is None, f"{what}: {problem}"


def _outcome(err: errors.ApiError | None) -> str:
    if err is None:
        return "accepted"
    return "webhook" if err.message.startswith("admission webhook") else "api server"


# --- through the webhooks -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_seeds_pass_every_webhook(runner: asyncio.Runner, world: World, kind: str) -> None:
    """The strategies break valid objects: each seed is accepted as it is."""
    async def scenario() -> None:
        for seed in seeds(kind):
            world.answers.clear()
            await world.admin.create(_in_namespace(seed, CREATE_NS), dry_run=True)
            assert world.answers, f"no webhook of ours saw {kind}"
            assert all(a.response["allowed"] for a in world.answers)
    runner.run(scenario())


@pytest.mark.parametrize("kind", KINDS)
@_SETTINGS
@given(data=st.data())
def test_create_answers_name_the_field(runner: asyncio.Runner, world: World, kind: str,
                                       data: st.DataObject) -> None:
    bad = data.draw(bad_inputs(kind), label="bad input")

    async def scenario() -> None:
        world.answers.clear()
        refusal: errors.ApiError | None = None
        try:
            await world.admin.create(_in_namespace(bad.obj, CREATE_NS), dry_run=True)
        except errors.ApiError as err:
            refusal = err
            check_refusal(err, bad.describe())
        check_answers(world, bad.describe())
        event(_outcome(refusal))
    runner.run(scenario())


@pytest.mark.parametrize("kind", KINDS)
@_SETTINGS
@given(data=st.data())
def test_update_answers_name_the_field(runner: asyncio.Runner, world: World, kind: str,
                                       data: st.DataObject) -> None:
    """A stored valid object updated with a broken body (its name, namespace and
    resourceVersion kept: another one would be another request)."""
    bad = data.draw(bad_inputs(kind, rename=False), label="bad input")

    async def scenario() -> None:
        new = await _stored(world, kind, bad.seed)
        for mutation in bad.mutations:
            mutation.apply(new)
        world.answers.clear()
        refusal: errors.ApiError | None = None
        try:
            await world.admin.update(new, dry_run=True)
        except errors.ApiError as err:
            refusal = err
            check_refusal(err, bad.describe())
        check_answers(world, bad.describe())
        event(_outcome(refusal))
    runner.run(scenario())


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "batchjob"])
@pytest.mark.parametrize("spec", [False, 7, 1.5, "spec", [], [{"flows": []}]], ids=repr)
def test_spec_of_another_json_type_is_refused_naming_spec(
        runner: asyncio.Runner, world: World, kind: str, spec: Any) -> None:
    """The mutating webhook sees a custom resource before its schema is checked: a
    ``spec`` that is no object is refused by it with a 400 naming ``spec``, as Go's decoder
    would; a JobTemplate, which has no mutating webhook, by the schema. (Not a Job: its
    ``spec`` is decoded into its Go type before any webhook sees it.)"""
    obj = _in_namespace(seeds(kind)[0], CREATE_NS)
    obj["spec"] = spec

    async def scenario() -> None:
        world.answers.clear()
        with pytest.raises(errors.ApiError) as refused:
            await world.admin.create(obj, dry_run=True)
        err = refused.value
        check_answers(world, f"spec = {spec!r}")
        assert "spec" in field_paths(err.message), err
        if kind == "jobtemplate":
            assert isinstance(err, errors.Invalid), err
            assert [a.webhook for a in world.answers] == [], "refused before any webhook"
        else:
            assert err.code == 400, err
            assert err.message.startswith(f'admission webhook "m{kind}.kb.io" denied the '
                                          'request: spec: Invalid value: '), err
    runner.run(scenario())


def _webhook_denial(err: errors.ApiError) -> str:
    assert err.message.startswith('admission webhook "v'), (
        f"expected our validating webhook to refuse it, got {err!r}")
    return err.message


@pytest.mark.parametrize("case", semantic_cases(), ids=str)
def test_semantic_case_denied_by_the_webhook_naming_the_field(
        runner: asyncio.Runner, world: World, case: SemanticCase) -> None:
    """Hand-written objects past the schema, refused by the validating webhook (on create,
    and on update of a stored object unless the rule is create-only), naming the field."""
    async def scenario() -> None:
        with pytest.raises(errors.ApiError) as created:
            await world.admin.create(_in_namespace(case.build(), CREATE_NS), dry_run=True)
        message = _webhook_denial(created.value)
        assert case.field in field_paths(message), message
        if case.create_only or case.field == "metadata.name":
            return  # a rename is another object, not an update
        new = await _stored(world, case.kind, case.seed)
        case.edit(new)
        with pytest.raises(errors.ApiError) as updated:
            await world.admin.update(new, dry_run=True)
        message = _webhook_denial(updated.value)
        assert case.field in field_paths(message), message
    runner.run(scenario())


@pytest.mark.parametrize("kind", KINDS)
@settings(_SETTINGS, max_examples=25)
@given(data=st.data())
def test_accepted_bad_input_crashes_no_reconcile(runner: asyncio.Runner, world: World,
                                                 kind: str, data: st.DataObject) -> None:
    """What the webhooks let through reaches the controllers: it must not make a
    reconcile fail with a Python error."""
    bad = data.draw(bad_inputs(kind), label="bad input")

    async def scenario() -> None:
        obj = _fresh_name(_in_namespace(bad.obj, CREATE_NS), f"accepted-{kind}")
        try:
            await world.admin.create(obj)
        except errors.ApiError:
            event("refused")
            return
        event("accepted")
        await world.settle(rounds=2)
        crashes = [str(c) for c in world.crashes_of(obj)]
        assert not crashes, (bad.describe(), crashes)
        assert world.running
    runner.run(scenario())


def _null_affinity_daemonjob() -> Object:
    obj = _in_namespace(seeds("daemonjob")[1], CREATE_NS)
    obj["spec"]["template"]["spec"]["affinity"] = None
    return _fresh_name(obj, "null-affinity")


def test_accepted_daemonjob_with_null_affinity_runs(runner: asyncio.Runner,
                                                     world: World) -> None:
    """Null is unset (Go decodes it to nil): the webhooks accept it, so the controller must
    run it. (Helm renders an empty ``affinity:`` value as null.)"""
    async def scenario() -> None:
        obj = await world.admin.create(_null_affinity_daemonjob())
        await world.settle(rounds=3)
        assert not world.crashes_of(obj), [str(c) for c in world.crashes_of(obj)]
        jobs = (await world.admin.list(JOB_GVK, namespace=CREATE_NS)).items
        assert sum(any(o.get("uid") == uid_of(obj) for o in j["metadata"].get(
            "ownerReferences") or []) for j in jobs) == len(NODES)
    runner.run(scenario())


# --- webhooks bypassed ----------------------------------------------------------------------


@attrs.frozen
class Written:
    """A broken object written past the webhook."""

    what: str
    obj: Object


@attrs.define
class Bypassed:
    """The bypass world once it has worked on everything written."""

    world: World
    cases: dict[str, Object] = attrs.field(factory=dict)
    written: list[Written] = attrs.field(factory=list)
    refused: list[tuple[str, errors.ApiError]] = attrs.field(factory=list)
    good: dict[str, Object] = attrs.field(factory=dict)


#: Random broken objects written past the webhook, per kind.
BYPASS_EXAMPLES: Final = 30

#: The seed each kind's valid object is made from (a JobTemplate runs nothing).
_GOOD_SEED: Final = {"jobflow": 0, "daemonjob": 1, "appwrapper": 0, "batchjob": 0}


def _good(kind: str) -> Object:
    """A valid object as our mutating webhook would have stored it (suspended)."""
    obj = _in_namespace(seeds(kind)[_GOOD_SEED[kind]], BYPASS_NS)
    obj["metadata"]["name"] = f"good-{kind}"
    _unique_components(obj)
    obj["spec"]["suspend"] = True
    return obj


async def _bypass(w: World) -> Bypassed:
    out = Bypassed(w)
    for case in semantic_cases():
        obj = _in_namespace(case.build(), BYPASS_NS)
        if case.field != "metadata.name":
            obj["metadata"]["name"] = f"{case.kind[:3]}-{case.name}"
        _unique_components(obj)
        out.cases[str(case)] = await w.admin.create(obj)
    for kind in KINDS:
        for bad in draw_examples(kind, BYPASS_EXAMPLES):
            obj = _fresh_name(_in_namespace(bad.obj, BYPASS_NS), f"random-{kind}")
            try:
                out.written.append(Written(bad.describe(), await w.admin.create(obj)))
            except errors.ApiError as err:
                out.refused.append((bad.describe(), err))
    await w.settle(rounds=6)
    for kind in _GOOD_SEED:
        out.good[kind] = await w.admin.create(_good(kind))
    await w.settle(rounds=4)
    return out


@pytest.fixture(scope="module")
def bypassed(runner: asyncio.Runner) -> Iterator[Bypassed]:
    """Every integration running with its webhooks bypassed, after the semantic cases,
    :data:`BYPASS_EXAMPLES` random broken objects per kind, then one valid object per
    kind were written."""
    w = World(webhooks=False, namespace=BYPASS_NS)
    runner.run(w.setup())
    try:
        yield runner.run(_bypass(w))
    finally:
        runner.run(w.stop())


def test_bypassed_writes_refused_by_the_api_server_name_the_field(bypassed: Bypassed) -> None:
    """The semantic cases pass the schema; the random objects that do not are refused
    naming the field, as through the webhooks."""
    assert len(bypassed.cases) == len(semantic_cases())
    assert bypassed.written, "every random object was refused: nothing reached a controller"
    for what, err in bypassed.refused:
        check_refusal(err, what)


@pytest.mark.parametrize("case", semantic_cases(), ids=str)
def test_bypassed_semantic_case_crashes_no_reconcile(bypassed: Bypassed,
                                                     case: SemanticCase) -> None:
    obj = bypassed.cases[str(case)]
    assert not bypassed.world.crashes_of(obj), bypassed.world.crashes_of(obj)


@pytest.mark.parametrize("case", [c for c in semantic_cases() if str(c) not in KUEUE_RULES],
                         ids=str)
def test_bypassed_semantic_case_gets_a_condition_or_warning(
        runner: asyncio.Runner, bypassed: Bypassed, case: SemanticCase) -> None:
    """Written past the webhook, the object is reported: a Warning event, a problem
    condition or its Workload's refusal, saying what is wrong (the hint)."""
    found = runner.run(signals(bypassed.world.admin, bypassed.cases[str(case)]))
    assert mentions(found, case.expected_hint), (
        f"no condition or Warning event mentions {case.expected_hint!r}: {found}")


async def _owned_workloads(w: World, obj: Object) -> list[Object]:
    return [wl for wl in (await w.admin.list(WORKLOAD_GVK, namespace=BYPASS_NS)).items
            if any(o.get("uid") == uid_of(obj) for o in wl["metadata"].get("ownerReferences")
                   or [])]


def _refused_and_retried(field: str, value: str) -> Callable[[World, Object], Awaitable[None]]:
    """Kueue's reconciler stopped the job, and its create of the Workload was refused
    naming ``field`` (and ``value``): logged, and retried with backoff, never created."""
    async def check(w: World, obj: Object) -> None:
        assert await _owned_workloads(w, obj) == []
        current = await w.admin.get(GVK.of(obj), name_of(obj), namespace=BYPASS_NS)
        assert current["spec"]["suspend"] is True, "Kueue keeps it from running"
        logged = [str(e.error) for e in w.crash_log.errors_of(BYPASS_NS, name_of(obj))]
        assert any(field in m and value in m for m in logged), logged
    return check


def _read_as_unset(*path: str | int) -> Callable[[World, Object], Awaitable[None]]:
    """Kueue created the Workload as if the label or annotation were absent: nothing at
    ``path`` in its spec."""
    async def check(w: World, obj: Object) -> None:
        workloads = await _owned_workloads(w, obj)
        assert len(workloads) == 1, workloads
        value: Any = workloads[0]["spec"]
        for part in path:
            value = value[part] if isinstance(part, int) else value.get(part)
        assert value is None, (path, value)
    return check


async def _admitted_and_started(w: World, obj: Object) -> None:
    """Kueue admitted the job and started it, as without the annotation (read as false,
    it changes nothing of the Workload)."""
    workloads = await _owned_workloads(w, obj)
    assert len(workloads) == 1, workloads
    current = await w.admin.get(GVK.of(obj), name_of(obj), namespace=BYPASS_NS)
    assert current["spec"]["suspend"] is False


#: How each case of :data:`~.badinput.KUEUE_RULES` is checked: Kueue's own behaviour.
KUEUE_CHECKS: Final[dict[str, Callable[[World, Object], Awaitable[None]]]] = {
    **{f"{kind}/queue-name-not-a-name": _refused_and_retried("spec.queueName", "Not_A_Queue")
       for kind in ("jobflow", "daemonjob", "appwrapper", "batchjob")},
    **{f"{kind}/max-exec-time-{what}": _read_as_unset("maximumExecutionTimeSeconds")
       for kind in ("jobflow", "daemonjob", "appwrapper", "batchjob")
       for what in ("not-a-number", "zero")},
    "batchjob/min-parallelism-not-a-number": _read_as_unset("podSets", 0, "minCount"),
    "batchjob/min-parallelism-too-big": _refused_and_retried(
        "spec.podSets[0]", "minCount should be positive and less or equal to count"),
    "batchjob/completions-equal-parallelism-not-a-bool": _admitted_and_started,
}


def test_kueue_rules_are_checked_as_kueue_behaves() -> None:
    """Every case left to Kueue has its check, and names a case that exists."""
    assert set(KUEUE_CHECKS) == set(KUEUE_RULES)
    assert set(KUEUE_RULES) <= {str(c) for c in semantic_cases()}


@pytest.mark.parametrize("case", [c for c in semantic_cases() if str(c) in KUEUE_RULES],
                         ids=str)
def test_bypassed_kueue_rule_gets_kueues_own_behaviour(
        runner: asyncio.Runner, bypassed: Bypassed, case: SemanticCase) -> None:
    """A rule of Kueue's own (no controller of ours checks it): Kueue v0.19.2 reports it
    with no condition or event (see :data:`~.badinput.KUEUE_RULES` for what it does and
    where); that is what happens here too, and nothing of ours reports it either."""
    obj = bypassed.cases[str(case)]
    runner.run(KUEUE_CHECKS[str(case)](bypassed.world, obj))
    found = runner.run(signals(bypassed.world.admin, obj))
    assert not mentions(found, case.expected_hint), found


@pytest.mark.parametrize("kind", KINDS)
def test_bypassed_random_writes_crash_no_reconcile(bypassed: Bypassed, kind: str) -> None:
    """No reconcile of a random broken object fails with a Python error."""
    written = [x for x in bypassed.written if x.obj["kind"] == GVKS[kind].kind]
    crashed = [(x.what, [str(c) for c in bypassed.world.crashes_of(x.obj)]) for x in written]
    assert not [c for c in crashed if c[1]], [c for c in crashed if c[1]]


def test_bypassed_nothing_crashes_outside_a_reconcile(bypassed: Bypassed) -> None:
    """Event handlers, index functions and map functions never failed."""
    assert [c for c in bypassed.world.crash_log.crashes if not c.key] == []


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "jobtemplate"])  # runs nothing
def test_bypassed_controllers_still_start_valid_objects(
        runner: asyncio.Runner, bypassed: Bypassed, kind: str) -> None:
    """After all that, the manager still runs and a valid object of each kind is admitted
    and started: its controllers keep serving."""
    w = bypassed.world
    assert w.running
    good = bypassed.good[kind]

    async def started() -> bool:
        current = await w.admin.get(GVK.of(good), name_of(good), namespace=BYPASS_NS)
        if current["spec"].get("suspend") is not False:
            return False
        if kind == "jobflow":
            jobs = (await w.admin.list(JOB_GVK, namespace=BYPASS_NS)).items
            return any(name_of(j) == f"{name_of(good)}-job1" for j in jobs)
        if kind == "daemonjob":
            jobs = (await w.admin.list(JOB_GVK, namespace=BYPASS_NS)).items
            mine = [j for j in jobs if any(o.get("uid") == uid_of(good)
                                           for o in j["metadata"].get("ownerReferences") or [])]
            return len(mine) == len(NODES)
        if kind == "appwrapper":  # it wraps one Pod
            pods = (await w.admin.list(POD_GVK, namespace=BYPASS_NS)).items
            return any(name_of(p) == f"{name_of(good)}-0" for p in pods)
        return True  # a batch/v1 Job unsuspended has started (no Job controller here)

    assert runner.run(started()), f"the valid {kind} did not start"
    assert not w.crashes_of(good)

