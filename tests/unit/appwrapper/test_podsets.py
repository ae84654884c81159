"""PodSet paths, inference, Kueue's template view, PodSetInfo bookkeeping and injection.

Ports the behaviour of upstream's ``pkg/utils`` (project-codeflare/appwrapper v1.2.x)
and of the pod-template part of the controller's ``createComponent``; upstream tests
that pin the same behaviour are named in the docstrings.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from integrations.appwrapper.api import (
    APPWRAPPER_LABEL,
    TAS_POD_INDEX_LABEL_ANNOTATION,
    TAS_SUB_GROUP_COUNT_ANNOTATION,
    TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION,
)
from integrations.appwrapper.podsets import (
    INFERABLE_GVKS,
    INFERABLE_KINDS,
    InferenceError,
    InjectionError,
    PathError,
    PodSetCountError,
    TemplateError,
    UnsupportedVersionError,
    clear_pod_set_infos,
    effective_pod_sets,
    expected_pods,
    get_component_pod_sets,
    get_pod_template_spec,
    get_raw_template,
    get_replicas,
    get_value_at_path,
    image_tag,
    infer_pod_sets,
    inject_pod_set_infos,
    replicas,
    sanitize_label,
    set_pod_set_infos,
    supported_api_versions,
    validate_pod_sets,
)
from jobframework.runtime.objects import GVK

from .helpers import (
    MARKER,
    appwrapper,
    component,
    deployment,
    job,
    jobset,
    pod,
    pytorchjob,
    raycluster,
    rayjob,
    service,
)

# --- the path grammar --------------------------------------------------------------------


@pytest.mark.parametrize(("path", "message"), [
    ("spec.template", "first element of the path must be 'template'"),
    ("template.spec.replicatedJobs.template.spec.template",
     "at path position 'template.spec.replicatedJobs.' non-map value"),
    ("template.spec.replicatedJobs[0].template[0].spec.template",
     "at path position 'template.spec.replicatedJobs[0.template' found non-array value"),
    ("template.spec.replicatedJobs[10].template.spec.template",
     "at path position 'template.spec.replicatedJobs' out of bounds index '10'"),
    ("template.spec.replicatedJobs[-1].template.spec.template",
     "at path position 'template.spec.replicatedJobs' out of bounds index '-1'"),
    ("template.spec.replicatedJobs[a10].template.spec.template",
     "at path position 'template.spec.replicatedJobs' invalid index expression 'a10'"),
    ("template.spec.replicatedJobs[1",
     "at path position 'template.spec.replicatedJobs' invalid array index '[1'"),
    ("template.spec.replicatedJobs[1]].template.spec.template",
     "at path position 'template.spec.replicatedJobs[1' invalid path element "
     "'].template.spec.template'"),
    ("template.spec.missing", "at path position 'template.spec.' missing field 'missing'"),
    ("templatex", "at path position 'template' invalid path element 'x'"),
])
def test_path_errors(path: str, message: str) -> None:
    """The malformed paths of upstream's webhook test "Validating PodSet paths" (AW-9),
    each with upstream's message (the '[n' without its ']' quirk included)."""
    template = jobset(2)["template"]
    with pytest.raises(PathError) as err:
        get_value_at_path(template, path)
    assert str(err.value) == message


