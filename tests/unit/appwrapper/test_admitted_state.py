"""Quota integrity: a tenant cannot steer what Kueue admitted for an AppWrapper.

The admission lives in ``spec.components[].podSetInfos``, in the tenant's own object:
only privileged users may change it (the Kueue webhook's update rule, which upstream does
not have), and under Kueue the framework controller checks it against the Workload before
it creates components. Written past the webhook, a changed admission stops the
AppWrapper instead of reaching a component.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.appwrapper import APPWRAPPER_GVK
from integrations.appwrapper.api import AppWrapperPhase
from integrations.appwrapper.controller import AppWrapperReconciler
from integrations.appwrapper.webhook import AppWrapperKueueWebhook, AppWrapperWebhook
from jobframework.admittedstate import KUEUE_CONTROLLER_MANAGER_USER
from jobframework.admittedworkload import REASON_ADMISSION_MISMATCH, AdmissionGuard
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request
from jobframework.webhook import admission_hook, with_custom_validator

from .controller_helpers import FakeRecorder, upstream_test_config
from .helpers import NS, job
from .test_job import JOB, TAS_OFF, Kueue, queued

TENANT = "alice"
#: What a tenant writes to run on another flavor's nodes.
STEERED = [{"nodeSelector": {"zone": "z2-reserved"}, "tolerations": [{"operator": "Exists"}]}]


class World:
    """Kueue (the generic reconciler and the scheduler's writes) and the AppWrapper
    framework controller under Kueue, on one in-memory server."""

    def __init__(self) -> None:
        self.k = Kueue()
        self.api = self.k.api
        self.recorder = FakeRecorder()
        self.rec = AppWrapperReconciler(self.api, self.recorder, upstream_test_config(),
                                        clock=self.k.server.clock)
        self.rec.admission_guard = AdmissionGuard(self.api, APPWRAPPER_GVK, features=TAS_OFF)

    async def reconcile(self) -> None:
        await self.rec.reconcile(Request.of(NS, "aw"))

    async def get(self) -> Object:
        return await self.k.get()

    async def jobs(self) -> dict[str, Object]:
        return {j["metadata"]["name"]: j for j in (await self.api.list(JOB, namespace=NS)).items}

    async def admitted(self) -> Object:
        """A queued AppWrapper wrapping one Job, admitted in flavor f1 (zone z1) and
        unsuspended by Kueue's reconciler; the controller has not created it yet."""
        await self.k.flavor("f1", {"zone": "z1"})
        await self.api.create(queued([job(1)]))
        await self.reconcile()  # "" → Suspended: the PodSets are fixed
        await self.k.reconcile()
        await self.k.admit(["f1"])
        await self.k.reconcile()
        aw = await self.get()
        assert aw["spec"]["suspend"] is False
        assert aw["spec"]["components"][0]["podSetInfos"][0]["nodeSelector"] == {"zone": "z1"}
        return aw

    def install_webhook(self) -> None:
        webhook = AppWrapperKueueWebhook(self.api, integration_manager=self.k.im,
                                         appwrapper=AppWrapperWebhook(None))
        self.k.server.add_validating_webhook(
            admission_hook(with_custom_validator(webhook)),
            name="vappwrapper.workload.codeflare.dev",
            rules=[{"operations": ["UPDATE"], "apiGroups": ["workload.codeflare.dev"],
                    "apiVersions": ["v1beta2"], "resources": ["appwrappers"]}])


def steered(aw: Object, infos: list[dict[str, Any]] = STEERED) -> Object:
    aw = copy.deepcopy(aw)
    aw["spec"]["components"][0]["podSetInfos"] = copy.deepcopy(infos)
    return aw


@pytest.fixture
def w() -> World:
    return World()


async def test_tenant_cannot_change_the_pod_set_infos(w: World) -> None:
    aw = await w.admitted()
    w.install_webhook()
    tenant = w.k.server.client(user=TENANT)
    with pytest.raises(ApiError) as info:
        await tenant.update(steered(aw))
    assert info.value.code == 403
    assert "spec.components[0].podSetInfos" in str(info.value)
    assert (await w.get())["spec"]["components"][0]["podSetInfos"][0]["nodeSelector"] == \
        {"zone": "z1"}
    with pytest.raises(ApiError):
        await tenant.update(steered(aw, []))  # dropping them is a change too

    # Kueue's identity may.
    kueue = w.k.server.client(user=KUEUE_CONTROLLER_MANAGER_USER)
    updated = await kueue.update(steered(await w.get()))
    assert updated["spec"]["components"][0]["podSetInfos"] == STEERED


async def test_pod_set_infos_written_past_the_webhook_stop_the_appwrapper(w: World) -> None:
    aw = await w.admitted()
    await w.api.update(steered(aw))
    await w.reconcile()  # Suspended → Resuming
    await w.reconcile()  # Resuming: the components would be created here
    assert await w.jobs() == {}, "no component runs the tenant's nodeSelector"
    aw = await w.get()
    assert aw["spec"]["suspend"] is True
    assert "podSetInfos" not in aw["spec"]["components"][0]
    (message,) = [m for t, r, _, m in w.recorder.events
                  if (t, r) == ("Warning", REASON_ADMISSION_MISMATCH)]
    assert '"zone":"z2-reserved"' in message and '"zone":"z1"' in message

    # The phase machine suspends it; Kueue's reconciler starts it again with the
    # Workload's own admission, and the component gets the admitted flavor.
    await w.reconcile()  # Resuming → Suspending
    await w.reconcile()  # Suspending → Suspended
    assert (await w.get())["status"]["phase"] == AppWrapperPhase.SUSPENDED.value
    await w.k.reconcile()
    assert (await w.get())["spec"]["suspend"] is False
    await w.reconcile()  # Suspended → Resuming
    await w.reconcile()  # Resuming: created
    pod = (await w.jobs())["job"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"zone": "z1"}
    assert {"operator": "Exists"} not in pod.get("tolerations", [])
