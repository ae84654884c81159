"""The AppWrapper phase machine on the in-memory server: upstream's
``appwrapper_controller_test.go`` ("AppWrapper Controller") and the lifecycle paths its
suite leaves implicit (deletion, managedBy, generateName, ownership checks)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.appwrapper.api import (
    APPWRAPPER_GVK,
    APPWRAPPER_LABEL,
    AppWrapperCondition,
)
from jobframework.runtime.errors import Conflict, new_invalid
from jobframework.runtime.objects import Object

from .controller_helpers import (
    JOB_GVK,
    MARKER,
    NS,
    POD_GVK,
    Harness,
    appwrapper,
    complex_pod,
    harness_fixture,  # noqa: F401  (fixture "h")
    job,
    malformed_pod,
    pod,
    server_fixture,  # noqa: F401  (fixture "server")
    transition_time,
)

QR = AppWrapperCondition.QUOTA_RESERVED
RD = AppWrapperCondition.RESOURCES_DEPLOYED
PR = AppWrapperCondition.PODS_READY
UH = AppWrapperCondition.UNHEALTHY
DR = AppWrapperCondition.DELETING_RESOURCES


def brief(c: dict[str, Any]) -> tuple[str, str, str]:
    return c.get("status", ""), c.get("reason", ""), c.get("message", "")


async def test_happy_path_lifecycle(h: Harness) -> None:
    """Upstream "Happy Path Lifecycle": to Succeeded, then resources removed after the
    TTL (0 in upstream's test config); conditions checked with their reasons/messages."""
    await h.create(appwrapper("aw", pod("p1", 100, 1, True), pod("p2", 100, 0, False)))
    await h.reconcile()
    aw = await h.get()
    assert aw["status"]["phase"] == "Suspended"
    # Declared PodSets verbatim; the Pod's inferred one (replicas 1, path template).
    assert aw["status"]["componentStatus"] == [
        {"name": "", "kind": "", "apiVersion": "",
         "podSets": [{"replicas": 1, "path": "template"}]}] * 2
    assert "conditions" not in aw["status"]
    assert "finalizers" not in aw["metadata"], "nothing deployed yet"

    await h.admit([MARKER, MARKER])
    await h.reconcile()
    assert await h.phase() == "Resuming"
    for type_, status in ((QR, "True"), (RD, "True"), (PR, "False"), (UH, "False")):
        assert brief(await h.cond(type_)) == (status, "Resuming", "Suspend is false")
    deployed_at = transition_time(await h.cond(RD))

    await h.begin_running()
    aw = await h.get()
    assert [(cs["name"], cs["kind"], cs["apiVersion"]) for cs in aw["status"]["componentStatus"]] \
        == [("p1", "Pod", "v1"), ("p2", "Pod", "v1")]
    for cs in aw["status"]["componentStatus"]:
        (c,) = cs["conditions"]
        assert (c["type"], c["status"], c["reason"]) == (
            "ResourcesDeployed", "True", "ComponentCreatedSuccessfully")
    assert brief(await h.cond(PR)) == ("False", "Resuming", "Suspend is false"), \
        "PodsReady was never True, so it is not cleared"

    h.clock.advance(3)
    await h.fully_running()
    assert brief(await h.cond(PR)) == ("True", "SufficientPodsReady",
                                       "2 pods running; 0 pods succeeded")

    await h.set_pod_phase("Succeeded", 1)
    await h.reconcile()
    assert await h.phase() == "Running"
    summary = await h.rec.pod_status(await h.get())
    assert (summary.expected, summary.running, summary.succeeded) == (2, 1, 1)
    assert brief(await h.cond(PR)) == ("True", "SufficientPodsReady",
                                       "1 pods running; 1 pods succeeded")

    await h.set_pod_phase("Succeeded", 2)
    await h.reconcile()
    msg = "2 pods succeeded and no running, pending, or failed pods"
    assert await h.phase() == "Succeeded"
    assert brief(await h.cond(QR)) == ("False", "Succeeded", msg)
    assert brief(await h.cond(RD)) == ("True", "Succeeded", msg)
    assert transition_time(await h.cond(RD)) == deployed_at, "status unchanged: same timestamp"

    # Resources are removed after the TTL expires (two passes: delete, then see them gone).
    await h.reconcile()
    await h.reconcile()
    assert brief(await h.cond(RD)) == ("False", "Succeeded",
                                       "Time to live after success of 0s expired")
    assert await h.pods() == []
    assert await h.phase() == "Succeeded"
    assert h.events() == []
    await h.delete_and_finalize()


async def test_running_workloads_can_be_suspended(h: Harness) -> None:
    """Upstream "Running Workloads can be Suspended"."""
    await h.advance_to_resuming("aw", pod("p1", 100, 0), pod("p2", 100, 1, True))
    await h.begin_running()
    await h.fully_running()

    await h.suspend()
    await h.reconcile()
    aw = await h.get()
    assert aw["spec"]["suspend"] is True
    assert aw["status"]["phase"] == "Suspending"
    assert await h.is_true(RD) and await h.is_true(QR)
    assert h.events() == [("Normal", "ExternallySuspended", "Suspending",
                           "Externally suspended while in the Running phase")]

    await h.reconcile()  # initiate deletion
    assert await h.phase() == "Suspending"
    assert brief(await h.cond(DR)) == ("True", "DeletionInitiated", "")
    await h.reconcile()  # see deletion has completed
    assert await h.phase() == "Suspended"
    assert brief(await h.cond(RD)) == ("False", "Suspended", "Suspend is true")
    assert brief(await h.cond(QR)) == ("False", "Suspended", "Suspend is true")
    assert brief(await h.cond(PR)) == ("False", "Suspended", "")
    assert brief(await h.cond(UH)) == ("False", "Resuming", "Suspend is false"), \
        "Unhealthy was False: clearCondition leaves it alone"
    assert brief(await h.cond(DR)) == ("False", "DeletionComplete", "")
    assert await h.pods() == []
    conditions = [cs["conditions"][0]["reason"]
                  for cs in (await h.get())["status"]["componentStatus"]]
    assert conditions == ["CompononetDeleted", "CompononetDeleted"]

    # Re-admitted: deployed again (same PodSets, fresh objects).
    await h.admit([MARKER, MARKER])
    await h.reconcile()
    assert await h.phase() == "Resuming"
    await h.reconcile()
    assert await h.phase() == "Running"
    assert len(await h.pods()) == 2
    await h.delete_and_finalize()


async def test_a_pod_failure_leads_to_a_failed_appwrapper(h: Harness) -> None:
    """Upstream "A Pod Failure leads to a failed AppWrapper" (retry limit 0, no grace)."""
    await h.advance_to_resuming("aw", pod("p1", 100, 0), pod("p2", 100, 0, True))
    await h.begin_running()
    await h.fully_running()

    await h.set_pod_phase("Failed", 1)
    await h.reconcile()  # detect failure
    aw = await h.get()
    assert aw["spec"]["suspend"] is False
    assert aw["status"]["phase"] == "Failed"
    assert await h.is_true(RD) and await h.is_true(QR)
    assert brief(await h.cond(UH)) == ("True", "FoundFailedPods", "")
    assert h.events() == [("Normal", "FoundFailedPods", "Unhealthy", "1 failed pods")]

    await h.reconcile()  # initiate deletion
    await h.reconcile()  # see deletion has completed
    aw = await h.get()
    assert aw["status"]["phase"] == "Failed"
    assert aw["spec"]["suspend"] is False
    assert brief(await h.cond(RD)) == ("False", "Failed", "Resources deleted for failed AppWrapper")
    assert brief(await h.cond(QR)) == ("False", "Failed", "No resources deployed")
    assert "resettingCount" not in aw["status"]
    await h.delete_and_finalize()


async def test_failure_during_resource_creation_leads_to_a_failed_appwrapper(
        h: Harness) -> None:
    """Upstream "Failure during resource creation leads to a failed AppWrapper": the API
    server rejects the image-less Pod as Invalid, which is fatal (the in-memory server does
    not validate Pod specs, so a fault plays kube-apiserver's validation)."""
    invalid = new_invalid("Pod", "bad", [{"reason": "FieldValueRequired",
                                          "field": "spec.containers[0].image",
                                          "message": "Required value"}])
    h.server.faults.fail("create", error=invalid, gvk=POD_GVK, name="bad")
    await h.advance_to_resuming("aw", pod("good", 100, 0), malformed_pod("bad"))

    await h.reconcile()
    aw = await h.get()
    assert aw["spec"]["suspend"] is False
    assert aw["status"]["phase"] == "Failed"
    assert await h.is_true(RD) and await h.is_true(QR)
    assert not await h.is_true(PR)
    detail = ('error creating components: Pod "bad" is invalid: spec.containers[0].image: '
              'Required value')
    assert brief(await h.cond(UH)) == ("True", "CreateFailed", detail)
    assert h.events() == [("Normal", "CreateFailed", "Unhealthy", detail)]
    assert (await h.rec.pod_status(aw)).pending == 1, "the first component was created"
    statuses = aw["status"]["componentStatus"]
    assert [(cs["name"], cs["conditions"][0]["status"], cs["conditions"][0]["reason"])
            for cs in statuses] == [("good", "True", "ComponentCreatedSuccessfully"),
                                    ("bad", "False", "ComponentCreationErrored")]

    await h.reconcile()
    await h.reconcile()
    assert brief(await h.cond(RD)) == ("False", "Failed", "Resources deleted for failed AppWrapper")
    assert await h.pods() == []
    await h.delete_and_finalize()


def _validate_markers(p: Object) -> None:
    meta, spec = p["metadata"], p["spec"]
    for k, v in MARKER["annotations"].items():
        assert meta["annotations"][k] == v
    for k, v in MARKER["labels"].items():
        assert meta["labels"][k] == v
    for t in MARKER["tolerations"]:
        assert t in spec["tolerations"]
    for k, v in MARKER["nodeSelector"].items():
        assert spec["nodeSelector"][k] == v
    for g in MARKER["schedulingGates"]:
        assert g in spec["schedulingGates"]


def _validate_autopilot(h: Harness, p: Object) -> None:
    requests = p["spec"]["containers"][0]["resources"]["requests"]
    if str(requests.get("nvidia.com/gpu", "0")) == "0":
        assert "affinity" not in p["spec"]
        return
    node_affinity = p["spec"]["affinity"]["nodeAffinity"]
    terms = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
    assert h.config.autopilot is not None
    for taint in h.config.autopilot.resource_taints["nvidia.com/gpu"]:
        if taint.effect in ("NoExecute", "NoSchedule"):
            exprs = [e for e in terms[0]["matchExpressions"] if e["key"] == taint.key]
        else:
            exprs = [e for term in preferred for e in term["preference"]["matchExpressions"]
                     if e["key"] == taint.key]
        assert exprs, taint
        assert all(e["operator"] == "NotIn" for e in exprs)
        assert any(taint.value in e["values"] for e in exprs)


async def test_pod_set_injection_on_minimal_pods(h: Harness) -> None:
    """Upstream "Validating PodSet Injection invariants on minimal pods"."""
    await h.advance_to_resuming("aw", pod("p1", 100, 0), pod("p2", 100, 1, True))
    await h.begin_running()
    pods = await h.pods()
    assert len(pods) == 2
    for p in pods:
        assert p["metadata"]["labels"][APPWRAPPER_LABEL] == "aw"
        _validate_markers(p)
        _validate_autopilot(h, p)
    gpu = next(p for p in pods if p["metadata"]["name"] == "p2")
    node_affinity = gpu["spec"]["affinity"]["nodeAffinity"]
    # Deterministic here (config order); upstream's order follows Go map iteration.
    assert node_affinity == {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "autopilot.ibm.com/gpuhealth", "operator": "NotIn",
                 "values": ["TESTING", "EVICT"]},
                {"key": "extra", "operator": "NotIn", "values": ["test"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "autopilot.ibm.com/gpuhealth", "operator": "NotIn", "values": ["WARN"]},
                {"key": "extra2", "operator": "NotIn", "values": ["test2"]}]}}]}
    ref = gpu["metadata"]["ownerReferences"]
    aw = await h.get()
    assert ref == [{"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
                    "name": "aw", "uid": aw["metadata"]["uid"], "controller": True,
                    "blockOwnerDeletion": True}]
    await h.delete_and_finalize()


