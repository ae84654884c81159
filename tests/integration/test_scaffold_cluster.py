"""A user's integration, from the scaffold to a manager on its generated RBAC, through real
Kueue.

The test does what a platform team does with a kind of its own: ``python -m
jobframework.scaffold`` writes the package into a temporary folder; it and this project
are built as wheels and installed into a fresh virtual environment (nothing of this
checkout on its path); ``python -m integrations.deploy render --integrations sample``
renders its deployment there; the rendered namespace, CRDs, ServiceAccount, RBAC and
webhook configurations (by URL, on loopback) are applied to a cluster of the test's own
whose Kueue lists the kind in ``externalFrameworks``; and the manager runs with the
Deployment's own arguments under a bound token of the generated ServiceAccount. A queued
``Sample`` is suspended on create, admitted by real Kueue, runs its pods and finishes with
its Workload, and the audit log shows no Forbidden request of the ServiceAccount.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import ClusterInfo, Topology

from .helpers import NS, QUEUE_LABEL, eventually, is_true, workload_of
from .test_rbac_cluster import (
    MANAGER_NS,
    _tolerant,
    apply_rendered,
    audit_requests,
    free_port,
    own_audited_cluster,
    service_account_user,
    token_kubeconfig,
)

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
GROUP = "scaffold.example.com"
SAMPLE_GVK = GVK(GROUP, "v1", "Sample")
FRAMEWORK_NAME = f"Sample.v1.{GROUP}"
TOPOLOGY = Topology(audit=True, external_frameworks=(FRAMEWORK_NAME,))
KUEUE_CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "namespace": "kueue-system", "manageJobsWithoutQueueName": False,
    "integrations": {"frameworks": list(TOPOLOGY.frameworks),
                     "externalFrameworks": [FRAMEWORK_NAME]},
}


@pytest.fixture(scope="module")
def audited_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[ClusterInfo, Path]]:
    """A cluster of this module's own: its Kueue lists ``Sample`` as external."""
    yield from own_audited_cluster(request, "scaffold", TOPOLOGY)


@pytest.fixture
async def admin(audited_cluster: tuple[ClusterInfo, Path]) -> AsyncIterator[RestClient]:
    async with await RestClient.from_kubeconfig(audited_cluster[0].kubeconfig) as c:
        yield c


