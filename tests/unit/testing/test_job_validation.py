"""batch/v1 Job update validation of the in-memory server (``ValidateJobSpecUpdate``).

The messages are those kube-apiserver 1.36.3 answered to the same requests, except the
rendering of structured values (the real server dumps its internal Go types).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobframework.runtime import errors
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, InMemoryClient, ManualClock

JOB = GVK("batch", "v1", "Job")


def job(name: str, *, suspend: bool, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"suspend": suspend, **spec, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}


@pytest.fixture
def strict(server: APIServer) -> APIServer:
    server.builtin_defaults = True
    return server


async def start(client: InMemoryClient, obj: dict[str, Any]) -> dict[str, Any]:
    """What the Job controller does when a Job runs: set ``status.startTime``."""
    obj = await client.get(JOB, obj["metadata"]["name"], namespace="default")
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 1}
    return await client.update_status(obj)


async def test_changing_a_started_jobs_containers_is_invalid(
    strict: APIServer, client: InMemoryClient,
) -> None:
    created = await client.create(job("j", suspend=False))
    running = await start(client, created)
    running["spec"]["suspend"] = True
    running["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    with pytest.raises(errors.Invalid) as exc:
        await client.update(running)
    message = str(exc.value)
    assert message.startswith('Job.batch "j" is invalid: spec.template: Invalid value: {')
    assert message.endswith(": field is immutable")
    assert '"image":"other"' in message  # the value shown is the requested template
    causes = exc.value.details["causes"]
    assert [c["field"] for c in causes] == ["spec.template"]
    stored = await client.get(JOB, "j", namespace="default")
    assert stored["spec"]["suspend"] is False


async def test_suspending_and_restoring_a_started_job_in_one_update_is_invalid(
    strict: APIServer, client: InMemoryClient,
) -> None:
    # The eviction bug: a started Job with injected scheduling directives is suspended
    # and its template restored in the same write.
    created = await client.create(job("j", suspend=True))
    created["spec"]["suspend"] = False
    created["spec"]["template"]["spec"]["nodeSelector"] = {"flavor": "spot"}
    await client.update(created)
    running = await start(client, created)
    running["spec"]["suspend"] = True
    del running["spec"]["template"]["spec"]["nodeSelector"]
    with pytest.raises(errors.Invalid, match=r"spec\.template: Invalid value: .*immutable"):
        await client.update(running)
    # Kueue's way: suspend, clear startTime through status, then restore.
    running = await client.get(JOB, "j", namespace="default")
    running["spec"]["suspend"] = True
    running = await client.update(running)
    del running["status"]["startTime"]
    running = await client.update_status(running)
    del running["spec"]["template"]["spec"]["nodeSelector"]
    restored = await client.update(running)
    assert "nodeSelector" not in restored["spec"]["template"]["spec"]


async def test_scheduling_directives_of_a_suspended_never_started_job_may_change(
    strict: APIServer, client: InMemoryClient,
) -> None:
    created = await client.create(job("j", suspend=True))
    template = created["spec"]["template"]
    template["metadata"]["labels"]["q"] = "r"
    template["metadata"]["annotations"] = {"a": "b"}
    template["spec"].update({
        "nodeSelector": {"a": "b"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "schedulingGates": [{"name": "g"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Exists"}]}]}}},
    })
    created["spec"]["suspend"] = False  # resuming counts: the stored Job is suspended
    resumed = await client.update(created)
    assert resumed["spec"]["template"]["spec"]["nodeSelector"] == {"a": "b"}
    # Suspended again (not started: no startTime), node affinity may be cleared ...
    await client.patch(JOB, "j", {"spec": {"suspend": True}},
                       namespace="default")
    cleared = await client.patch(JOB, "j", {"spec": {"template": {"spec": {"affinity": None}}}},
                                 namespace="default")
    assert "affinity" not in cleared["spec"]["template"]["spec"]
    # ... but other affinity, and everything else in the pod spec, stays immutable.
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "j", {"spec": {"template": {"spec": {"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone"}]}}}}}}, namespace="default")
    assert [c["field"] for c in exc.value.details["causes"]] == ["spec.template.spec"]
    with pytest.raises(errors.Invalid, match=r'spec.template.spec: Invalid value: \{.*"image":'
                                             r'"other".*\}: field is immutable'):
        await client.patch(JOB, "j", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "other"}]}}}}, namespace="default")


async def test_scheduling_directives_are_immutable_after_start(
    strict: APIServer, client: InMemoryClient,
) -> None:
    created = await client.create(job("j", suspend=True))
    await start(client, created)
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "j", {"spec": {"template": {"spec": {
            "nodeSelector": {"c": "d"}}}}}, namespace="default")
    assert [c["field"] for c in exc.value.details["causes"]] == ["spec.template"]
    # Not suspended, never started: immutable as well.
    await client.create(job("k", suspend=False))
    with pytest.raises(errors.Invalid, match=r"spec\.template: "):
        await client.patch(JOB, "k", {"spec": {"template": {"metadata": {
            "labels": {"q": "r"}}}}}, namespace="default")


async def test_selector_completion_mode_and_completions(
    strict: APIServer, client: InMemoryClient,
) -> None:
    await client.create(job("j", suspend=False))
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "j", {"spec": {"completions": 3}},
                           namespace="default")
    assert str(exc.value) == (
        'Job.batch "j" is invalid: spec.completions: Invalid value: 3: field is immutable')
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "j", {"spec": {"completionMode": "Indexed"}},
                           namespace="default")
    assert str(exc.value) == ('Job.batch "j" is invalid: spec.completionMode: '
                              'Invalid value: "Indexed": field is immutable')
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "j", {"spec": {"selector": {"matchLabels": {"x": "y"}}}},
                           namespace="default")
    assert "spec.selector" in [c["field"] for c in exc.value.details["causes"]]
    # Parallelism alone may change.
    scaled = await client.patch(JOB, "j", {"spec": {"parallelism": 3}},
                                namespace="default")
    assert scaled["spec"]["parallelism"] == 3
    # Elastic indexed jobs: completions change together with parallelism.
    await client.create(job("ix", suspend=False, completionMode="Indexed", completions=2,
                            parallelism=2))
    grown = await client.patch(JOB, "ix", {"spec": {"completions": 3, "parallelism": 3}},
                               namespace="default")
    assert grown["spec"]["completions"] == 3
    with pytest.raises(errors.Invalid) as exc:
        await client.patch(JOB, "ix", {"spec": {"completions": 4}},
                           namespace="default")
    assert str(exc.value) == ('Job.batch "ix" is invalid: spec.completions: Invalid value: 4: '
                              "can only be modified in tandem with spec.parallelism")


async def test_status_writes_and_unchecked_servers_are_not_validated(
    server: APIServer, client: InMemoryClient,
) -> None:
    # Without builtin_defaults the server validates no built-in kind beyond ObjectMeta.
    created = await client.create(job("j", suspend=False))
    running = await start(client, created)
    running["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert (await client.update(running))["spec"]["template"]["spec"]["containers"][0][
        "image"] == "other"
    server.builtin_defaults = True
    # A status write leaves the spec alone, so it never trips the spec rules.
    running = await client.get(JOB, "j", namespace="default")
    running["status"]["active"] = 0
    assert (await client.update_status(running))["status"]["active"] == 0


_DIRECTIVES: dict[str, Any] = {
    "nodeSelector": {"flavor": "spot"},
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulingGates": [{"name": "example.com/gate"}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}}]}},
}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changed=st.sets(st.sampled_from(sorted(_DIRECTIVES)), min_size=1),
       suspended=st.booleans(), started=st.booleans(), also_image=st.booleans())
async def test_directive_changes_are_allowed_exactly_when_suspended_and_not_started(
    changed: set[str], suspended: bool, started: bool, also_image: bool,
) -> None:
    server = APIServer(ManualClock(), builtin_defaults=True)
    client = server.client()
    created = await client.create(job("j", suspend=suspended))
    current = await start(client, created) if started else created
    pod_spec = current["spec"]["template"]["spec"]
    for key in changed:
        pod_spec[key] = _DIRECTIVES[key]
    if also_image:
        pod_spec["containers"][0]["image"] = "other"
    allowed = suspended and not started and not also_image
    try:
        await client.update(current)
    except errors.Invalid as exc:
        assert not allowed, exc
        field = "spec.template.spec" if suspended and not started else "spec.template"
        assert [c["field"] for c in exc.details["causes"]] == [field]
    else:
        assert allowed
