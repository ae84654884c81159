"""The fault run's hostile tenant (issue #27): a share of the JobFlow, DaemonJob and
AppWrapper lifecycles is created by a tenant who then tries, while they run, every edit
of the security review's findings 1, 2, 3 and 5 against what Kueue admitted.

The tenant is a ServiceAccount of the run's namespace holding the Kubernetes ``edit``
ClusterRole there (a RoleBinding), with this project's kinds aggregated into ``edit`` by
the editor ClusterRoles ``deploy render`` ships (``user-roles.yaml``, applied as rendered
when the cluster lacks them, and removed when the run ends). The harness's client
impersonates it, so the API server authorizes each request as the ServiceAccount and the
webhooks see its userInfo, as in ``tests/integration/test_tenant_cluster.py``.

What it tries, once the lifecycle's first child runs, and what must happen:

================  =============================================  ==========================
attempt           the edit                                       expected outcome
================  =============================================  ==========================
``admission``     the stored admission rewritten to the spot     ``refused`` (403 from our
                  flavor's nodes with a tolerate-all toleration  validating webhook,
                  (JobFlow/DaemonJob pod-sets-info annotation,   the field ``Forbidden``)
                  AppWrapper ``podSetInfos``)
``nodes``         the DaemonJob's node list widened to the nodes ``refused``
                  outside its run (the spot ones)
``template``      the JobTemplate of the JobFlow's later step    ``ignored``: the step's Job
                  set to parallelism 3 after admission           runs the admitted 1 pod
``scale``         the running child Job (step, node Job,         ``set-back`` (or
                  wrapped Job) scaled to parallelism 3           ``stopped``: evicted first)
``claim``         a Job of its own (2 pods, on spot nodes)       ``suspended``
                  naming the parent as its controller
================  =============================================  ==========================

Any other outcome (``accepted``, ``refused-elsewhere``: refused for something else,
``kept``, ``ran``, ``took-effect``) is recorded as a ``tenant-edit-took-effect``
violation; independently the invariant watcher's ``pods-off-flavor`` and
``pods-over-admission`` rules judge what actually ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
from kubernetes_asyncio.client import ApiClient

from integrations.daemonjob import DAEMONJOB_GVK, NODES_ANNOTATION
from integrations.daemonjob.api import POD_SETS_INFO_ANNOTATION as DJ_POD_SETS_INFO
from integrations.daemonjob.children import is_own_job as own_node_job
from integrations.deploy import render
from integrations.jobflow import JOBTEMPLATE_GVK
from integrations.jobflow.api import POD_SETS_INFO_ANNOTATION as JF_POD_SETS_INFO
from integrations.jobflow.api import child_job_name
from jobframework.admittedstate import own_username, service_account_username
from jobframework.childjobs import pod_count
from jobframework.runtime import errors
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.config import load_kubeconfig
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.objects import GVK, Object, controller_of, name_of, uid_of
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION, FLAVOR_LABEL
from jobframework.testing.invariants import Violation
from jobframework.workload import WORKLOAD_GVK

#: The kinds whose lifecycles the tenant may take.
HOSTILE_KINDS: Final = ("jobflow", "daemonjob", "appwrapper")
#: A harness rule: an edit of the tenant's took effect where it must not.
RULE_TENANT_EDIT_TOOK_EFFECT: Final = "tenant-edit-took-effect"
#: Outcomes that are violations, by attempt.
BAD_OUTCOMES: Final = frozenset({"accepted", "refused-elsewhere", "kept", "ran",
                                 "took-effect"})
#: Where the tenant steers pods: the cluster's other flavor, outside the run's queue.
ELSEWHERE: Final = {FLAVOR_LABEL: "spot"}
#: The run's flavor (its ClusterQueue's only one): the tenant's DaemonJobs target it, so
#: that their run (and the Workload's count) is its nodes only.
ADMITTED_FLAVOR: Final = {FLAVOR_LABEL: "on-demand"}
#: What the tenant's pods request: little, so that its long-running lifecycles leave the
#: run's small queue to the others.
POD_CPU: Final = "25m"
#: A node of no flavor the tenant adds to a DaemonJob's run when no real one is outside it.
NO_SUCH_NODE: Final = "faults-tenant-extra-node"
#: The size the tenant scales children and JobTemplates to.
SCALED: Final = 3
TENANT_SA: Final = "faults-tenant"
#: This project's kinds, as the tenant's ``edit`` role gets them.
TENANT_KINDS: Final = {"api.practice.com": ["jobflows", "jobtemplates", "daemonjobs"],
                       "workload.codeflare.dev": ["appwrappers"]}
JOB_GVK: Final = GVK("batch", "v1", "Job")
SA_GVK: Final = GVK("", "v1", "ServiceAccount")
NODE_GVK: Final = GVK("", "v1", "Node")
CLUSTER_ROLE_GVK: Final = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")
ROLE_BINDING_GVK: Final = GVK("rbac.authorization.k8s.io", "v1", "RoleBinding")
#: Seconds between two reads while the tenant waits for something.
POLL: Final = 0.5


# --------------------------------------------------------------------------- objects


def _with_run_time(template: dict[str, Any], seconds: float) -> None:
    """Make kwok finish the pods of ``template`` (a pod template) after ``seconds``."""
    meta = template.setdefault("metadata", {})
    meta.setdefault("annotations", {})[COMPLETE_DELAY_ANNOTATION] = f"{seconds:g}s"


def template_name(name: str) -> str:
    """The JobTemplate of a hostile JobFlow's later step."""
    return f"{name}-t"


