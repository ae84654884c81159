"""The AppWrapper webhooks: upstream's defaulting and invariants (ported from
project-codeflare/appwrapper's ``internal/webhook/appwrapper_webhook_test.go``), the
SubjectAccessReview check, and Kueue's base webhook on top (Kueue's AppWrapper webhook
integration tests).

Most tests go through the in-memory API server's admission chain, as upstream's envtest
suite does; the exact messages are checked on the webhook directly.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.appwrapper import (
    APPWRAPPER_GVK,
    FRAMEWORK_NAME,
    USER_LABEL,
    USERID_LABEL,
    AppWrapperJob,
    AppWrapperKueueWebhook,
    AppWrapperWebhook,
    load_crds,
)
from integrations.appwrapper.podsets import effective_pod_sets
from integrations.appwrapper.webhook import validate_appwrapper_update
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GVK, GVR, Object
from jobframework.testing import APIServer, InMemoryClient
from jobframework.testing.authorization import AccessRule, Authorizer, AuthorizingClient
from jobframework.webhook import (
    AdmissionRequest,
    Operation,
    UserInfo,
    admission_hook,
    with_custom_defaulter,
    with_custom_validator,
)

from .helpers import (
    BUSYBOX,
    LIMITED_USER,
    LIMITED_USER_ID,
    NS,
    appwrapper,
    component,
    deployment,
    job,
    jobset,
    pod,
    pytorchjob,
    raycluster,
    rayjob,
    serve_extra_kinds,
    service,
    upstream_rules,
)

RESOURCE = GVR("workload.codeflare.dev", "v1beta2", "appwrappers")
ADMIN = UserInfo(username="admin", groups=("system:masters", "system:authenticated"))
LIMITED = UserInfo(username=LIMITED_USER, uid=LIMITED_USER_ID,
                   groups=("system:authenticated",))
DEFAULT_QUEUE = "system-default-queue"


def rules(*operations: str) -> list[dict[str, Any]]:
    """Upstream's webhook markers: mutating on CREATE, validating on CREATE and UPDATE."""
    return [{"operations": list(operations), "apiGroups": ["workload.codeflare.dev"],
             "apiVersions": ["v1beta2"], "resources": ["appwrappers"]}]


def create_request(aw: Object, user: UserInfo = ADMIN) -> AdmissionRequest:
    return AdmissionRequest.for_object(Operation.CREATE, aw, resource=RESOURCE, uid="u1",
                                       user_info=user)


class Env:
    """An in-memory server serving the AppWrapper CRD (and the wrapped kinds), with the
    AppWrapper webhook installed and upstream's users (see ``upstream_rules``)."""

    def __init__(self, *, default_queue_name: str = DEFAULT_QUEUE, rbac: bool = True,
                 extra_kinds: bool = True) -> None:
        self.server = APIServer(ManualClock())
        for crd in load_crds():
            self.server.register_crd(crd)
        if extra_kinds:
            serve_extra_kinds(self.server)
        self.authorizer = Authorizer(upstream_rules())
        self.webhook = AppWrapperWebhook(
            AuthorizingClient(self.server.client(), self.authorizer),  # type: ignore[arg-type]
            default_queue_name=default_queue_name, user_rbac_admission_check=rbac)
        self.server.add_mutating_webhook(admission_hook(with_custom_defaulter(self.webhook)),
                                         name="mappwrapper.kb.io", rules=rules("CREATE"))
        self.server.add_validating_webhook(admission_hook(with_custom_validator(self.webhook)),
                                           name="vappwrapper.kb.io",
                                           rules=rules("CREATE", "UPDATE"))
        self.admin: InMemoryClient = self.server.client()
        self.limited: InMemoryClient = self.server.client(user=LIMITED_USER)

    async def errors(self, aw: Object, user: UserInfo = ADMIN) -> list[str]:
        return [str(e) for e in await self.webhook.create_errors(aw, create_request(aw, user))]

    async def get(self, name: str = "aw") -> Object:
        return await self.admin.get(APPWRAPPER_GVK, name, namespace=NS)


@pytest.fixture
def env() -> Env:
    return Env()