async def run(*argv: str | Path, cwd: Path | None = None) -> str:
    """Run a command; its standard output, or a failure with its output."""
    proc = await asyncio.create_subprocess_exec(
        *map(str, argv), cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        # The fresh venv must see nothing of this checkout or of the test's environment.
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{' '.join(map(str, argv))} failed:\n{text[-4000:]}"
    return text


async def build_environment(tmp: Path) -> Path:
    """Scaffold the sample, build both wheels, install them into a fresh venv; its
    python."""
    project = tmp / "sample"
    await run(sys.executable, "-m", "jobframework.scaffold", "--group", GROUP,
              "--version", "v1", "--kind", "Sample", "--output", project)
    dist = tmp / "dist"
    await run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ROOT)
    await run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, project)
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 2, wheels
    await run(sys.executable, "-m", "venv", tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    await run(python, "-m", "pip", "install", "--quiet", *wheels)
    listed = await run(python, "-c", "from jobframework.plugins import installed_integrations;"
                                     "print(','.join(installed_integrations()))")
    assert listed.split() == ["appwrapper,batchjob,daemonjob,jobflow,sample"]
    return python


def rendered(directory: Path) -> dict[str, list[Object]]:
    return {path.name: [o for o in yaml.safe_load_all(path.read_text()) if o]
            for path in sorted(directory.glob("*.yaml"))}


def finished(obj: Object) -> str | None:
    """The reason of the Sample's true ``Finished`` condition."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Finished" and cond.get("status") == "True":
            return str(cond.get("reason"))
    return None


async def test_a_scaffolded_integration_runs_through_real_kueue_on_its_generated_rbac(
        admin: RestClient, audited_cluster: tuple[ClusterInfo, Path], tmp_path: Path) -> None:
    info, audit_log = audited_cluster
    python = await build_environment(tmp_path)
    await run(python, "-m", "integrations.deploy", "render", "--integrations", "sample",
              "--output", tmp_path / "deploy")
    files = rendered(tmp_path / "deploy")
    [patch] = files["kueue-config-patch.yaml"]
    assert patch["integrations"]["externalFrameworks"] == [FRAMEWORK_NAME]
    assert [c["metadata"]["name"] for c in files["crds.yaml"]] == [f"samples.{GROUP}"]
    webhook_port, probe_port = free_port(), free_port()
    args = await apply_rendered(admin, files, webhook_port, KUEUE_CONFIG,
                                field_manager="scaffold-test")
    assert args[args.index("--integrations") + 1] == "sample"
    sample = json.loads(await run(python, "-c", "import json, sample_integration as s;"
                                                f"print(json.dumps(s.probe_object('{NS}')))"))
    kubeconfig = await token_kubeconfig(admin, info, tmp_path / "sa.kubeconfig")
    log_path = tmp_path / "manager.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(python), "-m", "integrations", *args, "--kubeconfig", str(kubeconfig),
            "--webhook-port", str(webhook_port), "--cert-dns-name", "localhost",
            "--cert-dir", str(tmp_path / "certs"),
            "--health-probe-bind-address", f"127.0.0.1:{probe_port}",
            "--metrics-bind-address", f"127.0.0.1:{probe_port}",
            stdout=log, stderr=asyncio.subprocess.STDOUT)
        try:
            async def probe_admitted() -> bool:
                assert proc.returncode is None, log_path.read_text()[-3000:]
                out = await admin.create(sample, dry_run=True)
                return bool(out["spec"].get("suspend"))

            await eventually("the manager's webhooks to answer", _tolerant(probe_admitted), 180)
            sample["metadata"] = {"name": "scaffolded", "namespace": NS,
                                  "labels": {QUEUE_LABEL: "user-queue"}}
            for pod_set in sample["spec"].values():
                pod_set["template"]["spec"]["containers"][0]["resources"] = {
                    "requests": {"cpu": "100m"}}
            created = await admin.create(sample)
            assert created["spec"].get("suspend") is True, "the webhook did not suspend it"

            async def admitted() -> Object | None:
                obj = await admin.get(SAMPLE_GVK, "scaffolded", namespace=NS)
                wl = await workload_of(admin, obj)
                if wl is None or not is_true(wl, "Admitted") or obj["spec"].get("suspend"):
                    return None
                return wl

            wl = await eventually("real Kueue to admit the Sample and the manager to "
                                  "unsuspend it", admitted, 120)
            flavor = wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]
            assert flavor in ("on-demand", "spot")

            async def done() -> bool:
                obj = await admin.get(SAMPLE_GVK, "scaffolded", namespace=NS)
                wl = await workload_of(admin, obj)
                return finished(obj) == "Succeeded" and wl is not None and \
                    is_true(wl, "Finished")

            await eventually("the Sample and its Workload to finish", done, 180)
            jobs = (await admin.list(GVK("batch", "v1", "Job"), namespace=NS)).items
            children = [j for j in jobs if any(
                ref.get("kind") == "Sample" for ref in j["metadata"].get("ownerReferences", []))]
            assert children, "the generated controller ran no Job"
            # Kueue's child-job rule: the Sample's Jobs get no Workload of their own.
            for job in children:
                assert await workload_of(admin, job) is None
        finally:
            if proc.returncode is None:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 60)
    assert proc.returncode == 0, log_path.read_text()[-3000:]
    await asyncio.sleep(2)  # the audit backend writes in batches
    requests = audit_requests(audit_log, service_account_user())
    assert len(requests) > 20, "the manager's requests are not in the audit log"
    forbidden = [r for r in requests if r["code"] == 403]
    assert forbidden == [], f"{len(forbidden)} Forbidden: {forbidden[:5]}"
    assert MANAGER_NS in {r["namespace"] for r in requests}