def claim_name(name: str) -> str:
    """The tenant's Job claiming the lifecycle's parent."""
    return f"{name}-claim"


def component_name(name: str) -> str:
    """The Job a hostile AppWrapper wraps."""
    return f"{name}-0"


def _set_requests(node: Any) -> None:
    """Every container of every pod template in ``node`` requests :data:`POD_CPU`."""
    if isinstance(node, dict):
        for container in node.get("containers") or []:
            if isinstance(container, dict):
                container.setdefault("resources", {}).setdefault("requests", {})["cpu"] = \
                    POD_CPU
        for value in node.values():
            _set_requests(value)
    elif isinstance(node, list):
        for value in node:
            _set_requests(value)


def hostile_objects(kind: str, obj: Object, run_seconds: float) -> list[Object]:
    """The tenant's version of a lifecycle object ``obj`` (the probe-based one, queued and
    renamed), preceded by what it needs: objects to create in order, the lifecycle's last.

    Every child runs pods of ``run_seconds`` (requesting :data:`POD_CPU`) at parallelism 1
    without completions (a work queue), so that a scaled child would really run more
    pods at once, for longer than the invariant's grace, and ``backoffLimit: 6``: the pods
    a scale-down removes count as failures of the Job, and the tenant's own edit must not
    fail its job.

    - JobFlow: step ``a`` inline, then ``b`` from a JobTemplate (created first);
    - DaemonJob: the same pod template on the run's flavor's nodes, one pod per node;
    - AppWrapper: a batch/v1 Job wrapped instead of a Pod (a component with a size).
    """
    obj = copy.deepcopy(obj)
    _set_requests(obj["spec"])
    name, namespace = name_of(obj), obj["metadata"]["namespace"]
    spec = obj["spec"]
    if kind == "jobflow":
        job_spec = spec["flows"][0]["jobTemplate"]
        job_spec.update(parallelism=1, backoffLimit=6)
        later = copy.deepcopy(job_spec)
        _with_run_time(job_spec["template"], run_seconds)
        spec["flows"] = [{"name": "a", "jobTemplate": job_spec},
                         {"name": "b", "dependencies": ["a"],
                          "jobTemplateRef": template_name(name)}]
        template = {"apiVersion": JOBTEMPLATE_GVK.api_version, "kind": "JobTemplate",
                    "metadata": {"name": template_name(name), "namespace": namespace},
                    "spec": {"jobTemplate": later}}
        return [template, obj]
    if kind == "daemonjob":
        spec.update(parallelism=1, backoffLimit=6)
        spec["template"]["spec"]["nodeSelector"] = dict(ADMITTED_FLAVOR)
        _with_run_time(spec["template"], run_seconds)
        return [obj]
    if kind == "appwrapper":
        pod = spec["components"][0]["template"]
        template = {"metadata": {}, "spec": copy.deepcopy(pod["spec"])}
        _with_run_time(template, run_seconds)
        spec["components"] = [{"template": {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": component_name(name)},
            "spec": {"parallelism": 1, "backoffLimit": 6, "template": template}}}]
        return [obj]
    raise ValueError(f"no hostile version of {kind}")