async def rejected(client: InMemoryClient, aw: Object) -> str:
    with pytest.raises(ApiError) as info:
        await client.create(aw)
    return str(info.value)


# --- defaulting -------------------------------------------------------------------------------


async def test_default_queue_name_is_set(env: Env) -> None:
    """Upstream "Default queue name is set" (AW-1)."""
    created = await env.admin.create(appwrapper([pod(declare=True)]))
    assert created["metadata"]["labels"][c.QUEUE_LABEL] == DEFAULT_QUEUE


async def test_provided_queue_name_is_kept(env: Env) -> None:
    """Upstream "Provided queue name is not overridden by default queue name" (AW-2)."""
    aw = appwrapper([pod(declare=True)], labels={c.QUEUE_LABEL: "user-provided-queue"})
    created = await env.admin.create(aw)
    assert created["metadata"]["labels"][c.QUEUE_LABEL] == "user-provided-queue"


async def test_no_default_queue_configured() -> None:
    """Without ``default_queue_name`` no queue label is added."""
    env = Env(default_queue_name="")
    created = await env.admin.create(appwrapper([pod(declare=True)]))
    assert c.QUEUE_LABEL not in created["metadata"]["labels"]


async def test_user_name_and_id_are_set() -> None:
    """Upstream "User name and ID are set" (AW-3): the client's values are replaced."""
    webhook = AppWrapperWebhook()
    aw = appwrapper([pod(declare=True)], labels={USER_LABEL: "bad", USERID_LABEL: "bad"})
    await webhook.default(aw, create_request(aw, LIMITED))
    assert aw["metadata"]["labels"][USER_LABEL] == LIMITED_USER
    assert aw["metadata"]["labels"][USERID_LABEL] == LIMITED_USER_ID
    sa = UserInfo(username="system:serviceaccount:team-a:runner", uid="")
    await webhook.default(aw, create_request(aw, sa))
    assert aw["metadata"]["labels"][USER_LABEL] == "system_serviceaccount_team-a_runner"
    assert aw["metadata"]["labels"][USERID_LABEL] == ""


async def test_user_labels_through_the_api_server(env: Env) -> None:
    """The same through the server, whose requests carry the user's name."""
    aw = appwrapper([pod(declare=True)], labels={USER_LABEL: "bad"})
    created = await env.limited.create(aw)
    assert created["metadata"]["labels"][USER_LABEL] == LIMITED_USER


async def test_defaulting_needs_the_request() -> None:
    """Without an admission request the user is unknown: an error, as upstream."""
    with pytest.raises(RuntimeError, match=r"admission\.Request not found"):
        await AppWrapperWebhook().default(appwrapper([pod()]))


# --- create validation: structure -------------------------------------------------------------


async def test_at_least_one_podspec(env: Env) -> None:
    """Upstream "There must be at least one podspec (a)" and "(b)" (AW-4, AW-5)."""
    msg = "spec.components: Invalid value: components contains no podspecs"
    assert await env.errors(appwrapper([])) == [msg]
    assert await env.errors(appwrapper([service()])) == [msg]
    assert msg in await rejected(env.admin, appwrapper([service()]))


async def test_no_more_than_8_podspecs(env: Env) -> None:
    """Upstream "There must be no more than 8 podspecs" (AW-6)."""
    assert await env.errors(appwrapper([pod(declare=True)] * 9)) == [
        "spec.components: Invalid value: components contains 9 podspecs; at most 8 are "
        "allowed"]
    assert await env.errors(appwrapper([pod(declare=True)] * 8)) == []
    # Declared or inferred, whichever is larger, counts.
    assert "at most 8" in (await env.errors(appwrapper([pytorchjob(1)] * 5)))[0]


