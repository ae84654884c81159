"""Objects and configuration files the launcher generates.

Kept as plain dicts (and YAML text for kwok's Go templates) so the cluster's
shape is readable in one place: fake nodes, kwok stages, the Kueue
Configuration, webhook configurations rewritten to loopback URLs, and the
default ResourceFlavors / ClusterQueue / LocalQueue.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobframework.config import KUEUE_GROUP_KIND_CONCURRENCY

JSON = dict[str, Any]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR_LABEL = "instance-type"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"

#: Annotation on a pod (or a Job's pod template) that makes kwok fail it
#: instead of completing it.
FAIL_ANNOTATION = "kueue-jf.test/fail"
#: Owner kinds whose running pods kwok finishes (after the run time); other pods run on.
FINISHING_OWNER_KINDS = ("Job", "AppWrapper")
#: kwok's own per-pod override of the Running -> Succeeded/Failed delay ("5s").
COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
#: Per-pod override of the Pending -> Running delay ("500ms").
READY_DELAY_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"

EXTERNAL_FRAMEWORKS = (
    "JobFlow.v1alpha1.api.practice.com",
    "DaemonJob.v1alpha1.api.practice.com",
    "AppWrapper.v1beta2.workload.codeflare.dev",
)


@dataclass(frozen=True)
class FlavorSpec:
    """One ResourceFlavor, its fake nodes and its share of the ClusterQueue."""

    name: str
    nodes: int = 2
    node_cpu: str = "8"
    node_memory: str = "32Gi"
    node_pods: str = "110"
    quota_cpu: str = "4"
    quota_memory: str = "8Gi"


@dataclass(frozen=True)
class Topology:
    """Flavors, queues and kwok timings of the local cluster."""

    flavors: tuple[FlavorSpec, ...] = (FlavorSpec("on-demand"), FlavorSpec("spot"))
    cluster_queue: str = "cluster-queue"
    local_queue: str = "user-queue"
    local_queue_namespace: str = "default"
    pod_start_ms: int = 0
    pod_run_ms: int = 2000
    external_frameworks: tuple[str, ...] = EXTERNAL_FRAMEWORKS
    frameworks: tuple[str, ...] = ("batch/job",)
    extra_kueue_config: JSON = field(default_factory=dict)
    #: Write the API server's audit log (``logs/audit.log``, one JSON line per completed
    #: request at level Metadata: user, user agent, verb, resource), e.g. to count each
    #: controller's requests in a benchmark.
    audit: bool = False


# ------------------------------------------------------------- admission webhooks


def webhook_client_kubeconfig(cert: Path, key: Path) -> JSON:
    """The kubeconfig the API server reads its webhook client credentials from: one user,
    ``*`` (every webhook host), presenting ``cert``."""
    return {"apiVersion": "v1", "kind": "Config",
            "users": [{"name": "*", "user": {"client-certificate": str(cert),
                                              "client-key": str(key)}}]}


def admission_configuration(webhook_kubeconfig: Path) -> JSON:
    """The API server's ``--admission-control-config-file``: both webhook admission
    plugins authenticate with the credentials of ``webhook_kubeconfig``."""
    def plugin(name: str) -> JSON:
        return {"name": name, "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(webhook_kubeconfig)}}

    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [plugin("ValidatingAdmissionWebhook"),
                        plugin("MutatingAdmissionWebhook")]}


# --------------------------------------------------------------------------- audit


def audit_policy() -> JSON:
    """Every request at level Metadata, logged once when its response completes."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [{"level": "Metadata"}],
    }


# --------------------------------------------------------------------------- nodes


def nodes(topology: Topology) -> Iterator[JSON]:
    for flavor in topology.flavors:
        for i in range(flavor.nodes):
            name = f"kwok-{flavor.name}-{i}"
            resources = {
                "cpu": flavor.node_cpu,
                "memory": flavor.node_memory,
                "pods": flavor.node_pods,
            }
            yield {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {
                        KWOK_NODE_ANNOTATION: "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                    },
                    "labels": {
                        "type": "kwok",
                        FLAVOR_LABEL: flavor.name,
                        "kubernetes.io/arch": "amd64",
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/role": "agent",
                        "node-role.kubernetes.io/agent": "",
                    },
                },
                "spec": {},
                "status": {"capacity": resources, "allocatable": resources},
            }


