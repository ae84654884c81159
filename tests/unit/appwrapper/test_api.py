"""The AppWrapper API: wire constants, the CRD (structural, wire-compatible with upstream,
embedded templates kept whole), upstream's samples accepted as written, ours too."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from integrations.appwrapper import (
    APPWRAPPER_GVK,
    FRAMEWORK_NAME,
    USER_LABEL,
    AppWrapperCondition,
    AppWrapperJob,
    AppWrapperKueueWebhook,
    AppWrapperPhase,
    AppWrapperWebhook,
    api,
    load_crds,
    load_samples,
    probe_object,
)
from integrations.appwrapper.config import (
    AppWrapperConfig,
    failure_grace_duration,
    retry_limit,
    retry_pause_duration,
)
from integrations.appwrapper.podsets import expected_pods
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import Invalid
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.testing.authorization import Authorizer, AuthorizingClient
from jobframework.webhook import admission_hook, with_custom_defaulter, with_custom_validator

from .helpers import NS, appwrapper, pod, serve_extra_kinds

UPSTREAM_SAMPLES = Path(__file__).parent / "upstream_samples"
RULES: list[dict[str, Any]] = [{"operations": ["CREATE"], "apiGroups": [api.GROUP],
                                "apiVersions": [api.VERSION], "resources": [api.PLURAL]}]


def test_wire_constants() -> None:
    """The strings upstream reads and writes (reference §1.7 to §1.9, §5)."""
    assert APPWRAPPER_GVK.api_version == "workload.codeflare.dev/v1beta2"
    assert [p.value for p in AppWrapperPhase] == [
        "", "Suspended", "Resuming", "Running", "Resetting", "Suspending", "Succeeded",
        "Failed", "Terminating"]
    assert [x.value for x in AppWrapperCondition] == [
        "QuotaReserved", "ResourcesDeployed", "PodsReady", "Unhealthy", "DeletingResources"]
    assert api.RETRY_LIMIT_ANNOTATION == "workload.codeflare.dev.appwrapper/retryLimit"
    assert api.DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION == (
        "workload.codeflare.dev.appwrapper/deletionOnFailureGracePeriodDuration")
    assert api.TAS_SUB_GROUP_COUNT_ANNOTATION == (
        "workload.codeflare.dev.appwrapper/tas-sub-group-count")
    assert FRAMEWORK_NAME == "AppWrapper.v1beta2.workload.codeflare.dev"


def test_crd_shape() -> None:
    """Names, short name, scope, status subresource, printer columns, required fields and
    the embedded-resource template, as upstream's generated CRD."""
    (crd,) = load_crds()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "appwrappers.workload.codeflare.dev"
    assert spec["names"] == {"kind": "AppWrapper", "listKind": "AppWrapperList",
                             "plural": "appwrappers", "singular": "appwrapper",
                             "shortNames": ["aw"]}
    assert spec["scope"] == "Namespaced"
    (version,) = spec["versions"]
    assert version["subresources"] == {"status": {}}
    assert [(col["name"], col["jsonPath"]) for col in version["additionalPrinterColumns"]] == [
        ("Status", ".status.phase"),
        ("Quota Reserved", '.status.conditions[?(@.type=="QuotaReserved")].status'),
        ("Resources Deployed", '.status.conditions[?(@.type=="ResourcesDeployed")].status'),
        ("Unhealthy", '.status.conditions[?(@.type=="Unhealthy")].status'),
        ("Age", ".metadata.creationTimestamp")]
    schema = version["schema"]["openAPIV3Schema"]
    aw_spec = schema["properties"]["spec"]
    assert aw_spec["required"] == ["components"]
    item = aw_spec["properties"]["components"]["items"]
    assert item["required"] == ["template"]
    assert item["properties"]["template"]["x-kubernetes-embedded-resource"] is True
    assert item["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert item["properties"]["podSets"]["items"]["required"] == ["path"]
    status = schema["properties"]["status"]["properties"]
    assert status["componentStatus"]["items"]["required"] == [
        "apiVersion", "kind", "name", "podSets"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert "$ref" not in yaml.safe_dump(crd)


@pytest.fixture
def server() -> APIServer:
    srv = APIServer(ManualClock())
    for crd in load_crds():
        srv.register_crd(crd)
    return srv


async def test_templates_keep_unknown_fields_and_the_rest_is_pruned(server: APIServer) -> None:
    """Embedded templates keep every field (their metadata is an ObjectMeta); elsewhere
    unknown fields are pruned, as a structural schema does."""
    aw = appwrapper([pod(declare=True)])
    template = aw["spec"]["components"][0]["template"]
    template["spec"]["containers"][0]["futureField"] = {"x": 1}
    template["extra"] = [1, 2]
    aw["spec"]["bogus"] = True
    aw["spec"]["components"][0]["unknown"] = 1
    stored = await server.client().create(aw)
    stored_template = stored["spec"]["components"][0]["template"]
    assert stored_template["spec"]["containers"][0]["futureField"] == {"x": 1}
    assert stored_template["extra"] == [1, 2]
    assert "bogus" not in stored["spec"] and "unknown" not in stored["spec"]["components"][0]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda aw: aw["spec"]["components"][0]["template"].pop("kind"),
     "spec.components[0].template.kind: Required value"),
    (lambda aw: aw["spec"]["components"][0]["template"].pop("apiVersion"),
     "spec.components[0].template.apiVersion: Required value"),
    (lambda aw: aw["spec"]["components"][0]["podSets"][0].pop("path"),
     "spec.components[0].podSets[0].path: Required value"),
    (lambda aw: aw["spec"]["components"][0]["podSets"][0].update(replicas="1"),
     "spec.components[0].podSets[0].replicas: Invalid value"),
    (lambda aw: aw["spec"].pop("components"), "spec.components: Required value"),
])
async def test_schema_rejections(server: APIServer, mutate: Any, message: str) -> None:
    """The schema's own rules: embedded resources need apiVersion and kind, a PodSet its
    path, replicas are integers, components are required."""
    aw = appwrapper([pod(declare=True)])
    mutate(aw)
    with pytest.raises(Invalid) as info:
        await server.client().create(aw)
    assert message in str(info.value)