async def test_non_existent_pod_spec_paths(env: Env) -> None:
    """Upstream "Non-existent PodSpec paths are rejected" (AW-7)."""
    comp = deployment(4, declare=True)
    comp["podSets"][0]["path"] = "template.spec.missing"
    assert await env.errors(appwrapper([comp])) == [
        'spec.components[0].podSets[0].path: Invalid value: "template.spec.missing": path '
        "does not refer to a v1.PodSpecTemplate: at path position 'template.spec.' missing "
        "field 'missing'",
        "spec.components[0].podSets: Invalid value: PodSet with path "
        "'template.spec.template' is missing"]
    comp["podSets"][0]["path"] = ""
    errors = await env.errors(appwrapper([comp]))
    assert errors[:2] == [
        "spec.components[0].podSets[0].path: Required value: podspec must specify path",
        'spec.components[0].podSets[0].path: Invalid value: "": path does not refer to a '
        "v1.PodSpecTemplate: first element of the path must be 'template'"]
    assert "is missing" in await rejected(env.admin, appwrapper([comp]))


async def test_paths_must_refer_to_pod_templates(env: Env) -> None:
    """Upstream "PodSpec paths must refer to a PodSpecTemplate" (AW-8)."""
    comp = deployment(4, declare=True)
    comp["podSets"][0]["path"] = "template.spec.template.metadata"
    assert (await env.errors(appwrapper([comp])))[0] == (
        'spec.components[0].podSets[0].path: Invalid value: "template.spec.template.metadata": '
        "path does not refer to a v1.PodSpecTemplate: content at "
        "template.spec.template.metadata does not contain a spec")


@pytest.mark.parametrize("path", [
    "template.spec.replicatedJobs.template.spec.template",
    "template.spec.replicatedJobs",
    "template.spec.replicatedJobs[0].template[0].spec.template",
    "template.spec.replicatedJobs[10].template.spec.template",
    "template.spec.replicatedJobs[-1].template.spec.template",
    "template.spec.replicatedJobs[a10].template.spec.template",
    "template.spec.replicatedJobs[1",
    "template.spec.replicatedJobs[1]].template.spec.template",
])
async def test_array_and_map_path_elements(env: Env, path: str) -> None:
    """Upstream "Validation of Array and Map path elements" (AW-9)."""
    comp = jobset(2, declare=True)
    comp["podSets"][0]["path"] = path
    message = await rejected(env.admin, appwrapper([comp]))
    assert f'spec.components[0].podSets[0].path: Invalid value: "{path}": path does not ' \
        "refer to a v1.PodSpecTemplate" in message


async def test_components_in_other_namespaces(env: Env) -> None:
    """Upstream "Components in other namespaces are rejected" (AW-10)."""
    aw = appwrapper([pod(namespace="test", declare=True)])
    assert await env.errors(aw) == [
        "spec.components[0].template.metadata.namespace: Forbidden: AppWrappers cannot "
        "create objects in other namespaces"]
    assert await env.errors(appwrapper([pod(namespace=NS, declare=True)])) == []


async def test_nested_appwrappers(env: Env) -> None:
    """Upstream "Nested AppWrappers are rejected" (AW-11)."""
    child = appwrapper([pod(declare=True)], name="child")
    aw = appwrapper([pod(declare=True), component(child, pod_sets=[])])
    assert await env.errors(aw) == [
        "spec.components[1].template: Forbidden: Nested AppWrappers are forbidden"]
    assert "Nested AppWrappers are forbidden" in await rejected(env.admin, aw)


async def test_well_formed_appwrappers_are_accepted(env: Env) -> None:
    """Upstream "Well-formed AppWrappers are accepted" (AW-18)."""
    ray = raycluster(1)
    ray["podSets"] = [{"replicas": 1, "path": "template.spec.headGroupSpec.template"},
                      {"replicas": 1, "path": "template.spec.workerGroupSpecs[0].template"}]
    aw = appwrapper([pod(declare=True), deployment(1, declare=True),
                     pod(namespace=NS, declare=True, name="pod2"), ray,
                     jobset(1, declare=True)])
    created = await env.admin.create(aw)
    assert len(created["spec"]["components"]) == 5


TAS_POD_INDEX = "workload.codeflare.dev.appwrapper/tas-pod-index-label"


