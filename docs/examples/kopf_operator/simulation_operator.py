"""A kopf operator for Simulations, queued by Kueue through the jobframework it embeds.

The operator's own logic is kopf's: while a Simulation's ``spec.suspend`` is false it runs
one batch/v1 Job of ``spec.parallelism`` pods from ``spec.template`` and copies the Job's
progress into the Simulation's status (``active``, ``ready``, ``succeeded``, ``phase``);
while it is true, the Job is deleted. Kueue's side (``simulation_kueue.py``) starts in
``@kopf.on.startup`` in kopf's own event loop and stops in ``@kopf.on.cleanup``: its
webhook creates queued Simulations suspended, its reconciler gives each a Workload and,
once Kueue admits it, clears ``spec.suspend`` with the flavor's node selector in the
template, which kopf's field handler then acts on.

Run it beside a cluster whose Kueue lists ``Simulation.v1.science.example.com`` in
``integrations.externalFrameworks``::

    pip install 'kueue-jobframework[kopf]'
    KUEUE_CONFIG=/path/to/kueue-config.yaml \\
        kopf run --all-namespaces docs/examples/kopf_operator/simulation_operator.py

Settings come from the environment: ``KUEUE_CONFIG`` (Kueue's Configuration file; unset:
Kueue's ConfigMap ``kueue-system/kueue-manager-config``), ``WEBHOOK_HOST`` and
``WEBHOOK_PORT`` (where the webhook server listens; default ``127.0.0.1`` and any free
port), ``WEBHOOK_CERT_DIR`` (mounted ``tls.crt``/``tls.key``; unset: a certificate of
its own and webhook configurations by URL) and ``INSTALL_CRD`` (``0``: the CRD is
installed by your manifests). See ``docs/kopf.md``.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, Final

import kopf
from simulation_kueue import PLURAL, SIMULATION_GVK, EmbeddedKueue

from jobframework.config import Configuration, load_configuration, load_configuration_from_configmap
from jobframework.runtime.client import Client, PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object

JOB_GVK: Final = GVK("batch", "v1", "Job")
#: On the Simulation's Job: the Simulation's name, so a Job event finds its owner.
SIMULATION_LABEL: Final = "science.example.com/simulation"
TERMINAL_PHASES: Final = ("Succeeded", "Failed")


class SimulationController:
    """The operator's own logic: one level-based sync per Simulation, under a lock.

    kopf runs the handlers of different objects concurrently: the Simulation's field
    handler and the event handler of its Job may sync the same Simulation at once and
    create the Job twice, or write a stale status. One lock per Simulation serializes
    them.
    """

    def __init__(self, client: RestClient, kueue: EmbeddedKueue) -> None:
        self.client = client
        self.kueue = kueue
        # Held only while a sync runs: an idle lock is dropped with its last user.
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary())

    async def sync(self, namespace: str, name: str, logger: kopf.Logger) -> None:
        """Bring the Simulation's Job and status in line with its spec."""
        lock = self._locks.setdefault((namespace, name), asyncio.Lock())
        async with lock:
            await self._sync(namespace, name, logger)

    async def _sync(self, namespace: str, name: str, logger: kopf.Logger) -> None:
        try:
            sim = await self.client.get(SIMULATION_GVK, name, namespace=namespace)
        except NotFound:
            return
        status = sim.get("status") or {}
        if "deletionTimestamp" in sim["metadata"] or status.get("phase") in TERMINAL_PHASES:
            return
        try:
            job: Object | None = await self.client.get(JOB_GVK, name, namespace=namespace)
        except NotFound:
            job = None
        if job is not None and not _owned_by(job, sim):
            # Not this Simulation's: a deleted namesake's, not collected yet (its DELETED
            # event syncs again), or someone else's. Leave it alone.
            logger.warning("Job %s belongs to another object: waiting", name)
            return
        if sim["spec"].get("suspend"):
            if job is not None and "deletionTimestamp" not in job["metadata"]:
                # Foreground: the Job stays, counting its active pods, until they are
                # deleted; Kueue releases the quota only once none is active.
                logger.info("suspended: deleting Job %s", name)
                await self.client.delete(JOB_GVK, name, namespace=namespace,
                                         propagation_policy=PropagationPolicy.FOREGROUND)
        elif job is None:
            job = await self.client.create(job_for(sim))
            logger.info("running: created Job %s", name)
        # (A Job still being deleted after an eviction is replaced once it is gone: its
        # DELETED event syncs again.)
        wanted = status_from(job)
        if any(status.get(key) != value for key, value in wanted.items()):
            await self.client.patch(SIMULATION_GVK, name, {"status": wanted},
                                    namespace=namespace, subresource="status")


def _owned_by(job: Object, sim: Object) -> bool:
    return any(ref.get("uid") == sim["metadata"]["uid"] and ref.get("controller")
               for ref in job["metadata"].get("ownerReferences") or [])