# --- samples --------------------------------------------------------------------------------------


def upstream_samples() -> list[tuple[str, Object]]:
    return [(p.name, yaml.safe_load(p.read_text()))
            for p in sorted(UPSTREAM_SAMPLES.glob("*.yaml"))]


def in_default(doc: Object) -> Object:
    """``doc`` as ``kubectl apply -n default`` sends it."""
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("namespace", NS)
    return doc


def with_webhook(server: APIServer) -> Authorizer:
    authorizer = Authorizer()
    webhook = AppWrapperWebhook(AuthorizingClient(server.client(), authorizer))  # type: ignore[arg-type]
    server.add_mutating_webhook(admission_hook(with_custom_defaulter(webhook)), rules=RULES)
    rules = [{**RULES[0], "operations": ["CREATE", "UPDATE"]}]
    server.add_validating_webhook(admission_hook(with_custom_validator(webhook)), rules=rules)
    return authorizer


def test_every_upstream_sample_is_vendored() -> None:
    """The ten samples of upstream v1.2.1 (unchanged in v1.2.2), each an AppWrapper with
    the queue label."""
    names = [n for n, _ in upstream_samples()]
    assert names == sorted([
        "wrapped-deployment.yaml", "wrapped-failing-job.yaml", "wrapped-failing-pod.yaml",
        "wrapped-failing-pytorch-job.yaml", "wrapped-gpu-job.yaml", "wrapped-job.yaml",
        "wrapped-jobset.yaml", "wrapped-leader-worker-set.yaml", "wrapped-pod.yaml",
        "wrapped-pytorch-job.yaml"])
    assert (UPSTREAM_SAMPLES / "README.md").exists()


@pytest.mark.parametrize(("name", "doc"), upstream_samples(), ids=lambda v: str(v)[:30])
async def test_upstream_samples_accepted_as_written(server: APIServer, name: str,
                                                    doc: Object) -> None:
    """Each upstream sample passes the CRD schema and the webhook unchanged (the kinds it
    wraps being served, as once their CRDs are installed)."""
    serve_extra_kinds(server)
    with_webhook(server)
    stored = await server.client().create(in_default(doc))
    assert stored["spec"]["components"] == doc["spec"]["components"], name
    assert stored["metadata"]["labels"][USER_LABEL] == "admin"
    assert expected_pods(stored) > 0


async def test_upstream_lws_sample_declares_its_pod_sets(server: APIServer) -> None:
    """LeaderWorkerSet is not inferred in v1.2: its declared PodSets are used verbatim."""
    serve_extra_kinds(server)
    doc = dict(upstream_samples())["wrapped-leader-worker-set.yaml"]
    pod_sets = await AppWrapperJob(in_default(doc)).pod_sets(None)  # type: ignore[arg-type]
    assert [(p.name, p.count) for p in pod_sets] == [("sample-lws-0", 2), ("sample-lws-1", 3)]