def elsewhere(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tenant's rewrite of stored pod-set infos: the spot nodes, every taint
    tolerated."""
    out = copy.deepcopy(infos)
    for info in out:
        info["nodeSelector"] = dict(ELSEWHERE)
        info["tolerations"] = [{"operator": "Exists"}]
    return out


def claiming_job(parent: Object, run_seconds: float, pod_spec: dict[str, Any]) -> Object:
    """The tenant's own Job naming ``parent`` as its controller: 2 pods of ``pod_spec``
    (the parent's pods' requests) on the spot nodes, unsuspended, no queue name (Kueue's
    child rule would let it run on the parent's admission). No ``blockOwnerDeletion``:
    that needs rights on the parent's finalizers, which ``edit`` does not give."""
    spec = copy.deepcopy(pod_spec)
    spec["nodeSelector"] = dict(ELSEWHERE)
    spec["tolerations"] = [{"operator": "Exists"}]
    template: dict[str, Any] = {"metadata": {}, "spec": spec}
    _with_run_time(template, run_seconds)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": claim_name(name_of(parent)),
                     "namespace": parent["metadata"]["namespace"],
                     "ownerReferences": [{
                         "apiVersion": parent["apiVersion"], "kind": parent["kind"],
                         "name": name_of(parent), "uid": uid_of(parent),
                         "controller": True}]},
        "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                 "template": template},
    }


def _pod_spec_of(kind: str, obj: Object) -> dict[str, Any]:
    spec = obj["spec"]
    if kind == "jobflow":
        return dict(spec["flows"][0]["jobTemplate"]["template"]["spec"])
    if kind == "daemonjob":
        return dict(spec["template"]["spec"])
    return dict(spec["components"][0]["template"]["spec"]["template"]["spec"])


def classify_refusal(err: BaseException | None, field: str = "") -> str | None:
    """``refused`` for our webhook's denial naming ``field`` as ``Forbidden``,
    ``refused-elsewhere`` for a denial of something else (the protection under test did
    not engage), ``accepted`` for no error, None when the attempt must be made again (the
    webhook could not be called, a transient error)."""
    if err is None:
        return "accepted"
    if isinstance(err, errors.ApiError):
        if err.code == 403 and "denied the request" in err.message:
            return "refused" if f"{field}: Forbidden" in err.message else "refused-elsewhere"
        if err.code in (409, 429, 500, 503, 504):
            return None  # 500 includes "failed calling webhook" while the manager is down
        raise AssertionError(f"the tenant's edit failed unexpectedly: {err!r}") from err
    if isinstance(err, OSError | asyncio.TimeoutError | ConnectionError) or \
            type(err).__module__.startswith("aiohttp"):
        return None
    raise AssertionError(f"the tenant's edit failed unexpectedly: {err!r}") from err


