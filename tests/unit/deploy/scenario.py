"""The manager's API traffic: in-cluster start-up, and a lifecycle of every integration.

:func:`run` plays what an in-cluster manager does, on the in-memory API server with the
manager's client wrapped in a :class:`~.recording.RecordingClient`:

- it reads Kueue's Configuration from its ConfigMap (``--kueue-config-from-cluster``);
- it starts :class:`~integrations.manager.ExternalFrameworkManager` with the options
  ``python -m integrations`` builds from the rendered Deployment's own arguments
  (``--in-cluster --leader-elect``, internal certificates): it takes the Lease, creates
  the certificate Secret and sets the ``caBundle`` of the rendered webhook
  configurations; then stops (releasing the Lease);
- all four integrations run together, as the manager sets them up (their controllers,
  the generic reconciler and the webhooks, served through the server's admission chain),
  on the server's manual clock, while the test plays Kueue
  (:class:`~jobframework.testing.kueue.KueueStandIn`), the Job controller and the
  kubelet: each kind is queued, admitted and run to its end (a JobFlow of two steps, one
  from a JobTemplate, preempted and readmitted; a DaemonJob on two nodes, one deleted
  while it runs; an AppWrapper of one Pod; a batch Job preempted and readmitted); two
  AppWrappers wrapping every granted component kind run and are deleted; one object of
  each kind is deactivated by Kueue and deleted by the ``objectRetentionPolicies``.

The requests recorded are what RBAC must allow (the test compares them with the rules
the code declares).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from unittest import mock

import attrs
import yaml

from integrations.__main__ import manager_options
from integrations.__main__ import parser as cli_parser
from integrations.catalog import reference_names
from integrations.deploy import WEBHOOK_CONFIGURATION_NAME, render
from integrations.manager import CertRotation, ExternalFrameworkManager
from jobframework import constants as c
from jobframework.admittedstate import DEFAULT_PRIVILEGED_USERS
from jobframework.config import (
    API_VERSION,
    CONFIGMAP_KEY,
    DEFAULT_CONFIGMAP_NAME,
    Configuration,
    load_configuration_from_configmap,
    reconciler_options_from,
)
from jobframework.integrations import IntegrationManager
from jobframework.plugins import load_integrations
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object, name_of
from jobframework.testing import APIServer
from jobframework.testing.authorization import Authorizer, AuthorizingClient
from jobframework.testing.kueue import KueueStandIn, register_kueue_kinds
from jobframework.testing.pytest_plugin import wire_webhooks
from jobframework.testing.running import running
from jobframework.webhook import WebhookServer

from .recording import ApiRequest, RecordingClient

MANAGER_NAMESPACE: Final = "kueue-jobframework-system"
KUEUE_NAMESPACE: Final = "kueue-system"
NS: Final = "default"
QUEUE: Final = "user-queue"
SERVICE_ACCOUNT: Final = f"system:serviceaccount:{MANAGER_NAMESPACE}:kueue-jobframework"

JOB: Final = GVK("batch", "v1", "Job")
POD: Final = GVK("", "v1", "Pod")
NODE: Final = GVK("", "v1", "Node")
WORKLOAD: Final = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
JOBFLOW: Final = GVK("api.practice.com", "v1alpha1", "JobFlow")
JOBTEMPLATE: Final = GVK("api.practice.com", "v1alpha1", "JobTemplate")
DAEMONJOB: Final = GVK("api.practice.com", "v1alpha1", "DaemonJob")
APPWRAPPER: Final = GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")

#: Component kinds the in-memory server does not serve by itself (their CRDs, or
#: built-ins it leaves out): group, version, kind, plural.
EXTRA_KINDS: Final = (
    ("", "v1", "Service", "services"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
    ("ray.io", "v1", "RayCluster", "rayclusters"),
    ("ray.io", "v1", "RayJob", "rayjobs"),
    ("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups"),
    ("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup", "podgroups"),
)


@attrs.frozen
class Recorded:
    """What :func:`run` saw."""

    requests: tuple[ApiRequest, ...]


# --- builders ---------------------------------------------------------------------------------


def _container() -> dict[str, Any]:
    return {"name": "main", "image": "busybox:1.36", "command": ["true"],
            "resources": {"requests": {"cpu": "100m"}}}


def _pod_spec(**extra: Any) -> dict[str, Any]:
    return {"restartPolicy": "Never", "containers": [_container()], **extra}


def _queued(obj: Object, **labels: str) -> Object:
    obj["metadata"]["labels"] = {c.QUEUE_LABEL: QUEUE, **labels}
    return obj


def _jobflow(name: str) -> Object:
    return _queued({
        "apiVersion": JOBFLOW.api_version, "kind": "JobFlow",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"flows": [
            {"name": "a", "jobTemplate": {"template": {"spec": _pod_spec(
                priorityClassName="batch-low")}}},
            {"name": "b", "dependencies": ["a"], "jobTemplateRef": "tpl"},
        ]}}, **{c.WORKLOAD_PRIORITY_CLASS_LABEL: "high"})


def _jobtemplate() -> Object:
    return {"apiVersion": JOBTEMPLATE.api_version, "kind": "JobTemplate",
            "metadata": {"name": "tpl", "namespace": NS},
            "spec": {"jobTemplate": {"template": {"spec": _pod_spec()}}}}


def _daemonjob(name: str) -> Object:
    return _queued({"apiVersion": DAEMONJOB.api_version, "kind": "DaemonJob",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"template": {"spec": _pod_spec()}}})


def _component(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"template": {"apiVersion": api_version, "kind": kind, "metadata": {"name": name},
                         "spec": spec}}


def _pod_template() -> dict[str, Any]:
    return {"spec": {"containers": [_container()]}}


def _appwrapper(name: str, components: list[dict[str, Any]]) -> Object:
    return _queued({"apiVersion": APPWRAPPER.api_version, "kind": "AppWrapper",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"components": copy.deepcopy(components)}})


def _every_component_kind() -> list[list[dict[str, Any]]]:
    """One component of each kind :data:`integrations.appwrapper.rbac.COMPONENT_RESOURCES`
    grants, in two AppWrappers (at most 8 pod specs each)."""
    ray = {"headGroupSpec": {"rayStartParams": {}, "template": _pod_template()},
           "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 1,
                                 "maxReplicas": 1, "rayStartParams": {},
                                 "template": _pod_template()}]}
    service = _component("v1", "Service", "svc", {"selector": {"app": "x"}, "ports": [
        {"port": 80, "protocol": "TCP"}]})
    service["podSets"] = []
    return [[
        service,
        _component("v1", "Pod", "pod", _pod_spec()),
        _component("apps/v1", "Deployment", "dep", {
            "replicas": 1, "selector": {"matchLabels": {"app": "dep"}},
            "template": {"metadata": {"labels": {"app": "dep"}}, "spec": _pod_spec(
                restartPolicy="Always")}}),
        _component("apps/v1", "StatefulSet", "sts", {
            "replicas": 1, "serviceName": "sts", "selector": {"matchLabels": {"app": "sts"}},
            "template": {"metadata": {"labels": {"app": "sts"}}, "spec": _pod_spec(
                restartPolicy="Always")}}),
        _component("batch/v1", "Job", "wrapped-job", {"template": {"spec": _pod_spec()}}),
        _component("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": [
            {"name": "w", "replicas": 1,
             "template": {"spec": {"template": {"spec": _pod_spec()}}}}]}),
        _component("kubeflow.org/v1", "PyTorchJob", "pt", {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": _pod_template()}}}),
    ], [
        _component("ray.io/v1", "RayCluster", "rc", ray),
        _component("ray.io/v1", "RayJob", "rj", {"entrypoint": "python x.py",
                                                 "rayClusterSpec": ray}),
        *({**_component(f"{group}/v1alpha1", "PodGroup", f"pg-{i}", {"minMember": 1}),
           "podSets": []}
          for i, group in enumerate(("scheduling.x-k8s.io", "scheduling.sigs.k8s.io"))),
    ]]


def _batch_job(name: str) -> Object:
    return _queued({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"template": {"spec": _pod_spec()}}})


def _finished(job: Object) -> Object:
    """``job`` as the Job controller leaves it once complete."""
    job = copy.deepcopy(job)
    status = job.setdefault("status", {})
    status.update(succeeded=int(job["spec"].get("completions") or 1), active=0)
    status["conditions"] = [*status.get("conditions", []),
                            {"type": "Complete", "status": "True"}]
    return job


# --- the world ----------------------------------------------------------------------------


class World:
    """The server, Kueue's stand-in and the test's own (unrecorded) admin client."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.server = APIServer(self.clock, builtin_defaults=True)
        register_kueue_kinds(self.server)
        for integration in load_integrations(list(reference_names())):
            for crd in integration.load_crds():
                self.server.register_crd(crd)
        for group, version, kind, plural in EXTRA_KINDS:
            self.server.register_kind(GVK(group, version, kind), plural, True)
        self.admin = self.server.client()
        self.kueue = KueueStandIn(self.server)

    async def setup(self) -> None:
        """Namespaces, queues, priority classes, two Ready nodes, Kueue's ConfigMap."""
        for ns in (MANAGER_NAMESPACE, KUEUE_NAMESPACE):
            await self.admin.create({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
        await self.kueue.resource_flavor("default-flavor", node_labels={"pool": "a"})
        await self.kueue.cluster_queue("cq", {"default-flavor": {"cpu": "100"}})
        await self.kueue.local_queue(QUEUE, "cq", NS)
        await self.kueue.priority_class("high", 100)
        await self.admin.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": "batch-low"}, "value": 10})
        for name in ("n1", "n2"):
            node = await self.admin.create({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                      "pool": "a"}}})
            node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
            await self.admin.update_status(node)
        document = {
            "apiVersion": API_VERSION, "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "integrations": {"frameworks": ["kubeflow.org/mpijob"],
                             "externalFrameworks": [
                                 integration.framework_name
                                 for integration in load_integrations(list(reference_names()))]},
            "objectRetentionPolicies": {"workloads": {"afterDeactivatedByKueue": "0s"}},
        }
        await self.admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": DEFAULT_CONFIGMAP_NAME,
                                              "namespace": KUEUE_NAMESPACE},
                                 "data": {CONFIGMAP_KEY: yaml.safe_dump(document)}})

    async def objects(self, gvk: GVK) -> list[Object]:
        return list((await self.admin.list(gvk, namespace=NS)).items)

    async def get(self, gvk: GVK, name: str) -> Object:
        return await self.admin.get(gvk, name, namespace=NS)

    async def workload_of(self, gvk: GVK, name: str) -> Object:
        return await self.kueue.workload_for(await self.get(gvk, name))

    async def until(self, check: Callable[[], Awaitable[bool]], what: str,
                    turns: int = 4000) -> None:
        """Run the loop (time creeping by 10 ms every 20 turns, for rate-limited
        requeues) until ``check`` passes."""
        for i in range(turns):
            if await check():
                return
            await asyncio.sleep(0)
            if i % 20 == 19:
                self.clock.advance(0.01)
        raise AssertionError(f"timed out waiting for {what}")

    async def admitted(self, gvk: GVK, name: str) -> None:
        """Wait for the object's Workload, then let Kueue admit it."""
        async def has_workload() -> bool:
            try:
                await self.workload_of(gvk, name)
            except Exception:
                return False
            return True
        await self.until(has_workload, f"the Workload of {gvk.kind} {name}")
        wl = name_of(await self.workload_of(gvk, name))
        result = await self.kueue.schedule()
        assert f"{NS}/{wl}" in result.admitted, (name, result)

    async def finished(self, gvk: GVK, name: str) -> None:
        async def done() -> bool:
            wl = await self.workload_of(gvk, name)
            return any(cond["type"] == c.WORKLOAD_FINISHED and cond["status"] == "True"
                       for cond in (wl.get("status") or {}).get("conditions") or [])
        await self.until(done, f"the Workload of {gvk.kind} {name} to finish")

    async def gone(self, gvk: GVK, name: str) -> None:
        async def deleted() -> bool:
            return name not in {name_of(o) for o in await self.objects(gvk)}
        await self.until(deleted, f"{gvk.kind} {name} to be deleted")

    async def finish_jobs(self, owner: str, count: int) -> None:
        """Complete the ``count`` Jobs of ``owner`` (playing the Job controller)."""
        async def created() -> bool:
            return len(await self.owned_jobs(owner)) >= count
        await self.until(created, f"{count} Job(s) of {owner}")
        for job in await self.owned_jobs(owner):
            if not job.get("status", {}).get("succeeded"):
                await self.admin.update_status(_finished(job))

    async def owned_jobs(self, owner: str) -> list[Object]:
        return [j for j in await self.objects(JOB)
                if any(ref.get("name") == owner
                       for ref in j["metadata"].get("ownerReferences") or [])]

    async def preempted_and_readmitted(self, gvk: GVK, name: str, child: str) -> None:
        """Once ``child`` (a Job) runs, Kueue preempts the object: its reconciler and
        controller stop it (the Job suspended, its ``startTime`` cleared), the quota is
        released; then Kueue admits it again and the Job resumes."""
        async def child_running() -> bool:
            jobs = {name_of(j): j for j in await self.objects(JOB)}
            return child in jobs and jobs[child]["spec"].get("suspend") is False
        await self.until(child_running, f"Job {child} to run")
        job = await self.get(JOB, child)
        job["status"] = {"startTime": "2026-01-01T00:00:00Z"}
        await self.admin.update_status(job)
        await self.kueue.evict(await self.workload_of(gvk, name), c.EVICTED_BY_PREEMPTION)

        async def child_stopped() -> bool:
            j = await self.get(JOB, child)
            return bool(j["spec"].get("suspend")) and not j.get("status", {}).get("startTime")
        await self.until(child_stopped, f"Job {child} to stop")

        async def released() -> bool:
            wl = await self.workload_of(gvk, name)
            return not (wl.get("status") or {}).get("admission")
        await self.until(released, f"the quota of {gvk.kind} {name} to be released")
        await self.kueue.schedule()
        await self.until(child_running, f"Job {child} to run again")

    async def deactivated(self, gvk: GVK, name: str) -> None:
        """Kueue deactivates the object's Workload itself; the retention policy (0s)
        then deletes the object."""
        wl = await self.workload_of(gvk, name)
        await self.kueue.deactivate(wl, cause="RequeuingLimitExceeded")
        await self.gone(gvk, name)