@pytest.mark.parametrize(("name", "kind"), [
    ("wrapped-jobset.yaml", "JobSet"), ("wrapped-leader-worker-set.yaml", "LeaderWorkerSet"),
    ("wrapped-pytorch-job.yaml", "PyTorchJob"), ("wrapped-failing-pytorch-job.yaml",
                                                 "PyTorchJob")])
async def test_upstream_samples_accepted_before_their_crds(server: APIServer, name: str,
                                                           kind: str) -> None:
    """Without the wrapped kind's CRD the sample is accepted all the same, as upstream
    accepts it (a GitOps tool may apply it before the CRD; issue #28, item 9a); the
    RBAC check asked about resource ``*``."""
    authorizer = with_webhook(server)
    doc = dict(upstream_samples())[name]
    stored = await server.client().create(in_default(doc))
    assert stored["spec"]["components"][0]["template"]["kind"] == kind
    assert "*" in [r["resourceAttributes"]["resource"] for r in authorizer.reviews]


def test_our_samples() -> None:
    """Ours: a wrapped Job, Pod, Deployment (+ Service) and a failing Job, all queued."""
    samples = load_samples()
    assert set(samples) == {"batch-job.yaml", "pod.yaml", "deployment.yaml",
                            "failing-job.yaml"}
    for docs in samples.values():
        (doc,) = docs
        assert doc["kind"] == "AppWrapper"
        assert doc["metadata"]["labels"] == {c.QUEUE_LABEL: "user-queue"}
    kinds = {name: [comp["template"]["kind"] for comp in docs[0]["spec"]["components"]]
             for name, docs in samples.items()}
    assert kinds == {"batch-job.yaml": ["Job"], "pod.yaml": ["Pod"],
                     "deployment.yaml": ["Deployment", "Service"],
                     "failing-job.yaml": ["Job"]}
    (failing,) = samples["failing-job.yaml"]
    config = AppWrapperConfig()
    assert retry_limit(failing, config) == 1
    assert failure_grace_duration(failing, config).total_seconds() == 0
    assert retry_pause_duration(failing, config).total_seconds() == 5


@pytest.mark.parametrize("name", ["batch-job.yaml", "pod.yaml", "deployment.yaml",
                                  "failing-job.yaml"])
async def test_our_samples_are_queued(server: APIServer, name: str) -> None:
    """Through the Kueue webhook each sample is accepted and suspended; Kueue sees the
    pods it will make."""
    serve_extra_kinds(server)
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    client = AuthorizingClient(server.client(), Authorizer())
    hook = AppWrapperKueueWebhook(client, appwrapper=AppWrapperWebhook(client),
                                  integration_manager=im)
    server.add_mutating_webhook(admission_hook(with_custom_defaulter(hook)), rules=RULES)
    server.add_validating_webhook(admission_hook(with_custom_validator(hook)), rules=RULES)
    (doc,) = load_samples()[name]
    stored = await server.client().create(in_default(doc))
    assert stored["spec"]["suspend"] is True
    pods = {"batch-job.yaml": 2, "pod.yaml": 1, "deployment.yaml": 2, "failing-job.yaml": 1}
    pod_sets = await AppWrapperJob(stored).pod_sets(None)  # type: ignore[arg-type]
    assert sum(p.count for p in pod_sets) == pods[name]


async def test_probe_object_is_suspended_on_a_dry_run(server: APIServer) -> None:
    """The manager's probe: a dry-run create through the Kueue webhook comes back
    suspended and is not stored."""
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    client = AuthorizingClient(server.client(), Authorizer())
    hook = AppWrapperKueueWebhook(client, appwrapper=AppWrapperWebhook(client),
                                  integration_manager=im)
    server.add_mutating_webhook(admission_hook(with_custom_defaulter(hook)), rules=RULES)
    server.add_validating_webhook(admission_hook(with_custom_validator(hook)), rules=RULES)
    probe = probe_object(NS)
    assert probe["metadata"]["labels"] == {c.QUEUE_LABEL: "probe"}
    out = await server.client().create(probe, dry_run=True)
    assert out["spec"]["suspend"] is True
    assert server.objects(APPWRAPPER_GVK, NS) == []
