"""Fixtures for the AppWrapper API, GenericJob and webhook tests: components of every
inferable kind (shaped like upstream's ``appwrapper_fixtures_test.go``), AppWrappers,
and Kueue's marker PodSetInfo."""

from __future__ import annotations

import copy
from typing import Any

from integrations.appwrapper.api import API_VERSION, KIND
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer
from jobframework.testing.authorization import AccessRule

NS = "default"
BUSYBOX = "quay.io/project-codeflare/busybox:1.36"

#: Upstream's ``markerPodSet``: what Kueue's PodSetInfo would carry.
MARKER: dict[str, Any] = {
    "labels": {"testkey1": "value1"},
    "annotations": {"test2": "test2"},
    "nodeSelector": {"nodeName": "myNode"},
    "tolerations": [{"key": "aKey", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulingGates": [{"name": "aGate"}],
}


def _container(cpu: str | None = None, command: str = "sleep 10") -> dict[str, Any]:
    c: dict[str, Any] = {"name": "busybox", "image": BUSYBOX, "command": ["sh", "-c", command]}
    if cpu is not None:
        c["resources"] = {"requests": {"cpu": cpu}}
    return c


def _pod_template(cpu: str | None = None, labels: dict[str, str] | None = None,
                  restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(cpu)]}
    if restart:
        spec["restartPolicy"] = restart
    t: dict[str, Any] = {"spec": spec}
    if labels is not None:
        t["metadata"] = {"labels": dict(labels)}
    return t


def component(template: dict[str, Any], *, pod_sets: list[dict[str, Any]] | None = None,
              ) -> dict[str, Any]:
    """An ``AppWrapperComponent``; ``pod_sets`` are declared when given."""
    c: dict[str, Any] = {"template": copy.deepcopy(template)}
    if pod_sets is not None:
        c["podSets"] = copy.deepcopy(pod_sets)
    return c


def pod(cpu: str | None = "100m", *, declare: bool = False, name: str = "pod",
        namespace: str | None = None) -> dict[str, Any]:
    """A busybox Pod (restartPolicy Never); ``declare`` adds ``podSets: [{path: template}]``."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"restartPolicy": "Never", "containers": [_container(cpu)]}}
    return component(template, pod_sets=[{"path": "template"}] if declare else None)


def deployment(replicas: int = 1, *, declare: bool = False, cpu: str = "100m",
               name: str = "deployment") -> dict[str, Any]:
    """A Deployment of ``replicas`` busybox pods; ``declare`` adds its PodSet."""
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": {"app": "deployment"}},
                "spec": {"replicas": replicas,
                         "selector": {"matchLabels": {"app": "deployment"}},
                         "template": _pod_template(cpu, {"app": "deployment"})}}
    pod_sets = [{"replicas": replicas, "path": "template.spec.template"}] if declare else None
    return component(template, pod_sets=pod_sets)


def job(parallelism: int | None = None, completions: int | None = None, *,
        cpu: str = "100m", name: str = "job") -> dict[str, Any]:
    """A batch/v1 Job (PodSet inferred)."""
    spec: dict[str, Any] = {"template": _pod_template(cpu, restart="Never")}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return component({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                      "spec": spec})


def jobset(jobs: int = 1, *, declare: bool = False) -> dict[str, Any]:
    """A JobSet with ``jobs`` replicated jobs of one pod each."""
    replicated = [{"name": f"rj{i}", "replicas": 1,
                   "template": {"spec": {"template": _pod_template("100m", restart="Never")}}}
                  for i in range(jobs)]
    template = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "jobset"}, "spec": {"replicatedJobs": replicated}}
    pod_sets = ([{"replicas": 1, "path": f"template.spec.replicatedJobs[{i}].template.spec."
                  "template"} for i in range(jobs)] if declare else None)
    return component(template, pod_sets=pod_sets)


def pytorchjob(workers: int = 1, *, declare: bool = False) -> dict[str, Any]:
    """A PyTorchJob with a Master and ``workers`` Workers."""
    specs = {role: {"replicas": n, "restartPolicy": "OnFailure",
                    "template": _pod_template("100m")}
             for role, n in (("Master", 1), ("Worker", workers))}
    template = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "pytorchjob"}, "spec": {"pytorchReplicaSpecs": specs}}
    pod_sets = ([{"replicas": 1, "path": "template.spec.pytorchReplicaSpecs.Master.template"},
                 {"replicas": workers,
                  "path": "template.spec.pytorchReplicaSpecs.Worker.template"}]
                if declare else None)
    return component(template, pod_sets=pod_sets)


def _ray_cluster_spec(workers: int) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": _pod_template("100m")},
            "workerGroupSpecs": [{"groupName": "small", "replicas": workers,
                                  "minReplicas": workers, "maxReplicas": workers,
                                  "rayStartParams": {}, "template": _pod_template("100m")}]}


def raycluster(workers: int = 1) -> dict[str, Any]:
    """A RayCluster with a head and one worker group of ``workers``."""
    return component({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                      "metadata": {"name": "raycluster"}, "spec": _ray_cluster_spec(workers)})


def rayjob(workers: int = 1) -> dict[str, Any]:
    """A RayJob whose cluster has a head and one worker group of ``workers``."""
    return component({"apiVersion": "ray.io/v1", "kind": "RayJob",
                      "metadata": {"name": "rayjob"},
                      "spec": {"entrypoint": "python x.py",
                               "rayClusterSpec": _ray_cluster_spec(workers)}})


def service(*, declare_empty: bool = True) -> dict[str, Any]:
    """A Service (no pods; upstream's fixture declares an empty podSets list)."""
    template = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "service"},
                "spec": {"selector": {"app": "test"},
                         "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}]}}
    return component(template, pod_sets=[] if declare_empty else None)


def appwrapper(components: list[dict[str, Any]], *, name: str = "aw", namespace: str = NS,
               labels: dict[str, str] | None = None, suspend: bool | None = None,
               ) -> dict[str, Any]:
    """An AppWrapper dict wrapping ``components`` (deep-copied)."""
    spec: dict[str, Any] = {"components": copy.deepcopy(components)}
    if suspend is not None:
        spec["suspend"] = suspend
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


# --- the API server with the AppWrapper webhooks ------------------------------------------------

LIMITED_USER = "limited-user"
LIMITED_USER_ID = "8da0fcfe-6d7f-4f44-b433-d91d22cc1b8c"

#: Kinds some tests wrap that the in-memory server does not serve by itself (group,
#: version, kind, plural); registered as their CRDs would be.
EXTRA_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("", "v1", "Service", "services"),
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
    ("ray.io", "v1", "RayCluster", "rayclusters"),
    ("ray.io", "v1", "RayJob", "rayjobs"),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets"),
)

def upstream_rules() -> list[AccessRule]:
    """Upstream's webhook suite: the limited user may create pods and AppWrappers and
    only read deployments; the admin (group system:masters) may do anything."""
    return [
        AccessRule(groups=("system:masters",)),
        AccessRule(users=(LIMITED_USER,), verbs=("create", "get", "list", "update", "delete"),
                   api_groups=("",), resources=("pods",)),
        AccessRule(users=(LIMITED_USER,), verbs=("*",), api_groups=("workload.codeflare.dev",),
                   resources=("appwrappers",)),
        AccessRule(users=(LIMITED_USER,), verbs=("get",), api_groups=("apps",),
                   resources=("deployments",)),
    ]


def serve_extra_kinds(server: APIServer,
                      kinds: tuple[tuple[str, str, str, str], ...] = EXTRA_KINDS) -> None:
    """Serve the kinds of :data:`EXTRA_KINDS` (as if their CRDs were installed)."""
    for group, version, kind, plural in kinds:
        server.register_kind(GVK(group, version, kind), plural, True)