def job_for(sim: Object) -> Object:
    """The batch/v1 Job that runs a Simulation: its template as Kueue left it (the
    flavor's node selector included), owned by the Simulation."""
    meta, spec = sim["metadata"], sim["spec"]
    template = dict(spec["template"])
    template["spec"] = {"restartPolicy": "Never", **template.get("spec", {})}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"],
            "labels": {SIMULATION_LABEL: meta["name"]},
            "ownerReferences": [{"apiVersion": sim["apiVersion"], "kind": sim["kind"],
                                 "name": meta["name"], "uid": meta["uid"],
                                 "controller": True}],
        },
        "spec": {"parallelism": spec["parallelism"], "completions": spec["parallelism"],
                 "backoffLimit": 0, "template": template},
    }


def status_from(job: Object | None) -> dict[str, Any]:
    """The Simulation's status for its Job (None: no Job)."""
    if job is None:
        return {"active": 0, "ready": 0, "succeeded": 0, "phase": "Pending"}
    st = job.get("status") or {}
    done = {c["type"] for c in st.get("conditions") or [] if c.get("status") == "True"}
    active = int(st.get("active", 0))
    phase = ("Succeeded" if "Complete" in done else "Failed" if "Failed" in done
             else "Running" if active else "Pending")
    # Pods the Job controller has seen succeed but not counted yet are succeeded too (as
    # Kueue counts them for a batch/v1 Job): else ready + succeeded dips as pods finish.
    uncounted = len((st.get("uncountedTerminatedPods") or {}).get("succeeded") or [])
    return {"active": active, "ready": int(st.get("ready", 0)),
            "succeeded": int(st.get("succeeded", 0)) + uncounted, "phase": phase}


# --------------------------------------------------------------------------- Kueue's side


async def read_kueue_config(client: Client) -> Configuration:
    """The Configuration the cluster's Kueue runs with: ``$KUEUE_CONFIG``, else its
    ConfigMap."""
    path = os.environ.get("KUEUE_CONFIG")
    if path:
        return load_configuration(path)
    return await load_configuration_from_configmap(client)


@kopf.on.startup()
async def start_kueue(settings: kopf.OperatorSettings, memo: kopf.Memo,
                      logger: kopf.Logger, **_: Any) -> None:
    """CRD, webhook and manager, before kopf handles any Simulation."""
    settings.peering.standalone = True  # one replica (see docs/kopf.md)
    client = await RestClient.auto()
    try:
        kueue = EmbeddedKueue(
            client, await read_kueue_config(client),
            webhook_host=os.environ.get("WEBHOOK_HOST", "127.0.0.1"),
            webhook_port=int(os.environ.get("WEBHOOK_PORT", "0")),
            cert_dir=os.environ.get("WEBHOOK_CERT_DIR") or None,
            install_crd=os.environ.get("INSTALL_CRD", "1") != "0")
        await kueue.start()
    except BaseException as err:
        await client.close()
        if isinstance(err, ValueError):  # a misconfiguration: retrying will not help
            raise kopf.PermanentError(str(err)) from err
        raise
    memo.simulations = SimulationController(client, kueue)
    logger.info("Kueue's side is running")


@kopf.on.cleanup()
async def stop_kueue(memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Webhook configurations, manager, webhook server, client: in that order."""
    controller: SimulationController | None = memo.get("simulations")
    if controller is None:
        return
    await controller.kueue.stop()
    await controller.client.close()
    logger.info("Kueue's side has stopped")


@kopf.on.probe(id="kueue")
async def kueue_alive(memo: kopf.Memo, **_: Any) -> bool:
    """For ``kopf run --liveness``: fail once the embedded manager has stopped, so the
    pod is restarted rather than left serving without Kueue."""
    controller: SimulationController | None = memo.get("simulations")
    task = controller.kueue.task if controller is not None else None
    if task is None or task.done():
        raise RuntimeError("the embedded Kueue manager is not running")
    return True


# --------------------------------------------------------------------------- handlers


@kopf.on.resume(SIMULATION_GVK.group, SIMULATION_GVK.version, PLURAL)
@kopf.on.create(SIMULATION_GVK.group, SIMULATION_GVK.version, PLURAL)
async def simulation_created(namespace: str | None, name: str, memo: kopf.Memo,
                             logger: kopf.Logger, **_: Any) -> None:
    """A new Simulation (or one found at start-up): queued ones arrive suspended."""
    assert namespace is not None  # a namespaced kind
    await memo.simulations.sync(namespace, name, logger)


@kopf.on.field(SIMULATION_GVK.group, SIMULATION_GVK.version, PLURAL, field="spec.suspend")
async def suspend_changed(namespace: str | None, name: str, old: Any, new: Any, memo: kopf.Memo,
                          logger: kopf.Logger, **_: Any) -> None:
    """Kueue admitted (``true`` → ``false``) or evicted (``false`` → ``true``) it."""
    logger.info("spec.suspend: %s -> %s", old, new)
    assert namespace is not None
    await memo.simulations.sync(namespace, name, logger)


@kopf.on.event("batch", "v1", "jobs", labels={SIMULATION_LABEL: kopf.PRESENT})
async def job_changed(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger,
                      **_: Any) -> None:
    """A Simulation's Job changed (or went away): sync its Simulation."""
    meta = body["metadata"]
    await memo.simulations.sync(meta["namespace"], meta["labels"][SIMULATION_LABEL], logger)