async def test_pod_set_injection_on_complex_pods(h: Harness) -> None:
    """Upstream "Validating PodSet Injection invariants on complex pods"."""
    await h.advance_to_resuming("aw", complex_pod("c1"), complex_pod("c2"))
    await h.begin_running()
    pods = await h.pods()
    assert len(pods) == 2
    for p in pods:
        assert p["metadata"]["labels"][APPWRAPPER_LABEL] == "aw"
        _validate_markers(p)
        _validate_autopilot(h, p)
        assert p["metadata"]["labels"]["myComplexLabel"] == "myComplexValue"
        assert p["metadata"]["annotations"]["myComplexAnnotation"] == "myComplexValue"
        assert p["spec"]["nodeSelector"]["myComplexSelector"] == "myComplexValue"
        assert {"key": "myComplexKey", "value": "myComplexValue", "operator": "Equal",
                "effect": "NoSchedule"} in p["spec"]["tolerations"]
        assert {"name": "myComplexGate"} in p["spec"]["schedulingGates"]
        exprs = p["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchExpressions"]
        assert exprs[0] == {"key": "kubernetes.io/hostname", "operator": "NotIn",
                            "values": ["badHost1"]}, "the user's expression stays first"
    await h.delete_and_finalize()


async def test_scheduler_name_injected_only_where_unset(server: Any) -> None:
    """``schedulerName`` from the config goes to pod templates that set none (upstream's
    createComponent; no upstream unit test)."""
    import attrs

    from .controller_helpers import upstream_test_config
    h = Harness(server, attrs.evolve(upstream_test_config(), scheduler_name="my-sched"))
    own = pod("own")
    own["template"]["spec"]["schedulerName"] = "theirs"
    await h.advance_to_resuming("aw", pod("plain"), own)
    await h.reconcile()
    by_name = {p["metadata"]["name"]: p for p in await h.pods()}
    assert by_name["plain"]["spec"]["schedulerName"] == "my-sched"
    assert by_name["own"]["spec"]["schedulerName"] == "theirs"