def job_finished(job: Object) -> bool:
    """A batch/v1 Job with a ``Complete`` or ``Failed`` condition."""
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def classify_scaled(job: Object | None, admitted: int) -> str | None:
    """How a child scaled past ``admitted`` stands: ``set-back`` (its pods at once back
    within the admission), ``stopped`` (gone or suspended first: an eviction), ``kept``
    (it finished running over size), None (not yet decided)."""
    if job is None:
        return "stopped"
    spec = job.get("spec") or {}
    if pod_count(spec) <= admitted:
        return "set-back"
    if job_finished(job):
        return "kept"
    if spec.get("suspend") is True:
        return "stopped"
    return None


def classify_claim(job: Object | None) -> str | None:
    """How the tenant's claiming Job stands: ``suspended``, ``ran`` (finished), None (not
    yet decided). A Job gone (its parent deleted, garbage collected) ran nothing more."""
    if job is None:
        return "suspended"
    if (job.get("spec") or {}).get("suspend") is True:
        return "suspended"
    if job_finished(job):
        return "ran"
    return None


# --------------------------------------------------------------------------- the tenant


@attrs.define
class TenantReport:
    """What the tenant tried and what came of it."""

    #: Lifecycles the tenant created, by kind.
    lifecycles: dict[str, int] = attrs.field(factory=dict)
    #: attempt -> outcome -> count.
    outcomes: dict[str, dict[str, int]] = attrs.field(factory=dict)
    #: Seconds from the tenant's edit to its correction, per attempt (scale, claim).
    corrected_after: dict[str, list[float]] = attrs.field(factory=dict)
    #: The first refusal of each attempt on each kind, as the API server answered it.
    refusals: dict[str, str] = attrs.field(factory=dict)

    def count(self, attempt: str, outcome: str) -> None:
        """Record one outcome."""
        by = self.outcomes.setdefault(attempt, {})
        by[outcome] = by.get(outcome, 0) + 1


