"""Smoke tests through the real Kueue manager on the local cluster.

Uses the launcher's stdlib REST client (``ClusterInfo.client()``), not the
project's runtime client, so these tests check the cluster itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobframework.testing.cluster import (
    COMPLETE_DELAY_ANNOTATION,
    FAIL_ANNOTATION,
    FLAVOR_LABEL,
    QUEUE_LABEL,
    ClusterInfo,
)
from jobframework.testing.cluster.kube import Kube

pytestmark = pytest.mark.cluster

NS = "default"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
PODS = f"/api/v1/namespaces/{NS}/pods"
JSON = dict[str, Any]


@dataclass
class Api:
    """The launcher's REST client plus the Jobs a test created (deleted afterwards)."""

    kube: Kube
    created: list[str] = field(default_factory=list)

    def get(self, path: str) -> JSON | None:
        return self.kube.get(path)

    def request(self, method: str, path: str, body: JSON | None = None, **kw: Any) -> JSON:
        return self.kube.request(method, path, body, **kw)


@pytest.fixture
def kube(cluster_info: ClusterInfo) -> Iterator[Api]:
    api = Api(cluster_info.client())
    yield api
    for name in api.created:
        try:
            api.request("DELETE", f"{JOBS}/{name}", {"propagationPolicy": "Background"})
        except Exception as err:
            print(f"cleanup of Job {name} failed: {err}")


def eventually(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.25)


def condition(obj: JSON | None, ctype: str) -> JSON | None:
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: JSON | None, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def make_job(
    kube: Api,
    *,
    cpu: str = "1",
    pods: int = 1,
    run: str | None = None,
    fail: bool = False,
) -> JSON:
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    annotations = {}
    if run is not None:
        annotations[COMPLETE_DELAY_ANNOTATION] = run
    if fail:
        annotations[FAIL_ANNOTATION] = "true"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "user-queue"}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/fake:1",
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }
    created = kube.request("POST", JOBS, job)
    kube.created.append(name)
    return created


def workload_for(kube: Api, job: JSON) -> JSON | None:
    uid = job["metadata"]["uid"]
    items = kube.request(
        "GET", WORKLOADS, query={"labelSelector": f"kueue.x-k8s.io/job-uid={uid}"}
    ).get("items", [])
    return dict(items[0]) if items else None


def get_job(kube: Api, name: str) -> JSON:
    obj = kube.get(f"{JOBS}/{name}")
    assert obj is not None
    return obj


def test_job_is_suspended_admitted_run_on_kwok_and_finished(kube: Api) -> None:
    job = make_job(kube, pods=2)
    name = job["metadata"]["name"]
    # Kueue's mutating webhook suspended the Job on creation.
    assert job["spec"]["suspend"] is True

    wl = eventually("a Workload for the Job", lambda: workload_for(kube, job))
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", name, True)

    wl = eventually(
        "Workload admitted",
        lambda: (w := workload_for(kube, job)) and is_true(w, "Admitted") and w,
    )
    flavors = wl["status"]["admission"]["podSetAssignments"][0]["flavors"]
    flavor = flavors["cpu"]
    assert flavor in ("on-demand", "spot")

    running = eventually(
        "Job unsuspended", lambda: (j := get_job(kube, name))["spec"].get("suspend") is False and j
    )
    assert running["spec"]["template"]["spec"]["nodeSelector"] == {FLAVOR_LABEL: flavor}

    def pods() -> list[JSON]:
        sel = f"batch.kubernetes.io/job-name={name}"
        return list(kube.request("GET", PODS, query={"labelSelector": sel}).get("items", []))

    scheduled = eventually(
        "2 pods scheduled",
        lambda: (p := pods()) and len(p) == 2 and all(x["spec"].get("nodeName") for x in p) and p,
    )
    for pod in scheduled:
        assert pod["spec"]["nodeName"].startswith(f"kwok-{flavor}-")

    done = eventually("Job Complete", lambda: is_true(j := get_job(kube, name), "Complete") and j)
    assert done["status"]["succeeded"] == 2
    eventually("Workload Finished", lambda: is_true(workload_for(kube, job), "Finished"))
    assert all(p["status"]["phase"] == "Succeeded" for p in pods())


def admitted_probe(kube: Api, job: JSON) -> Callable[[], bool]:
    return lambda: is_true(workload_for(kube, job), "Admitted")


def test_job_that_does_not_fit_waits_for_quota(kube: Api) -> None:
    # Each flavor has 4 cpu of quota: two 4-cpu Jobs take both flavors, a third waits.
    first = make_job(kube, cpu="4", run="6s")
    second = make_job(kube, cpu="4", run="6s")
    for job in (first, second):
        eventually("big Jobs admitted", admitted_probe(kube, job))
    third = make_job(kube, cpu="4", run="1s")
    wl = eventually("third Workload", lambda: workload_for(kube, third))
    time.sleep(2)
    wl = workload_for(kube, third)
    assert not is_true(wl, "QuotaReserved")
    assert get_job(kube, third["metadata"]["name"])["spec"]["suspend"] is True

    eventually(
        "third Job admitted after the first ones finish",
        lambda: is_true(workload_for(kube, third), "Admitted"),
        timeout=90,
    )
    for job in (first, second):
        assert is_true(workload_for(kube, job), "Finished")
    eventually(
        "third Job Complete",
        lambda: is_true(get_job(kube, third["metadata"]["name"]), "Complete"),
    )


def test_annotated_pod_fails_and_workload_finishes_failed(kube: Api) -> None:
    job = make_job(kube, fail=True, run="500ms")
    name = job["metadata"]["name"]
    eventually("Job Failed", lambda: is_true(get_job(kube, name), "Failed"))
    wl = eventually(
        "Workload Finished", lambda: (w := workload_for(kube, job)) and is_true(w, "Finished") and w
    )
    finished = condition(wl, "Finished")
    assert finished is not None
    assert finished.get("reason") == "Failed"