# --------------------------------------------------------------------------- kwok


def _pod_ready_stage(default_ms: int) -> JSON:
    # Pending (bound to a kwok node) -> Running.  Adapted from kwok's
    # kustomize/stage/pod/fast/pod-ready.yaml with a configurable delay.
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "NotIn",
                        "values": ["True"],
                    },
                ]
            },
            "delay": {
                "durationMilliseconds": default_ms,
                "durationFrom": {
                    "expressionFrom": f'.metadata.annotations["{READY_DELAY_ANNOTATION}"]'
                },
            },
            "next": {"statusTemplate": _POD_RUNNING_TEMPLATE},
        },
    }


_POD_RUNNING_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
hostIPs:
- ip: {{ . | Quote }}
{{ end }}
{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ . | Quote }}
podIPs:
- ip: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _pod_finish_stage(name: str, default_ms: int, *, fail: bool) -> JSON:
    # Running pods owned by a Job, or directly by an AppWrapper (a wrapped Pod), ->
    # Succeeded (or Failed when annotated). Pods of Deployments and the like keep running.
    selector: list[JSON] = [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".metadata.ownerReferences.[].kind", "operator": "In",
         "values": list(FINISHING_OWNER_KINDS)},
    ]
    fail_key = f'.metadata.annotations["{FAIL_ANNOTATION}"]'
    if fail:
        selector.append({"key": fail_key, "operator": "In", "values": ["true"]})
    else:
        selector.append({"key": fail_key, "operator": "NotIn", "values": ["true"]})
    exit_code, reason, phase = (1, "Error", "Failed") if fail else (0, "Completed", "Succeeded")
    template = f"""\
{{{{ $now := Now }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  reason: PodCompleted
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  reason: PodCompleted
  type: ContainersReady
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {exit_code}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {reason}
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {phase}
"""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": selector},
            "delay": {
                "durationMilliseconds": default_ms,
                "durationFrom": {
                    "expressionFrom": f'.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]'
                },
            },
            "next": {"statusTemplate": template},
        },
    }


def _pod_delete_stage() -> JSON:
    # Pods being deleted are removed at once (no kubelet to confirm).
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-delete"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}]
            },
            "next": {"delete": True},
        },
    }


def kwok_config(kwok_src: Path, topology: Topology) -> str:
    """A multi-document kwok config holding all Stages.

    Node stages (initialize, lease heartbeat) come unchanged from the pinned kwok
    module; pod stages are ours (configurable delays, a failure switch).
    """
    # No KwokConfiguration document: kwok does not default a loaded one (it then
    # fails on e.g. nodeLeaseParallelism=0); its options are passed as flags.
    docs: list[JSON] = []
    for rel in (
        "kustomize/stage/node/fast/node-initialize.yaml",
        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    ):
        docs.append(yaml.safe_load((kwok_src / rel).read_text()))
    docs += [
        _pod_ready_stage(topology.pod_start_ms),
        _pod_finish_stage("pod-complete", topology.pod_run_ms, fail=False),
        _pod_finish_stage("pod-fail", topology.pod_run_ms, fail=True),
        _pod_delete_stage(),
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


# --------------------------------------------------------------------------- scheduler


def scheduler_config(kubeconfig: Path) -> JSON:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }


# --------------------------------------------------------------------------- kueue


def kueue_config(
    topology: Topology,
    *,
    webhook_port: int,
    health_port: int,
    metrics_port: int,
    cert_dir: Path,
) -> JSON:
    config: JSON = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        # Kueue's shipped config/components/manager/controller_manager_config.yaml.
        "controller": {"groupKindConcurrency": dict(KUEUE_GROUP_KIND_CONCURRENCY)},
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {
            "frameworks": list(topology.frameworks),
            "externalFrameworks": list(topology.external_frameworks),
        },
    }
    return _deep_merge(config, topology.extra_kueue_config)