async def test_pod_sets_inferred_for_common_kinds(env: Env) -> None:
    """Upstream "PodSets are inferred for common kinds" (AW-19), asserting what is
    inferred (upstream v1.2.2's InferPodSets): a declared PodSet is kept as written; a
    Deployment and a Pod give one PodSet; a Job gives parallelism capped by completions
    with the completion index as TAS pod index. Kueue sees one PodSet per entry."""
    aw = appwrapper([pod(declare=True), deployment(1), pod(name="p2"), job(2, 4), job(8, 4)])
    created = await env.admin.create(aw)
    job_index = {TAS_POD_INDEX: "batch.kubernetes.io/job-completion-index"}
    assert effective_pod_sets(created) == [
        [{"path": "template"}],
        [{"replicas": 1, "path": "template.spec.template"}],
        [{"replicas": 1, "path": "template"}],
        [{"replicas": 2, "path": "template.spec.template", "annotations": job_index}],
        [{"replicas": 4, "path": "template.spec.template", "annotations": job_index}]]
    pod_sets = await AppWrapperJob(created).pod_sets(env.admin)
    assert [(p.name, p.count) for p in pod_sets] == [
        ("aw-0", 1), ("aw-1", 1), ("aw-2", 1), ("aw-3", 2), ("aw-4", 4)]
    assert [(p.template["metadata"].get("labels"), p.template["spec"]["restartPolicy"])
            for p in pod_sets] == [(None, "Never"), ({"app": "deployment"}, "Always"),
                                   (None, "Never"), (None, "Never"), (None, "Never")]
    assert {c["image"] for p in pod_sets for c in p.template["spec"]["containers"]} == {BUSYBOX}


async def test_pod_sets_inferred_for_pytorch_and_ray(env: Env) -> None:
    """Upstream "PodSets are inferred for PyTorchJobs, RayClusters, and RayJobs" (AW-20),
    asserting what is inferred: Master and Worker templates (replica index as TAS pod
    index), and for Ray the head (1) and each worker group, at the RayJob's
    ``rayClusterSpec`` for a RayJob."""
    created = await env.admin.create(appwrapper([pytorchjob(4), raycluster(7), rayjob(7)]))
    replica_index = {TAS_POD_INDEX: "training.kubeflow.org/replica-index"}
    pytorch = "template.spec.pytorchReplicaSpecs."
    assert effective_pod_sets(created) == [
        [{"replicas": 1, "path": pytorch + "Master.template", "annotations": replica_index},
         {"replicas": 4, "path": pytorch + "Worker.template", "annotations": replica_index}],
        [{"replicas": 1, "path": "template.spec.headGroupSpec.template"},
         {"replicas": 7, "path": "template.spec.workerGroupSpecs[0].template"}],
        [{"replicas": 1, "path": "template.spec.rayClusterSpec.headGroupSpec.template"},
         {"replicas": 7, "path": "template.spec.rayClusterSpec.workerGroupSpecs[0].template"}]]
    pod_sets = await AppWrapperJob(created).pod_sets(env.admin)
    assert [(p.name, p.count) for p in pod_sets] == [
        ("aw-0", 1), ("aw-1", 4), ("aw-2", 1), ("aw-3", 7), ("aw-4", 1), ("aw-5", 7)]
    assert {c["image"] for p in pod_sets for c in p.template["spec"]["containers"]} == {BUSYBOX}


async def test_declared_pod_sets_must_agree_with_inference(env: Env) -> None:
    """Declared PodSets of an inferable kind are checked against inference (§2.2.1)."""
    comp = deployment(4, declare=True)
    comp["podSets"][0]["replicas"] = 3
    assert await env.errors(appwrapper([comp])) == [
        "spec.components[0].podSets: Invalid value: replica count 3 differs from inferred "
        "count 4 for PodSet at path position 'template.spec.template'"]
    comp = pytorchjob(2, declare=True)
    comp["podSets"].pop()
    assert await env.errors(appwrapper([comp])) == [
        "spec.components[0].podSets: Invalid value: DeclaredPodSet count 1 differs from "
        "inferred count 2"]