async def test_deletion_removes_resources_then_the_finalizer(h: Harness) -> None:
    """Upstream's ``AfterEach`` (AU-18): delete a deployed AppWrapper; the first pass
    deletes, the second sees everything gone, sets the Terminating conditions and drops
    the finalizer, so the object disappears."""
    await h.advance_to_resuming("aw", pod("p1"), pod("p2"))
    await h.begin_running()
    await h.api.delete(APPWRAPPER_GVK, "aw", namespace=NS)
    assert (await h.get())["metadata"]["deletionTimestamp"]

    result = await h.reconcile()
    assert result.requeue_after == 5.0
    aw = await h.get()
    assert aw["status"]["phase"] == "Terminating"
    assert brief(await h.cond(DR)) == ("True", "DeletionInitiated", "")
    assert await h.pods() == [], "the in-memory server removes pods at once"

    patches: list[Any] = []
    real_patch = h.api.patch

    async def spy(*a: Any, **kw: Any) -> Any:
        patches.append(a[2])
        return await real_patch(*a, **kw)
    h.client.patch = spy  # type: ignore[method-assign]
    assert (await h.reconcile()).is_zero()
    (patch,) = patches
    conds = {c["type"]: brief(c) for c in patch["status"]["conditions"]}
    assert conds["ResourcesDeployed"] == ("False", "Terminating", "Resources successfully deleted")
    assert conds["QuotaReserved"] == ("False", "Terminating", "No resources deployed")
    assert conds["DeletingResources"] == ("False", "DeletionComplete", "")
    assert h.server.objects(APPWRAPPER_GVK, NS) == []