class HostileTenant:
    """The tenant of one fault run (see the module)."""

    def __init__(self, admin: RestClient, kubeconfig: str, namespace: str,
                 run_seconds: float, decide_within: float,
                 on_violation: Callable[[Violation], None]) -> None:
        self.admin = admin
        self.kubeconfig = kubeconfig
        self.ns = namespace
        self.run_seconds = run_seconds
        #: Seconds a correction (set back, suspended) may take before it is judged.
        self.decide_within = decide_within
        self.report = TenantReport()
        self._on_violation = on_violation
        self._client: RestClient | None = None
        #: The shipped user roles this run applied (the cluster lacked them).
        self._roles: list[str] = []

    @property
    def client(self) -> RestClient:
        """The client impersonating the tenant."""
        assert self._client is not None, "setup() first"
        return self._client

    # ------------------------------------------------------------------ set-up

    async def setup(self) -> None:
        """The shipped user roles, the ServiceAccount and its ``edit`` RoleBinding, and the
        impersonating client (checked to authenticate as the ServiceAccount)."""
        admin = self.admin
        for role in render(("jobflow", "daemonjob", "appwrapper"))["user-roles.yaml"]:
            with contextlib.suppress(errors.AlreadyExists):
                await admin.create(role)
                self._roles.append(name_of(role))
        for obj in (
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": TENANT_SA, "namespace": self.ns}},
            {"apiVersion": ROLE_BINDING_GVK.api_version, "kind": ROLE_BINDING_GVK.kind,
             "metadata": {"name": TENANT_SA, "namespace": self.ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "edit"},
             "subjects": [{"kind": "ServiceAccount", "name": TENANT_SA,
                           "namespace": self.ns}]},
        ):
            with contextlib.suppress(errors.AlreadyExists):
                await admin.create(obj)

        async def aggregated() -> bool:
            edit = await admin.get(CLUSTER_ROLE_GVK, "edit")
            granted = {(g, r) for rule in edit.get("rules") or []
                       if "create" in (rule.get("verbs") or [])
                       for g in rule.get("apiGroups") or []
                       for r in rule.get("resources") or []}
            return all((g, r) in granted for g, kinds in TENANT_KINDS.items() for r in kinds)

        await self._until("the edit ClusterRole to aggregate our kinds", aggregated, 120)
        username = service_account_username(self.ns, TENANT_SA)
        creds = await load_kubeconfig(self.kubeconfig)
        api = ApiClient(configuration=creds.configuration, header_name="Impersonate-User",
                        header_value=username)
        self._client = RestClient(api, credentials=creds, owns_api_client=True,
                                  user_agent="kueue-jobframework-faults-tenant",
                                  timeouts=Timeouts(read=30.0, watch_inactivity=90.0))
        who = await own_username(self._client)
        if who != username:
            raise AssertionError(f"the tenant authenticates as {who}, not {username}")

    async def close(self) -> None:
        """Close the client and delete the user roles this run applied."""
        if self._client is not None:
            await self._client.close()
        for role in self._roles:
            with contextlib.suppress(errors.NotFound):
                await self.admin.delete(CLUSTER_ROLE_GVK, role)

    # ------------------------------------------------------------------ helpers

    async def _until(self, what: str, probe: Callable[[], Awaitable[Any]],
                     limit: float) -> Any:
        deadline = time.monotonic() + limit
        while True:
            try:
                value = await probe()
                if value:
                    return value
            except (TimeoutError, errors.ApiError, OSError) as err:
                if isinstance(err, errors.ApiError) and err.code not in (
                        404, 409, 429, 500, 503, 504):
                    raise
            if time.monotonic() > deadline:
                raise AssertionError(f"the tenant timed out after {limit:.0f} s waiting "
                                     f"for {what}")
            await asyncio.sleep(POLL)

    async def _get(self, gvk: GVK, name: str) -> Object | None:
        try:
            return await self.admin.get(gvk, name, namespace=self.ns)
        except errors.NotFound:
            return None

    async def _as_tenant(self, what: str, call: Callable[[], Awaitable[Object]],
                         limit: float = 180.0) -> Object:
        """A write the tenant's rights allow, retried through the manager's restarts."""
        deadline = time.monotonic() + limit
        while True:
            try:
                return await call()
            except Exception as err:
                if classify_refusal(err) is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the tenant's {what} failed: {err!r}") from err
            await asyncio.sleep(POLL)

    async def _attempt_refused(self, attempt: str, lifecycle: Object, field: str,
                               call: Callable[[], Awaitable[Object]]) -> None:
        """An edit our webhook must refuse naming ``field``: made again while the webhook
        cannot be called, then recorded."""
        deadline = time.monotonic() + 180.0
        detail = ""
        while True:
            try:
                await call()
                outcome = classify_refusal(None, field)
            except Exception as err:
                outcome = classify_refusal(err, field)
                if outcome is not None:
                    detail = f" ({str(err)[:300]})"
                    self.report.refusals.setdefault(
                        f"{attempt} {lifecycle.get('kind')}", str(err)[:400])
            if outcome is not None:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the tenant's {attempt} edit was never answered")
            await asyncio.sleep(POLL)
        self._record(attempt, outcome, lifecycle, detail if outcome != "refused" else "")

    def _record(self, attempt: str, outcome: str, lifecycle: Object,
                detail: str = "") -> None:
        self.report.count(attempt, outcome)
        if outcome in BAD_OUTCOMES:
            self._on_violation(Violation(
                rule=RULE_TENANT_EDIT_TOOK_EFFECT, kind=str(lifecycle.get("kind")),
                namespace=self.ns, name=name_of(lifecycle),
                message=f"the tenant's {attempt} edit: {outcome}{detail}",
                at=time.monotonic()))

    async def create(self, kind: str, objs: list[Object]) -> Object:
        """Create the lifecycle's objects as the tenant; the last one (the lifecycle
        object) as created."""
        self.report.lifecycles[kind] = self.report.lifecycles.get(kind, 0) + 1
        created: Object = {}
        for obj in objs:
            async def create(obj: Object = obj) -> Object:
                try:
                    return await self.client.create(obj)
                except errors.AlreadyExists:  # a create that went through a cut
                    return await self.client.get(GVK.of(obj), name_of(obj),
                                                 namespace=self.ns)
            created = await self._as_tenant(f"create of {name_of(obj)}", create)
        return created

    # ------------------------------------------------------------------ the attacks

    async def _running_child(self, kind: str, parent: Object) -> Object | None:
        """The lifecycle's first child Job once it runs pods (None: not yet)."""
        name = name_of(parent)
        if kind == "jobflow":
            job = await self._get(JOB_GVK, child_job_name(name, "a"))
            candidates = [job] if job is not None else []
        elif kind == "appwrapper":
            job = await self._get(JOB_GVK, component_name(name))
            candidates = [job] if job is not None else []
        else:
            live = await self._get(DAEMONJOB_GVK, name)
            if live is None:
                return None
            owned = [j for j in (await self.admin.list(JOB_GVK, namespace=self.ns)).items
                     if (controller_of(j) or {}).get("uid") == uid_of(parent)]
            candidates = sorted((j for j in owned if own_node_job(live, j)), key=name_of)
        for job in candidates:
            if (job.get("status") or {}).get("active") and \
                    not (job.get("spec") or {}).get("suspend"):
                return job
        return None

    async def attack(self, kind: str, parent: Object) -> None:
        """Every edit of the tenant's on ``parent`` (just created), once a child runs."""
        name = name_of(parent)
        gvk = GVK.of(parent)
        child = await self._until(f"a running child of {kind} {name}",
                                  lambda: self._running_child(kind, parent), 600)
        await self._edit_admission(kind, gvk, name, parent)
        if kind == "daemonjob":
            await self._widen_nodes(name, parent)
        if kind == "jobflow":
            await self._as_tenant("JobTemplate edit", lambda: self.client.patch(
                JOBTEMPLATE_GVK, template_name(name),
                {"spec": {"jobTemplate": {"parallelism": SCALED}}}, namespace=self.ns))
        await self._scale(child, parent)
        await self._claim(kind, parent)

    async def _edit_admission(self, kind: str, gvk: GVK, name: str, parent: Object) -> None:
        current = await self.client.get(gvk, name, namespace=self.ns)
        if kind == "appwrapper":
            components = copy.deepcopy(current["spec"]["components"])
            infos = components[0].get("podSetInfos")
            if not infos:
                self.report.count("admission", "not-admitted")
                return
            components[0]["podSetInfos"] = elsewhere(infos)
            body: dict[str, Any] = {"spec": {"components": components}}
            field = "spec.components[0].podSetInfos"
        else:
            key = JF_POD_SETS_INFO if kind == "jobflow" else DJ_POD_SETS_INFO
            stored = (current["metadata"].get("annotations") or {}).get(key)
            if not stored:
                self.report.count("admission", "not-admitted")
                return
            body = {"metadata": {"annotations": {key: json.dumps(elsewhere(
                json.loads(stored)))}}}
            field = f"metadata.annotations[{key}]"
        await self._attempt_refused("admission", parent, field, lambda: self.client.patch(
            gvk, name, body, namespace=self.ns))

    async def _widen_nodes(self, name: str, parent: Object) -> None:
        current = await self.client.get(DAEMONJOB_GVK, name, namespace=self.ns)
        run = json.loads((current["metadata"].get("annotations") or {}).get(
            NODES_ANNOTATION) or "[]")
        outside = [name_of(n) for n in (await self.admin.list(NODE_GVK)).items
                   if name_of(n) not in run] or [NO_SUCH_NODE]
        body = {"metadata": {"annotations": {NODES_ANNOTATION: json.dumps(
            sorted(set(run) | set(outside)))}}}
        await self._attempt_refused(
            "nodes", parent, f"metadata.annotations[{NODES_ANNOTATION}]",
            lambda: self.client.patch(DAEMONJOB_GVK, name, body, namespace=self.ns))

    async def _scale(self, child: Object, parent: Object) -> None:
        admitted = pod_count(child.get("spec") or {})
        job = name_of(child)
        try:
            await self._as_tenant(f"scale of Job {job}", lambda: self.client.patch(
                JOB_GVK, job, {"spec": {"parallelism": SCALED}}, namespace=self.ns))
        except AssertionError as err:
            if isinstance(err.__cause__, errors.NotFound):
                self.report.count("scale", "stopped")  # gone with an eviction
                return
            raise
        t0 = time.monotonic()
        outcome = await self._decide(lambda: self._get(JOB_GVK, job),
                                     lambda j: classify_scaled(j, admitted), "kept")
        if outcome == "set-back":
            self.report.corrected_after.setdefault("scale", []).append(
                round(time.monotonic() - t0, 1))
        self._record("scale", outcome, parent, f" (Job {job}, admitted {admitted})")

    async def _claim(self, kind: str, parent: Object) -> None:
        live = await self._get(GVK.of(parent), name_of(parent))
        if live is None:
            self.report.count("claim", "parent-gone")
            return
        job = claiming_job(live, self.run_seconds, _pod_spec_of(kind, live))
        await self._as_tenant(f"create of Job {name_of(job)}",
                              lambda: self.client.create(job))
        t0 = time.monotonic()
        outcome = await self._decide(lambda: self._get(JOB_GVK, name_of(job)),
                                     classify_claim, "ran")
        if outcome == "suspended":
            self.report.corrected_after.setdefault("claim", []).append(
                round(time.monotonic() - t0, 1))
        self._record("claim", outcome, parent, f" (Job {name_of(job)})")

    async def _decide(self, read: Callable[[], Awaitable[Object | None]],
                      classify: Callable[[Object | None], str | None], late: str) -> str:
        """Read until ``classify`` decides, or ``late`` after ``decide_within`` seconds."""
        deadline = time.monotonic() + self.decide_within
        while time.monotonic() < deadline:
            try:
                outcome = classify(await read())
            except (TimeoutError, errors.ApiError, OSError):
                outcome = None
            if outcome is not None:
                return outcome
            await asyncio.sleep(POLL)
        return late

    async def after(self, kind: str, parent: Object) -> None:
        """Once the lifecycle ended: did the JobTemplate edit reach the later step; then
        remove the tenant's own objects."""
        name = name_of(parent)
        if kind == "jobflow":
            await self._template_outcome(parent)
        for gvk, obj in ((JOB_GVK, claim_name(name)), (JOBTEMPLATE_GVK, template_name(name))):
            with contextlib.suppress(errors.NotFound):
                await self.admin.delete(gvk, obj, namespace=self.ns,
                                        propagation_policy=PropagationPolicy.BACKGROUND)

    async def _template_outcome(self, parent: Object) -> None:
        step = await self._get(JOB_GVK, child_job_name(name_of(parent), "b"))
        if step is None:
            self.report.count("template", "no-step")
            return
        size = pod_count(step.get("spec") or {})
        if size <= 1:
            self._record("template", "ignored", parent)
            return
        # A readmission sizes the Workload from the edited template: then it is admitted.
        counts = [ps.get("count") for wl in (await self.admin.list(
            WORKLOAD_GVK, namespace=self.ns,
            label_selector=f"kueue.x-k8s.io/job-uid={uid_of(parent)}")).items
            for ps in wl["spec"]["podSets"] if ps.get("name") == "b"]
        if counts and all(isinstance(n, int) and size <= n for n in counts):
            self._record("template", "readmitted-with-it", parent)
        else:
            self._record("template", "took-effect", parent,
                         f" (Job {name_of(step)} runs {size} pods, admitted {counts})")