# --- the scenarios ----------------------------------------------------------------------------


async def _in_cluster_manager(world: World, recorder: RecordingClient, config: Configuration,
                              cert_dir: Path) -> None:
    """The manager as the rendered Deployment runs it, started and stopped."""
    files = render(list(reference_names()), namespace=MANAGER_NAMESPACE)
    for obj in files["webhooks.yaml"]:
        await world.admin.create(obj)
    (deployment,) = files["deployment.yaml"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    with mock.patch.dict(os.environ, {"POD_NAMESPACE": MANAGER_NAMESPACE}):
        options = manager_options(cli_parser().parse_args(container["args"]), config)
    assert options.namespace == MANAGER_NAMESPACE and options.cert_management == "internal"
    assert options.leader_election is not None and not options.install_crds
    # Not the Deployment's ports and paths: this runs on a shared test machine. A serving
    # certificate valid for seconds is renewed (the Secret updated) while it runs.
    options = attrs.evolve(options, webhook_host="127.0.0.1", webhook_port=0,
                           health_probe_bind_address=None, metrics_bind_address=None,
                           cert_dir=cert_dir, ready_timeout=30.0, cert_rotation=CertRotation(
                               cert_validity=dt.timedelta(seconds=3),
                               lookahead=dt.timedelta(seconds=2),
                               check_interval=dt.timedelta(seconds=0.25)))
    async with ExternalFrameworkManager(recorder, options) as efm:
        assert efm.manager is not None
        await asyncio.wait_for(efm.manager.elected(), 30)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            stored = await world.admin.get(GVK("admissionregistration.k8s.io", "v1", kind),
                                           WEBHOOK_CONFIGURATION_NAME)
            assert all(hook["clientConfig"].get("caBundle") for hook in stored["webhooks"])
        for _ in range(400):  # 20 s
            if any(r.verb == "update" and r.resource == "secrets" for r in recorder.requests):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the serving certificate was not renewed")


async def _integrations(world: World, recorder: RecordingClient, config: Configuration) -> None:
    integrations = load_integrations(list(reference_names()))
    im = IntegrationManager()
    for integration in integrations:
        integration.register(im)
    # As ExternalFrameworkManager does, the manager's own identity may write the admission
    # its adapters store on the jobs (the webhooks refuse everyone else's changes).
    options = attrs.evolve(reconciler_options_from(config, integration_manager=im),
                           clock=world.clock,
                           privileged_users=DEFAULT_PRIVILEGED_USERS.including([SERVICE_ACCOUNT]))
    mgr = Manager(recorder, clock=world.clock)
    webhooks = WebhookServer(clock=world.clock)
    paths: list[str] = []
    for integration in integrations:
        wiring = await integration.setup(mgr, webhook_server=webhooks, kueue=options)
        paths.extend(wiring.webhook_paths)
    wire_webhooks(world.server, webhooks, paths)
    admin = world.admin

    async with running(mgr):
        await asyncio.wait_for(mgr.get_cache().wait_for_cache_sync(), 10)

        # JobFlow: two steps, the second from a JobTemplate; preempted while its first
        # Job runs (the Job suspended, its startTime cleared), readmitted, completed.
        await admin.create(_jobtemplate())
        created = await admin.create(_jobflow("wf"))
        assert created["spec"]["suspend"] is True, "the mutating webhook suspends it"
        await world.admitted(JOBFLOW, "wf")
        await world.preempted_and_readmitted(JOBFLOW, "wf", "wf-a")
        await world.finish_jobs("wf", 1)
        await world.finish_jobs("wf", 2)
        await world.finished(JOBFLOW, "wf")

        # DaemonJob: one Job per node; a node deleted while it runs loses its Job.
        await admin.create(_daemonjob("dj"))
        await world.admitted(DAEMONJOB, "dj")

        async def both_jobs() -> bool:
            return len(await world.owned_jobs("dj")) == 2
        await world.until(both_jobs, "the Jobs of DaemonJob dj")
        await admin.delete(NODE, "n2")
        await world.gone(JOB, "dj-n2")
        await world.finish_jobs("dj", 1)
        await world.finished(DAEMONJOB, "dj")

        # AppWrapper of one Pod, run to success.
        await admin.create(_appwrapper("aw", [{"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": _pod_spec()}}]))
        await world.admitted(APPWRAPPER, "aw")

        async def pod_created() -> bool:
            return any(name_of(p) == "p" for p in await world.objects(POD))
        await world.until(pod_created, "the wrapped Pod")
        pod = await world.get(POD, "p")
        pod["status"] = {"phase": "Succeeded"}
        await admin.update_status(pod)
        await world.finished(APPWRAPPER, "aw")

        # AppWrappers of every granted component kind, deleted once they exist.
        for i, wrapped in enumerate(_every_component_kind()):
            name = f"every-{i}"
            await admin.create(_appwrapper(name, wrapped))
            await world.admitted(APPWRAPPER, name)

            names = {c["template"]["metadata"]["name"] for c in wrapped}

            async def checked(names: set[str] = names) -> bool:
                # Running, the controller reads every component back from the API server.
                return names <= {r.name for r in recorder.requests if r.verb == "get"}
            await world.until(checked, f"the components of AppWrapper {name} to be read")
            await admin.delete(APPWRAPPER, name, namespace=NS)
            await world.gone(APPWRAPPER, name)

        # batch Job: started, evicted after it started (stopped, startTime cleared),
        # readmitted and completed.
        await admin.create(_batch_job("job"))
        await world.admitted(JOB, "job")
        await world.preempted_and_readmitted(JOB, "job", "job")
        await admin.update_status(_finished(await world.get(JOB, "job")))
        await world.finished(JOB, "job")

        # One of each kind deactivated by Kueue and deleted by the retention policy.
        for obj in (_jobflow("wf-2"), _daemonjob("dj-2"),
                    _appwrapper("aw-2", [{"template": {
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2"},
                        "spec": _pod_spec()}}]),
                    _batch_job("job-2")):
            await admin.create(obj)
            await world.admitted(GVK.of(obj), name_of(obj))
            await world.deactivated(GVK.of(obj), name_of(obj))


async def run(cert_dir: Path) -> Recorded:
    """Both scenarios; every request the manager's client made (``cert_dir``: where the
    in-cluster manager writes its serving certificate)."""
    world = World()
    await world.setup()
    recorder = RecordingClient(AuthorizingClient(world.server.client(user=SERVICE_ACCOUNT),
                                                 Authorizer()))
    config = await load_configuration_from_configmap(recorder, KUEUE_NAMESPACE)
    await _in_cluster_manager(world, recorder, config, cert_dir)
    await _integrations(world, recorder, config)
    return Recorded(tuple(recorder.requests))