async def test_deletion_of_a_suspended_appwrapper_without_finalizer(h: Harness) -> None:
    """An AppWrapper never deployed has no finalizer: it is gone at once and a reconcile
    of the missing object is a no-op (upstream: Get error ends the pass)."""
    await h.create(appwrapper("aw", pod("p1")))
    await h.reconcile()
    await h.api.delete(APPWRAPPER_GVK, "aw", namespace=NS)
    assert h.server.objects(APPWRAPPER_GVK, NS) == []
    assert (await h.reconcile()).is_zero()


@pytest.mark.parametrize("managed_by", ["kueue.x-k8s.io/multikueue", ""])
async def test_foreign_managed_by_is_ignored(h: Harness, managed_by: str) -> None:
    """``spec.managedBy`` other than the AppWrapper controller (even ``""``): the
    controller does nothing at all (upstream's Reconcile guard)."""
    await h.create(appwrapper("aw", pod("p1"), suspend=False, managed_by=managed_by))
    before = await h.get()
    for _ in range(3):
        assert (await h.reconcile()).is_zero()
    assert await h.get() == before
    assert await h.pods() == []


async def test_own_managed_by_is_reconciled(h: Harness) -> None:
    """``managedBy: workload.codeflare.dev/appwrapper-controller`` is ours."""
    await h.create(appwrapper("aw", pod("p1"), suspend=False,
                              managed_by="workload.codeflare.dev/appwrapper-controller"))
    await h.reconcile()
    await h.reconcile()
    await h.reconcile()
    assert await h.phase() == "Running"
    await h.delete_and_finalize()