async def test_malformed_templates_are_rejected_not_crashing(env: Env) -> None:
    """Bad input never crashes: undecodable templates and failed inference are named."""
    no_kind = component({"apiVersion": "v1", "metadata": {"name": "x"}})
    not_object = {"template": "just a string"}
    bad_replicas = deployment(1)
    bad_replicas["template"]["spec"]["replicas"] = "three"
    assert await env.errors(appwrapper([no_kind, not_object, bad_replicas, pod()])) == [
        "spec.components[0].template: Invalid value: failed to decode as JSON",
        "spec.components[1].template: Invalid value: failed to decode as JSON",
        "spec.components[2].template: Invalid value: error inferring PodSets: at path "
        "position 'template.spec.replicas' non-int value three"]
    unknown = component({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "w"}, "spec": {}})
    env.server.register_kind(GVK("example.com", "v1", "Widget"), "widgets", True)
    assert await env.errors(appwrapper([unknown])) == [
        "spec.components: Invalid value: components contains no podspecs"]


# --- create validation: served kinds and RBAC ----------------------------------------------------


async def test_rbac_permitted_resources(env: Env) -> None:
    """Upstream "AppWrapper containing permitted resources can be created" (AW-16)."""
    await env.limited.create(appwrapper([pod(declare=True)]))
    (review,) = [r for r in env.authorizer.reviews if r["user"] == LIMITED_USER]
    assert review["resourceAttributes"] == {"namespace": NS, "verb": "create", "group": "",
                                            "version": "v1", "resource": "pods"}
    assert review["groups"] == ["system:authenticated"]


async def test_rbac_unpermitted_resources(env: Env) -> None:
    """Upstream "AppWrapper containing unpermitted resources cannot be created" (AW-17)."""
    aw = appwrapper([deployment(4, declare=True)])
    assert await env.errors(aw, LIMITED) == [
        "spec.components[0].template: Forbidden: User limited-user is not authorized to "
        "create deployments in default"]
    assert "not authorized to create deployments" in await rejected(env.limited, aw)
    await env.admin.create(aw)


async def test_rbac_review_carries_the_whole_user() -> None:
    """The review copies the request's user, UID, groups and extra."""
    env = Env()
    user = UserInfo(username="u", uid="42", groups=("g1",), extra={"scopes": ("a", "b")})
    env.authorizer.rules.append(AccessRule(users=("u",)))
    assert await env.errors(appwrapper([pod(declare=True)]), user) == []
    review = env.authorizer.reviews[-1]
    assert (review["user"], review["uid"], review["groups"], review["extra"]) == (
        "u", "42", ["g1"], {"scopes": ["a", "b"]})


async def test_rbac_check_can_be_switched_off() -> None:
    """``userRBACAdmissionCheck: false``: no review is made."""
    env = Env(rbac=False)
    await env.limited.create(appwrapper([deployment(4, declare=True)]))
    assert env.authorizer.reviews == []


async def test_rbac_review_failure_is_an_internal_error(env: Env) -> None:
    """A review that cannot be made rejects with an internal error on the template."""
    env.authorizer.error = RuntimeError("authorizer unreachable")
    assert await env.errors(appwrapper([pod(declare=True)])) == [
        "spec.components[0].template: Internal error: authorizer unreachable"]


async def test_unserved_kinds_are_accepted_as_upstream_does() -> None:
    """A kind whose CRD is not installed yet is accepted, PodSets inferred as usual, so
    that a GitOps tool may apply an AppWrapper before the CRD of a kind it wraps (issue
    #28, item 9a); the RBAC check asks about resource ``*`` (upstream's fallback), which
    the admin may create."""
    env = Env(extra_kinds=False)
    assert await env.errors(appwrapper([jobset(1)])) == []
    assert env.authorizer.reviews[-1]["resourceAttributes"]["resource"] == "*"
    created = await env.admin.create(appwrapper([jobset(1)]))
    assert created["spec"]["components"][0]["template"]["kind"] == "JobSet"
    # The inference still checks the template.
    broken = jobset(1)
    broken["podSets"] = [{"path": "template.spec.replicatedJobs[0].template.spec.template",
                          "replicas": 3}]
    assert await env.errors(appwrapper([broken])) == [
        "spec.components[0].podSets: Invalid value: replica count 3 differs from inferred "
        "count 1 for PodSet at path position "
        "'template.spec.replicatedJobs[0].template.spec.template'"]