def _deep_merge(base: JSON, extra: JSON) -> JSON:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def kueue_crds(kueue_src: Path) -> list[JSON]:
    """Kueue's base CRDs (no conversion-webhook stanza) from the module cache."""
    bases = kueue_src / "config" / "components" / "crd" / "bases"
    crds = []
    for path in sorted(bases.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                crds.append(doc)
    if not crds:
        raise FileNotFoundError(f"no CRDs under {bases}")
    return crds


# Webhooks of non-Kueue kinds are scoped the way Kueue's kustomization does it.
_SYSTEM_NAMESPACES_SELECTOR = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kueue-system"],
        }
    ]
}

_FRAMEWORK_RESOURCES = {
    "batch/job": ("batch", "jobs"),
    "pod": ("", "pods"),
    "deployment": ("apps", "deployments"),
    "statefulset": ("apps", "statefulsets"),
}


def _webhook_wanted(hook: JSON, frameworks: Iterable[str]) -> bool:
    wanted = {_FRAMEWORK_RESOURCES[f] for f in frameworks if f in _FRAMEWORK_RESOURCES}
    for rule in hook.get("rules", []):
        for group in rule.get("apiGroups", []):
            if group == "kueue.x-k8s.io":
                return True
            for resource in rule.get("resources", []):
                if (group, resource) in wanted:
                    return True
    return False


def kueue_webhook_configurations(
    kueue_src: Path, *, port: int, ca_bundle: bytes, frameworks: Iterable[str]
) -> list[JSON]:
    """Kueue's webhook manifest with each service clientConfig turned into a URL.

    Only the webhooks of Kueue's own kinds and of enabled built-in integrations
    are kept: Kueue serves no-op handlers for disabled ones, but their
    ``failurePolicy: Fail`` would make e.g. every AppWrapper create depend on the
    Kueue process although our Python AppWrapper integration owns that kind.
    """
    manifest = kueue_src / "config" / "components" / "webhook" / "manifests.yaml"
    frameworks = list(frameworks)
    out = []
    bundle = base64.b64encode(ca_bundle).decode()
    for doc in yaml.safe_load_all(manifest.read_text()):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"]}
        hooks = []
        for hook in doc.get("webhooks", []):
            if not _webhook_wanted(hook, frameworks):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            groups = {g for r in hook.get("rules", []) for g in r.get("apiGroups", [])}
            if groups != {"kueue.x-k8s.io"}:
                hook["namespaceSelector"] = copy.deepcopy(_SYSTEM_NAMESPACES_SELECTOR)
            hooks.append(hook)
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def queues(topology: Topology) -> list[JSON]:
    flavors: list[JSON] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f.name},
            "spec": {"nodeLabels": {FLAVOR_LABEL: f.name}},
        }
        for f in topology.flavors
    ]
    cluster_queue: JSON = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": topology.cluster_queue},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": f.name,
                            "resources": [
                                {"name": "cpu", "nominalQuota": f.quota_cpu},
                                {"name": "memory", "nominalQuota": f.quota_memory},
                            ],
                        }
                        for f in topology.flavors
                    ],
                }
            ],
        },
    }
    local_queue: JSON = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": topology.local_queue, "namespace": topology.local_queue_namespace},
        "spec": {"clusterQueue": topology.cluster_queue},
    }
    return [*flavors, cluster_queue, local_queue]


def probe_job(topology: Topology) -> JSON:
    """A Job sent with dryRun=All to prove Kueue's Job webhook is wired in."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "kueue-jf-webhook-probe",
            "namespace": topology.local_queue_namespace,
            "labels": {QUEUE_LABEL: topology.local_queue},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "probe", "resources": {"requests": {"cpu": "1m"}}}
                    ],
                }
            }
        },
    }