async def test_externally_deleted_component_fails_without_retry(h: Harness) -> None:
    """A component deleted out of band fails the AppWrapper at once, no grace and no
    retry even with retries left (upstream's MissingComponent; e2e "Deleting a Running
    Component")."""
    import attrs
    h.configure(attrs.evolve(h.config, fault_tolerance=attrs.evolve(
        h.config.fault_tolerance, retry_limit=3)))
    await h.advance_to_resuming("aw", job("j1"), pod("p1"))
    await h.reconcile()
    await h.create_job_pods("j1", 1)
    await h.api.delete(JOB_GVK, "j1", namespace=NS)
    await h.reconcile()
    assert await h.phase() == "Failed"
    detail = "Only found 1 deployed components, but was expecting 2"
    assert brief(await h.cond(UH)) == ("True", "MissingComponent", detail)
    assert h.events() == [("Normal", "MissingComponent", "Unhealthy", detail)]
    assert "resettingCount" not in (await h.get())["status"]
    await h.delete_and_finalize()


async def test_generate_name_component_records_the_generated_name(h: Harness) -> None:
    """A template with ``generateName``: the name is empty until Create returns, then
    recorded (upstream updates it after Create to support generateName)."""
    component = pod("")
    del component["template"]["metadata"]["name"]
    component["template"]["metadata"]["generateName"] = "gen-"
    await h.advance_to_resuming("aw", component)
    await h.reconcile()
    (cs,) = (await h.get())["status"]["componentStatus"]
    assert cs["name"].startswith("gen-") and len(cs["name"]) == len("gen-") + 5
    (p,) = await h.pods()
    assert p["metadata"]["name"] == cs["name"]
    await h.delete_and_finalize()