def test_path_resolution() -> None:
    """``template`` names the component template; keys and indices walk into it."""
    template = jobset(2)["template"]
    assert get_value_at_path(template, "template") is template
    spec = get_value_at_path(template, "template.spec.replicatedJobs[1].template.spec.template")
    assert spec is template["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert get_value_at_path(template, "template.spec.replicatedJobs[+1].replicas") == 1
    assert get_raw_template(template, "template.spec") is template["spec"]
    with pytest.raises(PathError, match=re.escape(
            "at path position 'template.spec.replicatedJobs' non-map value")):
        get_raw_template(template, "template.spec.replicatedJobs")
    assert get_replicas(template, "template.spec.replicatedJobs[0].replicas") == 1
    template["spec"]["replicatedJobs"][0]["replicas"] = 2.5
    with pytest.raises(PathError, match=r"non-int value 2\.5$"):
        get_replicas(template, "template.spec.replicatedJobs[0].replicas")


# --- inference ------------------------------------------------------------------------------


def test_infer_common_kinds() -> None:
    """Upstream webhook test "Inference of PodSets for common kinds" (AW-19): a Pod makes
    one, a Deployment its replicas, a Job min(parallelism, completions)."""
    assert infer_pod_sets(pod()["template"]) == [{"replicas": 1, "path": "template"}]
    assert infer_pod_sets(deployment(3)["template"]) == [
        {"replicas": 3, "path": "template.spec.template"}]
    sts = deployment(4)["template"]
    sts["kind"] = "StatefulSet"
    assert infer_pod_sets(sts) == [{"replicas": 4, "path": "template.spec.template"}]
    idx = {TAS_POD_INDEX_LABEL_ANNOTATION: "batch.kubernetes.io/job-completion-index"}
    assert infer_pod_sets(job(parallelism=2, completions=4)["template"]) == [
        {"replicas": 2, "path": "template.spec.template", "annotations": idx}]
    assert infer_pod_sets(job(parallelism=8, completions=4)["template"]) == [
        {"replicas": 4, "path": "template.spec.template", "annotations": idx}]
    assert infer_pod_sets(job()["template"])[0]["replicas"] == 1
    # Non-integer counts are ignored for a Job (upstream's GetReplicas errors are dropped).
    j = job(parallelism=3)["template"]
    j["spec"]["completions"] = "2"
    assert infer_pod_sets(j)[0]["replicas"] == 3


def test_infer_deployment_without_replicas_and_bad_replicas() -> None:
    """Absent replicas mean 1; a non-integer is an inference error."""
    d = deployment(1)["template"]
    del d["spec"]["replicas"]
    assert infer_pod_sets(d)[0]["replicas"] == 1
    d["spec"]["replicas"] = "three"
    with pytest.raises(InferenceError, match=re.escape(
            "at path position 'template.spec.replicas' non-int value three")):
        infer_pod_sets(d)


def test_infer_pytorch_and_ray() -> None:
    """Upstream webhook test "Inference of PodSets for PyTorchJob, RayCluster, RayJob"
    (AW-20), and Kueue's KU-1 shape (Master then Worker with the replica-index hint)."""
    ri = {TAS_POD_INDEX_LABEL_ANNOTATION: "training.kubeflow.org/replica-index"}
    assert infer_pod_sets(pytorchjob(4)["template"]) == [
        {"replicas": 1, "path": "template.spec.pytorchReplicaSpecs.Master.template",
         "annotations": ri},
        {"replicas": 4, "path": "template.spec.pytorchReplicaSpecs.Worker.template",
         "annotations": ri}]
    assert infer_pod_sets(raycluster(7)["template"]) == [
        {"replicas": 1, "path": "template.spec.headGroupSpec.template"},
        {"replicas": 7, "path": "template.spec.workerGroupSpecs[0].template"}]
    assert infer_pod_sets(rayjob(7)["template"]) == [
        {"replicas": 1, "path": "template.spec.rayClusterSpec.headGroupSpec.template"},
        {"replicas": 7, "path": "template.spec.rayClusterSpec.workerGroupSpecs[0].template"}]


def test_infer_rayjob_without_cluster_spec_fails() -> None:
    """The head PodSet is added without a presence check, so it fails the final check."""
    rj = rayjob(1)["template"]
    del rj["spec"]["rayClusterSpec"]
    with pytest.raises(InferenceError, match=r"^template.spec.rayClusterSpec.headGroupSpec."
                                             r"template does not refer to a v1.PodSpecTemplate: "
                                             r"at path position 'template.spec.' missing field "
                                             r"'rayClusterSpec'$"):
        infer_pod_sets(rj)


def test_infer_jobset() -> None:
    """JobSet: one PodSet per replicated job, replicas times pods per job, sub-group hints."""
    js = jobset(2)["template"]
    js["spec"]["replicatedJobs"][0]["replicas"] = 3
    js["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=4, completions=2)
    got = infer_pod_sets(js)
    assert [(p["path"], p["replicas"]) for p in got] == [
        ("template.spec.replicatedJobs[0].template.spec.template", 6),
        ("template.spec.replicatedJobs[1].template.spec.template", 1)]
    assert got[0]["annotations"] == {
        TAS_POD_INDEX_LABEL_ANNOTATION: "batch.kubernetes.io/job-completion-index",
        TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: "jobset.sigs.k8s.io/job-index",
        TAS_SUB_GROUP_COUNT_ANNOTATION: "3"}
    assert got[1]["annotations"][TAS_SUB_GROUP_COUNT_ANNOTATION] == "1"


def test_uninferable_kinds_have_no_pod_sets() -> None:
    """A Service, a LeaderWorkerSet (not inferred in v1.2) or an unparsable apiVersion."""
    assert infer_pod_sets(service()["template"]) == []
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "spec": {"replicas": 2}}
    assert infer_pod_sets(lws) == []
    assert infer_pod_sets({"apiVersion": "a/b/c", "kind": "Pod", "spec": {}}) == []


def test_inference_knows_versions_per_group_and_kind() -> None:
    """A known kind in an API version inference does not know is an error, not "no
    PodSets" (issue #27): a ``ray.io/v1alpha1`` RayCluster would otherwise be admitted
    with whatever PodSets it declares."""
    old = raycluster(100)["template"]
    old["apiVersion"] = "ray.io/v1alpha1"
    with pytest.raises(UnsupportedVersionError, match=re.escape(
            'RayCluster in apiVersion "ray.io/v1alpha1": PodSets are inferred only for '
            "ray.io/v1")):
        infer_pod_sets(old)
    # Every inferable kind, the core group's included, in a version nobody serves.
    for template in (pod()["template"], deployment(2)["template"], job(2)["template"],
                     jobset(1)["template"], pytorchjob(2)["template"],
                     raycluster(2)["template"], rayjob(2)["template"]):
        group, _, _ = template["apiVersion"].rpartition("/")
        template["apiVersion"] = f"{group}/v9" if group else "v9"
        with pytest.raises(UnsupportedVersionError):
            infer_pod_sets(template)
    # The same kind name in another group is another kind: not inferred, no error.
    other = raycluster(3)["template"]
    other["apiVersion"] = "example.com/v1alpha1"
    assert infer_pod_sets(other) == []
    assert supported_api_versions(GVK("ray.io", "v1alpha1", "RayCluster")) == ("ray.io/v1",)
    assert supported_api_versions(GVK("", "v2", "Pod")) == ("v1",)
    assert supported_api_versions(GVK("", "v1", "Service")) == ()
    # The explicit table and the GVK set agree (eight kinds, one known version each).
    assert len(INFERABLE_KINDS) == 8
    assert {(g.group, g.kind) for g in INFERABLE_GVKS} == set(INFERABLE_KINDS)
    assert INFERABLE_KINDS[("jobset.x-k8s.io", "JobSet")] == ("v1alpha2",)


def test_infer_rejects_non_pod_spec() -> None:
    """An inferred path whose content is no pod spec is an inference error."""
    p = pod()["template"]
    p["spec"]["containers"][0]["bogus"] = 1
    with pytest.raises(InferenceError, match=r"^template does not refer to a v1.PodSpecTemplate: "
                                             r"content at template.spec not parseable as a "
                                             r'v1.PodSpec: unknown field "containers\[0\].bogus"$'):
        infer_pod_sets(p)


def test_component_pod_sets_declared_else_inferred() -> None:
    """``EnsureComponentStatusInitialized``: declared PodSets verbatim, else inferred."""
    declared = deployment(2, declare=True)
    declared["podSets"][0]["annotations"] = {"x": "y"}
    assert get_component_pod_sets(declared) == declared["podSets"]
    assert get_component_pod_sets(deployment(2)) == [
        {"replicas": 2, "path": "template.spec.template"}]
    with pytest.raises(InferenceError):
        get_component_pod_sets({"template": "not an object"})


def test_effective_pod_sets_prefer_frozen_status() -> None:
    """The status copy wins once it has one entry per component; replicas nil = 1."""
    aw = appwrapper([pod(), deployment(3)])
    assert [[replicas(p) for p in c] for c in effective_pod_sets(aw)] == [[1], [3]]
    assert expected_pods(aw) == 4
    aw["status"] = {"componentStatus": [
        {"name": "", "kind": "", "apiVersion": "", "podSets": [{"path": "template"}]},
        {"name": "", "kind": "", "apiVersion": "",
         "podSets": [{"path": "template.spec.template", "replicas": 5}]}]}
    assert expected_pods(aw) == 6
    aw["status"]["componentStatus"].pop()  # a partial status is ignored
    assert expected_pods(aw) == 4


@pytest.mark.parametrize(("declared", "inferred", "message"), [
    ([], [{"path": "a"}], None),
    ([{"path": "a"}, {"path": "a"}], [], "multiple DeclaredPodSets with path 'a'"),
    ([{"path": "a"}], [], None),
    ([{"path": "a"}], [{"path": "a"}, {"path": "b"}],
     "DeclaredPodSet count 1 differs from inferred count 2"),
    ([{"path": "b"}], [{"path": "a"}], "PodSet with path 'a' is missing"),
    ([{"path": "a", "replicas": 12}], [{"path": "a", "replicas": 4}],
     "replica count 12 differs from inferred count 4 for PodSet at path position 'a'"),
    ([{"path": "a", "annotations": {"k": "v"}}], [{"path": "a", "replicas": 1}], None),
])
def test_validate_pod_sets(declared: list[dict[str, Any]], inferred: list[dict[str, Any]],
                           message: str | None) -> None:
    """Upstream's ``ValidatePodSets`` messages (used by the webhook's rule 6b)."""
    assert validate_pod_sets(declared, inferred) == message


# --- the template Kueue sees -------------------------------------------------------------------


def test_pod_template_spec_defaults() -> None:
    """``GetPodTemplateSpec``: only the compared fields, with API-server defaults."""
    p = pod(cpu="100m")["template"]
    p["metadata"] = {"labels": {"a": "b", "n": 1}, "annotations": {"x": "y"}}
    p["spec"].update(volumes=[{"name": "v", "emptyDir": {}}], priority=7,
                     priorityClassName="high", nodeSelector={"k": "v"})
    p["spec"]["containers"][0]["env"] = [{"name": "E", "value": "1"}]
    got = get_pod_template_spec(p, "template")
    assert got == {
        "metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {
            "containers": [{
                "name": "busybox", "image": "quay.io/project-codeflare/busybox:1.36",
                "command": ["sh", "-c", "sleep 10"],
                "resources": {"requests": {"cpu": "100m"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "nodeSelector": {"k": "v"}, "securityContext": {},
            "schedulerName": "default-scheduler", "priorityClassName": "high",
            "preemptionPolicy": "PreemptLowerPriority"}}
    # The template itself is untouched.
    assert p["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


def test_pod_template_spec_quirks() -> None:
    """A set terminationGracePeriodSeconds is dropped (upstream's quirk); quantities are
    rounded up to milli precision; init containers are normalised too."""
    p = pod()["template"]
    p["spec"]["terminationGracePeriodSeconds"] = 5
    p["spec"]["initContainers"] = [{"name": "init", "image": "busybox",
                                    "resources": {"limits": {"cpu": "0.0001", "memory": "1Gi"}}}]
    got = get_pod_template_spec(p, "template")["spec"]
    assert "terminationGracePeriodSeconds" not in got
    assert got["initContainers"][0]["resources"] == {"limits": {"cpu": "1m", "memory": "1Gi"}}
    assert got["initContainers"][0]["imagePullPolicy"] == "Always"


@pytest.mark.parametrize(("image", "tag"), [
    ("busybox", "latest"), ("busybox:latest", "latest"), ("busybox:1.36", "1.36"),
    ("quay.io/org/busybox:1.36", "1.36"), ("localhost:5000/busybox", "latest"),
    ("busybox@sha256:" + "a" * 64, ""), ("busybox:1@sha256:" + "a" * 64, "1"),
    ("Busybox", ""), ("busybox@sha256:abc", ""), ("a" * 64, ""), ("", ""),
])
def test_image_tag(image: str, tag: str) -> None:
    """Docker reference parsing for the imagePullPolicy default."""
    assert image_tag(image) == tag


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda t: t.pop("spec"), "content at template does not contain a spec"),
    (lambda t: t["spec"].update(bogus=1),
     'content at template.spec not parseable as a v1.PodSpec: unknown field "bogus"'),
    (lambda t: t["spec"].update(containers="x"),
     "content at template.spec not parseable as a v1.PodSpec: containers: expected list, "
     "got string x"),
    (lambda t: t["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
     "content at template.spec not parseable as a v1.PodSpec: "
     "containers[0].resources.requests[cpu]: quantities must match"),
    (lambda t: t["spec"].update(terminationGracePeriodSeconds="30"),
     "content at template.spec not parseable as a v1.PodSpec: terminationGracePeriodSeconds: "
     "expected int"),
])
def test_pod_template_spec_errors(mutate: Any, message: str) -> None:
    """Content that is not a pod template: upstream's two messages, naming the field."""
    p = pod(cpu="1")["template"]
    mutate(p)
    with pytest.raises(TemplateError) as err:
        get_pod_template_spec(p, "template")
    assert str(err.value).startswith(message)


# --- PodSetInfos -------------------------------------------------------------------------------


def test_set_and_clear_pod_set_infos() -> None:
    """``SetPodSetInfos`` lines infos up with the effective PodSets across components;
    ``ClearPodSetInfos`` drops them all and always reports a change."""
    aw = appwrapper([pytorchjob(2), service(), pod()])
    infos = [{"nodeSelector": {"f": "1"}}, {"nodeSelector": {"f": "2"}},
             {"nodeSelector": {"f": "3"}}]
    set_pod_set_infos(aw, infos)
    comps = aw["spec"]["components"]
    assert comps[0]["podSetInfos"] == infos[:2]
    assert comps[1]["podSetInfos"] == []
    assert comps[2]["podSetInfos"] == infos[2:]
    infos[0]["nodeSelector"]["f"] = "changed"  # stored as copies
    assert comps[0]["podSetInfos"][0] == {"nodeSelector": {"f": "1"}}
    assert clear_pod_set_infos(aw) is True
    assert all("podSetInfos" not in c for c in comps)
    assert clear_pod_set_infos(aw) is True


def test_set_pod_set_infos_count_mismatch() -> None:
    """"expecting N podsets, got M" (Kueue wraps it as an invalid pod-set info)."""
    aw = appwrapper([pod(), pod()])
    with pytest.raises(PodSetCountError, match=r"^expecting 2 podsets, got 3$"):
        set_pod_set_infos(aw, [{}, {}, {}])
    with pytest.raises(PodSetCountError, match=r"^expecting 2 podsets, got 1$"):
        set_pod_set_infos(aw, [{"labels": {"a": "b"}}])
    assert aw["spec"]["components"][0]["podSetInfos"] == [{"labels": {"a": "b"}}]


# --- injection -----------------------------------------------------------------------------------


def _admitted(components: list[dict[str, Any]], infos: list[dict[str, Any]]) -> dict[str, Any]:
    aw = appwrapper(components, name="aw", namespace="ns1")
    set_pod_set_infos(aw, infos)
    return aw


def test_inject_minimal_pod() -> None:
    """Upstream controller test "Validating PodSetInfo injection: minimal pods" (AU-5):
    the AppWrapper label and every marker field land on the pod."""
    aw = _admitted([pod()], [MARKER])
    before = copy.deepcopy(aw)
    obj = inject_pod_set_infos(aw, 0)
    assert aw == before
    meta = obj["metadata"]
    assert meta["namespace"] == "ns1"
    assert meta["labels"] == {APPWRAPPER_LABEL: "aw", "testkey1": "value1"}
    assert meta["annotations"] == {"test2": "test2"}
    assert obj["spec"]["nodeSelector"] == {"nodeName": "myNode"}
    assert obj["spec"]["tolerations"] == MARKER["tolerations"]
    assert obj["spec"]["schedulingGates"] == [{"name": "aGate"}]
    assert "ownerReferences" not in meta


def test_inject_preserves_complex_pod() -> None:
    """Upstream controller test "Validating PodSetInfo injection: complex pods" (AU-6):
    existing labels, annotations, selector, toleration and gate are kept."""
    p = pod()
    spec = p["template"]["spec"]
    p["template"]["metadata"] = {"name": "c", "labels": {"myComplexLabel": "myComplexValue"},
                                 "annotations": {"myComplexAnnotation": "myComplexValue"}}
    spec["nodeSelector"] = {"myComplexSelector": "myComplexValue"}
    spec["tolerations"] = [{"key": "myComplexKey", "operator": "Exists",
                            "effect": "NoSchedule"}]
    spec["schedulingGates"] = [{"name": "myComplexGate"}, {"name": "aGate"}]
    obj = inject_pod_set_infos(_admitted([p], [MARKER]), 0)
    assert obj["metadata"]["labels"] == {"myComplexLabel": "myComplexValue",
                                         APPWRAPPER_LABEL: "aw", "testkey1": "value1"}
    assert obj["metadata"]["annotations"] == {"myComplexAnnotation": "myComplexValue",
                                              "test2": "test2"}
    assert obj["spec"]["nodeSelector"] == {"myComplexSelector": "myComplexValue",
                                           "nodeName": "myNode"}
    assert obj["spec"]["tolerations"] == [spec["tolerations"][0], MARKER["tolerations"][0]]
    # Gates are de-duplicated by name; tolerations are not.
    assert obj["spec"]["schedulingGates"] == [{"name": "myComplexGate"}, {"name": "aGate"}]
    twice = _admitted([p], [{**MARKER, "tolerations": spec["tolerations"]}])
    assert len(inject_pod_set_infos(twice, 0)["spec"]["tolerations"]) == 2


def test_inject_deployment_labels_object_and_template() -> None:
    """The object keeps its own label value; the pod template gets the AppWrapper label,
    the info's labels winning over it in the wanted set."""
    d = deployment(2)
    d["template"]["metadata"]["labels"] = {APPWRAPPER_LABEL: "keep-me"}
    obj = inject_pod_set_infos(_admitted([d], [{"labels": {"team": "a"}}]), 0)
    assert obj["metadata"]["labels"] == {APPWRAPPER_LABEL: "keep-me"}
    assert obj["spec"]["template"]["metadata"]["labels"] == {
        "app": "deployment", APPWRAPPER_LABEL: "aw", "team": "a"}
    # Without infos the AppWrapper label is still injected; annotations untouched.
    obj = inject_pod_set_infos(appwrapper([deployment(1)], name="aw"), 0)
    assert obj["spec"]["template"]["metadata"] == {"labels": {"app": "deployment",
                                                              APPWRAPPER_LABEL: "aw"}}


def test_inject_creates_missing_metadata() -> None:
    """A pod template without metadata (or with null) gets one."""
    d = deployment(1)
    d["template"]["spec"]["template"]["metadata"] = None
    obj = inject_pod_set_infos(appwrapper([d], name="aw"), 0)
    assert obj["spec"]["template"]["metadata"] == {"labels": {APPWRAPPER_LABEL: "aw"}}


@pytest.mark.parametrize(("where", "info", "message"), [
    ("labels", {"labels": {"k": "new"}},
     "conflict updating labels: conflict for key=k, value1=old, value2=new"),
    ("annotations", {"annotations": {"k": "new"}},
     "conflict updating annotations: conflict for key=k, value1=old, value2=new"),
    ("nodeSelector", {"nodeSelector": {"k": "new"}},
     "conflict updating nodeSelector: conflict for key=k, value1=old, value2=new"),
])
def test_inject_conflicts(where: str, info: dict[str, Any], message: str) -> None:
    """A key present with another value is a (fatal) conflict, as upstream's HaveConflict."""
    p = pod()
    if where == "nodeSelector":
        p["template"]["spec"]["nodeSelector"] = {"k": "old"}
    else:
        p["template"]["metadata"] = {where: {"k": "old"}}
    with pytest.raises(InjectionError) as err:
        inject_pod_set_infos(_admitted([p], [info]), 0)
    assert str(err.value) == message


def test_inject_label_conflict_with_appwrapper_label() -> None:
    """A pod template labelled for another AppWrapper cannot be injected."""
    d = deployment(1)
    d["template"]["spec"]["template"]["metadata"]["labels"][APPWRAPPER_LABEL] = "other"
    with pytest.raises(InjectionError, match=f"key={APPWRAPPER_LABEL}, value1=other, "
                                             f"value2=aw"):
        inject_pod_set_infos(appwrapper([d], name="aw"), 0)


def test_inject_stringifies_existing_values() -> None:
    """Non-string existing values are printed as Go's %v, then compared."""
    p = pod()
    p["template"]["metadata"] = {"annotations": {"n": 1, "f": 1.5, "b": True}}
    obj = inject_pod_set_infos(_admitted([p], [{"annotations": {"n": "1", "z": "z"}}]), 0)
    assert obj["metadata"]["annotations"] == {"n": "1", "f": "1.5", "b": "true", "z": "z"}


def test_inject_namespace_rules() -> None:
    """Empty namespace → the AppWrapper's; another namespace is an error."""
    p = pod()
    p["template"]["metadata"] = {"namespace": "ns1"}
    assert inject_pod_set_infos(appwrapper([p], namespace="ns1"), 0)["metadata"][
        "namespace"] == "ns1"
    p["template"]["metadata"] = {"namespace": "other"}
    with pytest.raises(InjectionError, match=re.escape(
            'component namespace "other" is different from appwrapper namespace "ns1"')):
        inject_pod_set_infos(appwrapper([p], namespace="ns1"), 0)


def test_inject_bad_shapes_are_errors() -> None:
    """Where upstream would panic (tolerations not a list) or fail (bad path), a clear error."""
    p = pod(declare=True)
    p["template"]["spec"]["tolerations"] = "nope"
    with pytest.raises(InjectionError, match=r"spec\.tolerations is not a list"):
        inject_pod_set_infos(_admitted([p], [MARKER]), 0)
    p["template"]["spec"]["tolerations"] = None  # null counts as empty
    assert inject_pod_set_infos(_admitted([p], [MARKER]), 0)["spec"]["tolerations"] == \
        MARKER["tolerations"]
    aw = appwrapper([component(pod()["template"], pod_sets=[{"path": "template.nope"}])])
    with pytest.raises(PathError, match="missing field 'nope'"):
        inject_pod_set_infos(aw, 0)
    with pytest.raises(InjectionError, match="component 3 does not exist"):
        inject_pod_set_infos(aw, 3)


def test_inject_uses_frozen_status_pod_sets() -> None:
    """The PodSets frozen in status decide where infos go (upstream reads the status)."""
    js = jobset(2)
    aw = appwrapper([js], name="aw")
    aw["status"] = {"componentStatus": [{
        "name": "", "kind": "", "apiVersion": "",
        "podSets": [{"path": "template.spec.replicatedJobs[1].template.spec.template"}]}]}
    aw["spec"]["components"][0]["podSetInfos"] = [{"labels": {"only": "second"}}]
    obj = inject_pod_set_infos(aw, 0)
    jobs = obj["spec"]["replicatedJobs"]
    assert "only" not in (jobs[0]["template"]["spec"]["template"].get("metadata") or {}).get(
        "labels", {})
    assert jobs[1]["template"]["spec"]["template"]["metadata"]["labels"]["only"] == "second"


# --- labels -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "clean"), [
    ("system:serviceaccount:ns:sa", "system_serviceaccount_ns_sa"),
    ("limited-user", "limited-user"),
    ("8da0fcfe-6d7f-4f44-b433-d91d22cc1b8c", "8da0fcfe-6d7f-4f44-b433-d91d22cc1b8c"),
    ("-_.weird@name._-", "weird_name"),
    ("x" * 70, "x" * 63),
    ("x" * 62 + "é", "x" * 62),  # cut inside 'é': one invalid byte → '_', then trimmed
    ("élan", "lan"),
    ("a@éb", "a__b"),
])
def test_sanitize_label(raw: str, clean: str) -> None:
    """Upstream's ``SanitizeLabel`` (webhook test "User name and ID" uses it, AW-3)."""
    assert sanitize_label(raw) == clean