def old_kuberay_cluster() -> dict[str, Any]:
    """A ``ray.io/v1alpha1`` RayCluster (older KubeRay serves it) of 100 workers with
    8 GPUs each, declaring a single one-pod PodSet."""
    comp = raycluster(100)
    comp["template"]["apiVersion"] = "ray.io/v1alpha1"
    worker = comp["template"]["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    comp["podSets"] = [{"replicas": 1, "path": "template.spec.headGroupSpec.template"}]
    return comp


async def test_known_kind_in_an_unknown_version_is_refused(env: Env) -> None:
    """Upstream infers nothing for a RayCluster outside ``ray.io/v1`` and trusts the
    declared PodSets (1 pod admitted for 101); here the version is refused, naming the
    field and the versions inference knows (issue #27, item 4)."""
    env.server.register_kind(GVK("ray.io", "v1alpha1", "RayCluster"), "rayclusters", True)
    aw = appwrapper([old_kuberay_cluster()])
    expected = ('spec.components[0].template.apiVersion: Unsupported value: '
                '"ray.io/v1alpha1": supported values: "ray.io/v1"')
    assert await env.errors(aw) == [expected]
    assert expected in await rejected(env.admin, aw)
    # Without declared PodSets too (and whether or not the cluster serves the version).
    bare = old_kuberay_cluster()
    del bare["podSets"]
    assert (await Env(extra_kinds=False).errors(appwrapper([pod(declare=True), bare]))) == [
        expected.replace("components[0]", "components[1]")]
    # The served version of the same cluster is inferred: 101 pods, not 1.
    current = old_kuberay_cluster()
    current["template"]["apiVersion"] = "ray.io/v1"
    assert await env.errors(appwrapper([current])) == [
        "spec.components[0].podSets: Invalid value: DeclaredPodSet count 1 differs from "
        "inferred count 2"]
    del current["podSets"]
    await env.admin.create(appwrapper([current]))


def priority_class() -> dict[str, Any]:
    """A cluster-scoped component: a PriorityClass (a tenant's way to jump the queue)."""
    return component({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": "top"}, "value": 1000000000}, pod_sets=[])


def cluster_role() -> dict[str, Any]:
    """Another cluster-scoped component: a ClusterRole granting everything."""
    return component({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "all"},
                      "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
                     pod_sets=[])


async def test_rbac_review_is_asked_in_the_component_scope(env: Env) -> None:
    """The review for a cluster-scoped kind has no namespace (from the kind's REST
    mapping), so a RoleBinding in the AppWrapper's namespace no longer stands in for a
    ClusterRoleBinding; a namespaced kind keeps the AppWrapper's namespace (issue #27,
    item 6)."""
    env.server.register_kind(GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"),
                             "clusterroles", False)
    # What a RoleBinding in NS to a role granting these kinds gives.
    env.authorizer.rules.append(AccessRule(
        users=(LIMITED_USER,), verbs=("create",),
        api_groups=("scheduling.k8s.io", "rbac.authorization.k8s.io"),
        resources=("priorityclasses", "clusterroles"), namespaces=(NS,)))
    aw = appwrapper([pod(declare=True), priority_class(), cluster_role()])
    assert await env.errors(aw, LIMITED) == [
        "spec.components[1].template: Forbidden: User limited-user is not authorized to "
        "create priorityclasses cluster-wide",
        "spec.components[2].template: Forbidden: User limited-user is not authorized to "
        "create clusterroles cluster-wide"]
    assert [(r["resourceAttributes"]["resource"], r["resourceAttributes"]["namespace"])
            for r in env.authorizer.reviews] == [
        ("pods", NS), ("priorityclasses", ""), ("clusterroles", "")]
    assert "create priorityclasses cluster-wide" in await rejected(env.limited, aw)
    # What a ClusterRoleBinding gives (any namespace, and none) is enough.
    env.authorizer.rules.append(AccessRule(
        users=(LIMITED_USER,), verbs=("create",),
        api_groups=("scheduling.k8s.io", "rbac.authorization.k8s.io"),
        resources=("priorityclasses", "clusterroles")))
    assert await env.errors(aw, LIMITED) == []
    await env.limited.create(aw)


async def test_rbac_review_for_an_unserved_kind_is_asked_cluster_wide() -> None:
    """An unserved kind is asked about as upstream does (resource ``*``) but cluster-wide:
    its scope is unknown, so a user who may create anything in the namespace only is
    refused."""
    env = Env(extra_kinds=False)
    env.authorizer.rules.append(AccessRule(users=(LIMITED_USER,), verbs=("create",),
                                           namespaces=(NS,)))
    aw = appwrapper([jobset(1)])
    assert await env.errors(aw, LIMITED) == [
        "spec.components[0].template: Forbidden: User limited-user is not authorized to "
        "create * cluster-wide"]
    assert env.authorizer.reviews[-1]["resourceAttributes"] == {
        "namespace": "", "verb": "create", "group": "jobset.x-k8s.io",
        "version": "v1alpha2", "resource": "*"}


# --- update validation ---------------------------------------------------------------------------


async def test_user_name_and_id_are_immutable(env: Env) -> None:
    """Upstream "User name and ID are immutable" (AW-12)."""
    await env.admin.create(appwrapper([pod(declare=True)]))
    for key in (USER_LABEL, USERID_LABEL):
        aw = await env.get()
        aw["metadata"]["labels"][key] = "bad"
        with pytest.raises(ApiError) as info:
            await env.admin.update(aw)
        assert (f"metadata.labels[{key}]: Forbidden: attempt to change immutable field"
                in str(info.value))


async def test_user_name_and_id_preserved_on_updates(env: Env) -> None:
    """Upstream "User name and ID should be preserved on updates" (AW-13)."""
    await env.limited.create(appwrapper([pod(declare=True)]))
    await env.admin.update(await env.get())
    assert (await env.get())["metadata"]["labels"][USER_LABEL] == LIMITED_USER


async def test_non_sensitive_updates_are_allowed(env: Env) -> None:
    """Upstream "Updates to non-sensitive fields are allowed" (AW-14)."""
    await env.admin.create(appwrapper([pod(declare=True), deployment(4, declare=True)]))
    aw = await env.get()
    aw["spec"]["suspend"] = True
    await env.admin.update(aw)
    aw = await env.get()
    aw["spec"]["components"][1]["podSetInfos"] = [{}]
    aw["spec"]["components"][0]["annotations"] = {"note": "ok"}
    aw["spec"]["components"][0]["podSets"][0]["annotations"] = {"hint": "ok"}
    aw["metadata"]["labels"]["other"] = "ok"
    updated = await env.admin.update(aw)
    assert updated["spec"]["components"][1]["podSetInfos"] == [{}]


async def test_sensitive_updates_are_rejected(env: Env) -> None:
    """Upstream "Updates to sensitive fields are rejected" (AW-15), with the fields named."""
    await env.admin.create(appwrapper([pod(declare=True), deployment(4, declare=True)]))

    cases: list[tuple[Any, str]] = [
        (lambda s: s["components"].__setitem__(0, {**s["components"][0],
                                                   "template": s["components"][1]["template"]}),
         "spec.components[0].template.raw: Forbidden: attempt to change immutable field"),
        (lambda s: s["components"].append(copy.deepcopy(s["components"][0])),
         "spec.components: Forbidden: attempt to change immutable field"),
        (lambda s: s["components"][0]["podSets"].extend(
            copy.deepcopy(s["components"][0]["podSets"])),
         "spec.components[0].podsets: Forbidden: attempt to change immutable field"),
        (lambda s: s["components"][0]["podSets"][0].__setitem__("path", "bad"),
         "spec.components[0].podsets[0].path: Forbidden: attempt to change immutable field"),
        (lambda s: s["components"][0]["podSets"][0].__setitem__("replicas", 12),
         "spec.components[0].podsets[0].replicas: Forbidden: attempt to change immutable "
         "field"),
        (lambda s: s.__setitem__("managedBy", "someone-else"),
         "spec.managedBy: Forbidden: attempt to change immutable field"),
    ]
    for edit, message in cases:
        aw = await env.get()
        edit(aw["spec"])
        with pytest.raises(ApiError) as info:
            await env.admin.update(aw)
        assert message in str(info.value)


def test_update_rules_directly() -> None:
    """The immutability rules on plain dicts: replicas nil = 1, managedBy absent ≠ ""."""
    old = appwrapper([deployment(1, declare=True)])
    new = copy.deepcopy(old)
    del new["spec"]["components"][0]["podSets"][0]["replicas"]
    assert validate_appwrapper_update(old, new) == []
    new["spec"]["managedBy"] = ""
    assert [str(e) for e in validate_appwrapper_update(old, new)] == [
        "spec.managedBy: Forbidden: attempt to change immutable field"]
    # A template rewritten with the same content (key order) is not a change.
    new = copy.deepcopy(old)
    tpl = new["spec"]["components"][0]["template"]
    new["spec"]["components"][0]["template"] = dict(reversed(list(tpl.items())))
    assert validate_appwrapper_update(old, new) == []


# --- Kueue's base webhook on top ------------------------------------------------------------------


def kueue_webhook(**options: Any) -> AppWrapperKueueWebhook:
    server = APIServer(ManualClock())
    for crd in load_crds():
        server.register_crd(crd)
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    client = AuthorizingClient(server.client(), Authorizer())
    return AppWrapperKueueWebhook(
        client, appwrapper=AppWrapperWebhook(client, default_queue_name="dq"),
        integration_manager=im, **options)


async def test_kueue_webhook_suspends_queued_appwrappers() -> None:
    """Kueue's "the appwrapper should be suspended on create" (KW-1), with upstream's
    defaults applied first (so the default queue label makes it queued)."""
    hook = kueue_webhook()
    aw = appwrapper([job(2)], suspend=False)
    await hook.default(aw, create_request(aw))
    assert aw["spec"]["suspend"] is True
    assert aw["metadata"]["labels"][c.QUEUE_LABEL] == "dq"
    assert aw["metadata"]["labels"][USER_LABEL] == "admin"


async def test_kueue_webhook_leaves_unqueued_appwrappers_alone() -> None:
    """Without a queue label (and manageJobsWithoutQueueName false) nothing is suspended."""
    server = APIServer(ManualClock())
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    hook = AppWrapperKueueWebhook(server.client(), integration_manager=im,
                                  appwrapper=AppWrapperWebhook())
    aw = appwrapper([job(2)], suspend=False)
    await hook.default(aw, create_request(aw))
    assert aw["spec"]["suspend"] is False


async def test_kueue_webhook_invalid_queue_name() -> None:
    """Kueue's "invalid queue name" (KW-2): ``indexed_job`` is denied, with upstream's
    errors in the same denial."""
    hook = kueue_webhook()
    aw = appwrapper([service()], labels={c.QUEUE_LABEL: "indexed_job"})
    with pytest.raises(Exception) as info:
        await hook.validate_create(aw, create_request(aw))
    message = str(info.value)
    assert "components contains no podspecs" in message
    assert f"metadata.labels[{c.QUEUE_LABEL}]: Invalid value: \"indexed_job\"" in message


async def test_kueue_webhook_update_rules() -> None:
    """Upstream's immutability and Kueue's queue-name rule both apply on update."""
    hook = kueue_webhook()
    old = appwrapper([job(2)], labels={c.QUEUE_LABEL: "q1"}, suspend=False)
    new = copy.deepcopy(old)
    new["metadata"]["labels"][c.QUEUE_LABEL] = "q2"
    new["spec"]["managedBy"] = "x"
    with pytest.raises(Exception) as info:
        await hook.validate_update(old, new)
    assert "spec.managedBy: Forbidden: attempt to change immutable field" in str(info.value)
    assert f"metadata.labels[{c.QUEUE_LABEL}]: Invalid value" in str(info.value)
    ok = copy.deepcopy(old)
    ok["spec"]["suspend"] = True
    assert await hook.validate_update(old, ok) is None