async def test_existing_object_controlled_by_this_appwrapper_is_adopted(h: Harness) -> None:
    """AlreadyExists with a controller reference naming this AppWrapper is success (a
    create retried after a lost response)."""
    await h.advance_to_resuming("aw", pod("p1"))
    aw = await h.get()
    await h.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p1", "namespace": NS, "labels": {APPWRAPPER_LABEL: "aw"},
        "ownerReferences": [{"apiVersion": "workload.codeflare.dev/v1beta2",
                             "kind": "AppWrapper", "name": "aw", "uid": aw["metadata"]["uid"],
                             "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await h.reconcile()
    assert await h.phase() == "Running"
    (cs,) = (await h.get())["status"]["componentStatus"]
    assert cs["conditions"][0]["reason"] == "ComponentCreatedSuccessfully"
    await h.delete_and_finalize()


async def test_existing_object_not_controlled_by_the_appwrapper_is_fatal(h: Harness) -> None:
    """AlreadyExists without our controller reference: fatal CreateFailed → Failed. The
    component is recorded as not created, so cleanup leaves the foreign pod alone
    (deviation: upstream leaves it Unknown with its name and later deletes it)."""
    await h.api.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "p1", "namespace": NS},
                        "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await h.advance_to_resuming("aw", pod("p1"))
    await h.reconcile()
    assert await h.phase() == "Failed"
    assert brief(await h.cond(UH)) == (
        "True", "CreateFailed",
        "error creating components: resource p1 exists, but is not controlled by appwrapper")
    (cs,) = (await h.get())["status"]["componentStatus"]
    assert brief(cs["conditions"][0]) == ("False", "ComponentCreationErrored", "")
    await h.reconcile()
    await h.reconcile()
    assert await h.api.get(POD_GVK, "p1", namespace=NS), "someone else's pod is left alone"
    assert brief(await h.cond(RD))[0] == "False"


async def test_unknown_kind_is_a_fatal_create_failure(h: Harness) -> None:
    """A component of a kind the server does not serve (NoKindMatch) fails the AppWrapper
    without retry, and its status records the attempt."""
    crd_thing = {"template": {"apiVersion": "example.com/v1", "kind": "Widget",
                              "metadata": {"name": "w"}, "spec": {}},
                 "podSets": [{"path": "template.spec.pod", "replicas": 1}]}
    crd_thing["template"]["spec"]["pod"] = {"spec": {"containers": [{"name": "c",
                                                                     "image": "x"}]}}
    await h.advance_to_resuming("aw", pod("p1"), crd_thing)
    await h.reconcile()
    assert await h.phase() == "Failed"
    status, reason, message = brief(await h.cond(UH))
    assert (status, reason) == ("True", "CreateFailed")
    assert message == ('error creating components: no matches for kind "Widget" in version '
                       '"example.com/v1"')
    cs = (await h.get())["status"]["componentStatus"][1]
    assert (cs["name"], cs["kind"], cs["apiVersion"]) == ("w", "Widget", "example.com/v1")
    assert cs["conditions"][0]["reason"] == "ComponentCreationErrored"
    await h.reconcile()
    await h.reconcile()
    assert not await h.is_true(RD) and not await h.is_true(QR)
    await h.delete_and_finalize()


async def test_label_conflict_is_a_fatal_create_failure(h: Harness) -> None:
    """A pod template whose AppWrapper label names another AppWrapper cannot be injected:
    fatal, the object is never created."""
    component = pod("p1")
    component["template"]["metadata"]["labels"] = {APPWRAPPER_LABEL: "someone-else"}
    await h.advance_to_resuming("aw", component)
    await h.reconcile()
    assert await h.phase() == "Failed"
    status, reason, message = brief(await h.cond(UH))
    assert (status, reason) == ("True", "CreateFailed")
    assert message.startswith("error creating components: conflict updating labels")
    assert h.server.objects(POD_GVK, NS) == []
    (cs,) = (await h.get())["status"]["componentStatus"]
    assert "conditions" not in cs, "injection failed before any create attempt"


async def test_bad_pod_set_path_is_a_fatal_create_failure(h: Harness) -> None:
    """A frozen PodSet path that leads nowhere (an AppWrapper whose components were
    changed past the webhook after the first phase checked them): fatal CreateFailed,
    nothing created, the controller carries on to Failed."""
    await h.advance_to_resuming("aw", pod("p1"))
    aw = await h.get()
    aw["status"]["componentStatus"][0]["podSets"][0]["path"] = "template.spec.missing"
    await h.api.update_status(aw)
    await h.reconcile()
    assert await h.phase() == "Failed"
    status, reason, _ = brief(await h.cond(UH))
    assert (status, reason) == ("True", "CreateFailed")
    assert h.server.objects(POD_GVK, NS) == []
    await h.reconcile()
    assert brief(await h.cond(QR)) == ("False", "Failed", "No resources deployed")
    await h.delete_and_finalize()


async def test_foreign_namespace_component_is_a_fatal_create_failure(h: Harness) -> None:
    """A template in another namespace (changed past the webhook after the first phase
    checked it) is never created elsewhere: fatal CreateFailed."""
    await h.advance_to_resuming("aw", pod("p1"))
    aw = await h.get()
    aw["spec"]["components"][0]["template"]["metadata"]["namespace"] = "other"
    await h.api.update(aw)
    await h.reconcile()
    assert await h.phase() == "Failed"
    status, reason, message = brief(await h.cond(UH))
    assert (status, reason) == ("True", "CreateFailed")
    assert message == ('error creating components: component namespace "other" is different '
                       'from appwrapper namespace "default"')
    assert h.server.objects(POD_GVK) == []


async def test_deleting_while_resetting_releases_the_kept_quota(h: Harness) -> None:
    """Deleted during a reset's pause (resources gone, quota still held): QuotaReserved
    turns False/Terminating and the finalizer goes, without any deletion step."""
    import attrs
    h.configure(attrs.evolve(h.config, fault_tolerance=attrs.evolve(
        h.config.fault_tolerance, retry_limit=1)))
    await h.advance_to_resuming("aw", pod("p1"), annotations={
        "workload.codeflare.dev.appwrapper/retryPausePeriodDuration": "10m"})
    await h.reconcile()
    await h.set_pod_phase("Failed", 1, exit_code=1)
    await h.reconcile()
    await h.reconcile()
    assert (await h.reconcile()).requeue_after == 600
    assert not await h.is_true(RD) and await h.is_true(QR)
    h.client.deletes.clear()
    await h.api.delete(APPWRAPPER_GVK, "aw", namespace=NS)
    patches: list[Any] = []
    real_patch = h.api.patch

    async def spy(*a: Any, **kw: Any) -> Any:
        patches.append(a[2])
        return await real_patch(*a, **kw)
    h.client.patch = spy  # type: ignore[method-assign]
    assert (await h.reconcile()).is_zero()
    assert h.client.deletes == []
    (patch,) = patches
    (qr,) = [c for c in patch["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert brief(qr) == ("False", "Terminating", "No resources deployed")
    assert h.server.objects(APPWRAPPER_GVK, NS) == []


async def test_deleting_a_suspended_appwrapper_that_ran_before(h: Harness) -> None:
    """Suspended after running: the finalizer is still there; deletion only removes it
    (nothing deployed, no quota held, no status write)."""
    await h.advance_to_resuming("aw", pod("p1"))
    await h.reconcile()
    await h.suspend()
    for _ in range(3):
        await h.reconcile()
    assert await h.phase() == "Suspended"
    rv = (await h.get())["metadata"]["resourceVersion"]
    await h.api.delete(APPWRAPPER_GVK, "aw", namespace=NS)
    assert (await h.get())["metadata"]["resourceVersion"] != rv
    h.client.deletes.clear()
    assert (await h.reconcile()).is_zero()
    assert h.client.deletes == []
    assert h.server.objects(APPWRAPPER_GVK, NS) == []


async def test_unhealthy_from_a_reset_is_cleared_by_a_healthy_pass(h: Harness) -> None:
    """Unhealthy stays True through Resetting and Resuming (it is the retry pause's
    anchor) and is cleared with FoundNoFailedPods by the first healthy Running pass."""
    import attrs
    h.configure(attrs.evolve(h.config, fault_tolerance=attrs.evolve(
        h.config.fault_tolerance, retry_limit=1)))
    await h.advance_to_resuming("aw", pod("p1"))
    await h.reconcile()
    await h.set_pod_phase("Failed", 1, exit_code=1)
    await h.reconcile()
    assert await h.phase() == "Resetting"
    await h.reconcile()
    await h.reconcile()
    assert await h.phase() == "Resuming"
    assert brief(await h.cond(UH)) == ("True", "FoundFailedPods", "")
    await h.reconcile()
    assert await h.phase() == "Running"
    assert await h.is_true(UH)
    await h.set_pod_phase("Running", 1)
    await h.reconcile()
    assert brief(await h.cond(UH)) == ("False", "FoundNoFailedPods", "")
    assert brief(await h.cond(PR))[:2] == ("True", "SufficientPodsReady")
    assert (await h.get())["status"]["resettingCount"] == 1
    await h.delete_and_finalize()


async def test_missing_component_is_checked_before_failed_components(h: Harness) -> None:
    """Upstream's order: a missing component fails at once even when another failed."""
    import attrs
    h.configure(attrs.evolve(h.config, fault_tolerance=attrs.evolve(
        h.config.fault_tolerance, retry_limit=3)))
    await h.advance_to_resuming("aw", job("j1"), job("j2"))
    await h.reconcile()
    await h.fail_job("j1")
    await h.api.delete(JOB_GVK, "j2", namespace=NS)
    await h.reconcile()
    assert await h.phase() == "Failed"
    assert brief(await h.cond(UH))[1] == "MissingComponent"


async def test_uninferable_component_fails_in_the_first_phase(h: Harness) -> None:
    """A PyTorchJob whose replicas are not an integer (the webhook would refuse it): no
    PodSets can be frozen; the first phase fails the AppWrapper, naming the field as the
    webhook does (upstream retries forever), and nothing is retried."""
    bad = {"template": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                        "metadata": {"name": "pt"},
                        "spec": {"pytorchReplicaSpecs": {"Master": {
                            "replicas": "two",
                            "template": {"spec": {"containers": [{"name": "c",
                                                                  "image": "x"}]}}}}}}}
    await h.create(appwrapper("aw", bad))
    assert (await h.reconcile()).is_zero()
    aw = await h.get()
    assert aw["status"]["phase"] == "Failed"
    assert "componentStatus" not in aw["status"]
    reason, message = brief(await h.cond(UH))[1:3]
    assert reason == "CreateFailed"
    assert message.startswith("error creating components: invalid spec: "
                              "[spec.components[0].template: Invalid value: "
                              "error inferring PodSets: "), message
    assert "'template.spec.pytorchReplicaSpecs.Master.replicas' non-int value two" in message
    assert ("Normal", "CreateFailed", "Unhealthy", message) in h.recorder.events
    await h.reconcile()
    assert (await h.get())["status"]["phase"] == "Failed", "terminal"


async def test_a_pass_from_a_stale_cache_cannot_overwrite_a_terminal_phase(h: Harness) -> None:
    """The fault suite's finding: a reconcile that read an AppWrapper before it succeeded
    (a lagging cache) and saw it suspended wrote ``Suspending`` over ``Succeeded``. Status
    patches carry the resourceVersion read, so that pass now fails with a Conflict and the
    terminal phase stays."""
    await h.create(appwrapper("aw", pod("p1", 100, 0, False), pod("p2", 100, 0, False)))
    await h.reconcile()
    await h.admit([MARKER, MARKER])
    await h.reconcile()
    await h.begin_running()
    h.clock.advance(3)
    await h.fully_running()
    assert await h.phase() == "Running"
    stale = await h.get()
    stale["spec"]["suspend"] = True  # what the lagging cache holds: Kueue's eviction
    await h.set_pod_phase("Succeeded", 2)
    await h.reconcile()
    assert await h.phase() == "Succeeded"

    real_get = h.client.get

    async def lagging_get(gvk: Any, name: str, *, namespace: str | None = None) -> Object:
        if gvk == APPWRAPPER_GVK:
            return copy.deepcopy(stale)
        return await real_get(gvk, name, namespace=namespace)

    h.client.get = lagging_get  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        await h.reconcile()
    h.client.get = real_get  # type: ignore[method-assign]
    assert await h.phase() == "Succeeded"
    await h.reconcile()
    assert await h.phase() == "Succeeded"


async def test_a_pod_component_created_behind_a_broken_connection_is_deleted_at_once(
        h: Harness) -> None:
    """The fault suite's finding: a Pod component's create reached the API server but its
    answer was lost, so the status says ``ComponentCreationErrored`` while the Pod runs.
    Suspending then deletes that Pod at once instead of waiting out the forceful-deletion
    grace period (10 minutes, upstream's behaviour) in ``Suspending``."""
    await h.advance_to_resuming("aw", pod("p1", 100, 0), pod("p2", 100, 0))
    await h.begin_running()
    aw = await h.get()
    statuses = aw["status"]["componentStatus"]
    # What the broken connection leaves: the second Pod exists, its status says otherwise.
    for c in statuses[1]["conditions"]:
        if c["type"] == "ResourcesDeployed":
            c.update(status="False", reason="ComponentCreationErrored")
    await h.api.update_status(aw)
    assert len(await h.pods()) == 2

    await h.suspend()
    await h.reconcile()
    assert await h.phase() == "Suspending"
    await h.reconcile()  # deletes p1, the tracked component
    await h.reconcile()  # p1 gone: deletes p2, the pod the AppWrapper controls
    assert await h.pods() == []
    assert {(d.kind, d.name, d.grace_period_seconds) for d in h.client.deletes} == {
        ("Pod", "p1", None), ("Pod", "p2", None)}, "graceful deletes, no forceful one"
    await h.reconcile()
    assert await h.phase() == "Suspended", "no wait for the forceful-deletion grace period"


async def test_pods_of_a_wrapped_job_are_left_to_their_job_while_suspending(
        h: Harness) -> None:
    """Only pods the AppWrapper controls directly are deleted as untracked components:
    a wrapped Job's pods go with their Job (the garbage collector's work)."""
    await h.advance_to_resuming("aw", job("j1", 2))
    await h.reconcile()
    assert await h.phase() == "Running"
    await h.create_job_pods("j1", 2)
    await h.suspend()
    await h.reconcile()
    assert await h.phase() == "Suspending"
    await h.reconcile()
    assert [(d.kind, d.name) for d in h.client.deletes] == [("Job", "j1")]
