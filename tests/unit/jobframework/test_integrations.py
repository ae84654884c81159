"""Integration registry and ancestor walk, after integrationmanager_test.go / reconciler_test.go."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobframework.integrations import (
    DEFAULT_INTEGRATION_MANAGER,
    CyclicOwnershipError,
    DependencyIntegrationNotEnabledError,
    DuplicateFrameworkNameError,
    FrameworkNameFormatError,
    IntegrationCallbacks,
    IntegrationError,
    IntegrationManager,
    IntegrationNotFoundError,
    ManagedOwnersChainLimitReachedError,
    MissingMandatoryFieldError,
    WorkloadOwnerNotFoundError,
    parse_kind_arg,
    register_integration,
)
from jobframework.runtime.errors import new_not_found
from jobframework.runtime.objects import GVK, Object


def noop(*args: Any, **kwargs: Any) -> None:
    return None


def callbacks(gvk: GVK, **kw: Any) -> IntegrationCallbacks:
    return IntegrationCallbacks(new_reconciler=noop, setup_webhook=noop, job_type=gvk, **kw)


JOB = GVK("batch", "v1", "Job")
CRONJOB = GVK("batch", "v1", "CronJob")
MPIJOB = GVK("kubeflow.org", "v2beta1", "MPIJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
APPWRAPPER = GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")
POD = GVK("", "v1", "Pod")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
REPLICASET = GVK("apps", "v1", "ReplicaSet")

BUILTINS = {
    "batch/job": JOB, "kubeflow.org/mpijob": MPIJOB, "jobset.x-k8s.io/jobset": JOBSET,
    "workload.codeflare.dev/appwrapper": APPWRAPPER, "pod": POD, "deployment": DEPLOYMENT,
}


def manager(enabled: list[str] = (), external: list[str] = ()) -> IntegrationManager:  # type: ignore[assignment]
    m = IntegrationManager()
    for name, gvk in BUILTINS.items():
        m.register_integration(name, callbacks(gvk))
    for name in enabled:
        m.enable_integration(name)
    for kind_arg in external:
        m.register_external_job_type(kind_arg)
    return m


# --- registration -------------------------------------------------------------------------


@pytest.mark.kueue_case("TestRegister/successful")
def test_register_successful_and_sorted() -> None:
    m = IntegrationManager()
    m.register_integration("oldFramework", callbacks(JOB))
    m.register_integration("newFramework", callbacks(MPIJOB))
    assert m.get_integrations_list() == ["newFramework", "oldFramework"]
    assert m.get_integration("oldFramework") == callbacks(JOB)
    assert m.get_integration_by_gvk(MPIJOB) == callbacks(MPIJOB)
    assert m.get_integration_by_gvk(POD) is None


@pytest.mark.kueue_case("TestRegister/duplicate name")
def test_register_duplicate() -> None:
    m = IntegrationManager()
    m.register_integration("fw", callbacks(JOB))
    with pytest.raises(DuplicateFrameworkNameError) as exc:
        m.register_integration("fw", callbacks(MPIJOB))
    assert str(exc.value) == 'duplicate framework name "fw"'
    assert m.get_integration("fw") == callbacks(JOB)


@pytest.mark.kueue_case(
    "TestRegister/missing NewReconciler",
    "TestRegister/missing SetupWebhook",
    "TestRegister/missing JobType",
)
@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("new_reconciler", 'mandatory field missing "NewReconciler" for "fw"'),
        ("setup_webhook", 'mandatory field missing "SetupWebhook" for "fw"'),
        ("job_type", 'mandatory field missing "WebhookType" for "fw"'),
    ],
)
def test_register_missing_mandatory(missing: str, message: str) -> None:
    fields: dict[str, Any] = {"new_reconciler": noop, "setup_webhook": noop, "job_type": JOB}
    fields[missing] = None
    m = IntegrationManager()
    with pytest.raises(MissingMandatoryFieldError) as exc:
        m.register_integration("fw", IntegrationCallbacks(**fields))
    assert str(exc.value) == message
    assert m.get_integrations_list() == []


@pytest.mark.parametrize("missing", [
    pytest.param("setup_indexes", marks=pytest.mark.kueue_case(
        "TestRegister/missing SetupIndexes")),
    pytest.param("can_support_integration", marks=pytest.mark.kueue_case(
        "TestRegister/missing CanSupportIntegration")),
])
def test_optional_fields_may_be_missing(missing: str) -> None:
    given = callbacks(JOB, **{"setup_indexes": noop, "can_support_integration": noop,
                              missing: None})
    m = IntegrationManager()
    m.register_integration("fw", given)
    assert m.get_integrations_list() == ["fw"]
    assert m.get_integration("fw") == given


@pytest.mark.kueue_case(
    "TestRegisterExternal/successful 1",
    "TestRegisterExternal/successful 2",
    "TestRegisterExternal/malformed kind arg",
)
@pytest.mark.parametrize(
    ("arg", "gvk"),
    [("Job.v1.batch", JOB), ("AppWrapper.v1beta2.workload.codeflare.dev", APPWRAPPER),
     ("batch/job", None), ("Job.v1", None)],
)
def test_register_external(arg: str, gvk: GVK | None) -> None:
    assert parse_kind_arg(arg) == gvk
    m = IntegrationManager()
    if gvk is None:
        with pytest.raises(FrameworkNameFormatError) as exc:
            m.register_external_job_type(arg)
        assert str(exc.value) == f'misformatted external framework name "{arg}"'
    else:
        m.register_external_job_type(arg)
        assert m.external_job_types() == {arg: gvk}


@pytest.mark.kueue_case(
    "TestForEach/all",
    "TestForEach/partial",
)
def test_for_each_stops_at_first_error() -> None:
    m = IntegrationManager()
    for n in "abcde":
        m.register_integration(n, callbacks(GVK("g", "v1", n.upper())))
    called: list[str] = []

    def visit(name: str, cb: IntegrationCallbacks) -> None:
        called.append(name)
        if name == "c":
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        m.for_each_integration(visit)
    assert called == ["a", "b", "c"]
    called.clear()
    m.for_each_integration(lambda n, cb: called.append(n))
    assert called == list("abcde")


def ref(gvk: GVK, name: str = "x", uid: str = "u") -> dict[str, Any]:
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "name": name, "uid": uid,
            "controller": True}


@pytest.mark.kueue_case(
    "TestGetJobTypeForOwner/K1",
    "TestGetJobTypeForOwner/K2",
    "TestGetJobTypeForOwner/K3",
    "TestGetJobTypeForOwner/K4",
    "TestGetJobTypeForOwner/K5",
)
def test_job_type_for_owner() -> None:
    m = IntegrationManager()
    k = {i: GVK("example.com", "v1", f"K{i}") for i in range(1, 6)}
    for i in (1, 2, 4):
        m.register_integration(f"k{i}", callbacks(k[i]))
    m.enable_integration("k1")
    m.enable_integration("k2")
    m.register_external_job_type("K3.v1.example.com")
    assert m.get_job_type_for_owner(ref(k[1])) == k[1]
    assert m.get_job_type_for_owner(ref(k[2])) == k[2]
    assert m.get_job_type_for_owner(ref(k[3])) == k[3]
    assert m.get_job_type_for_owner(ref(k[4])) is None
    assert m.get_job_type_for_owner(ref(k[5])) is None
    assert m.is_known_owner(ref(k[4]))
    assert not m.is_known_owner(ref(k[5]))
    assert m.is_known_owner(ref(REPLICASET))


def test_managers_are_isolated() -> None:
    a, b = IntegrationManager(), IntegrationManager()
    for m in (a, b):
        m.register_integration("batch/job", callbacks(JOB))
    a.enable_integration("batch/job")
    obj = {"metadata": {"ownerReferences": [ref(JOB)]}}
    assert a.is_owner_managed_by_kueue_for_object(obj)
    assert not b.is_owner_managed_by_kueue_for_object(obj)
    assert not a.is_owner_managed_by_kueue_for_object({"metadata": {}})


@pytest.mark.kueue_case(
    "TestEnabledIntegrationsDependencies/empty",
    "TestEnabledIntegrationsDependencies/not found",
    "TestEnabledIntegrationsDependencies/dependency not enabled",
    "TestEnabledIntegrationsDependencies/dependency not found",
    "TestEnabledIntegrationsDependencies/no error",
)
@pytest.mark.parametrize(
    ("deps", "enabled", "registered", "error", "message"),
    [
        ({}, [], [], None, None),
        ({}, ["i1"], [], IntegrationNotFoundError, '"i1" integration not found'),
        ({"i1": ["i2"]}, ["i1"], ["i1", "i2"], DependencyIntegrationNotEnabledError,
         '"i1" integration not enabled "i2"'),
        ({"i1": ["i2"]}, ["i1", "i2"], ["i1"], IntegrationNotFoundError,
         '"i2" integration not found'),
        ({"i1": ["i2", "i3"], "i2": ["i3"]}, ["i1", "i2", "i3"], ["i1", "i2", "i3"], None, None),
    ],
)
def test_enabled_dependencies(deps: dict[str, list[str]], enabled: list[str],
                              registered: list[str], error: type[Exception] | None,
                              message: str | None) -> None:
    m = IntegrationManager()
    for i, name in enumerate(registered):
        m.register_integration(name, callbacks(GVK("g", "v1", f"K{i}"),
                                               dependency_list=deps.get(name, [])))
    if error is None:
        m.check_enabled_list_dependencies(enabled)
    else:
        with pytest.raises(error) as exc:
            m.check_enabled_list_dependencies(enabled)
        assert str(exc.value) == message


@pytest.mark.kueue_case(
    "TestImplicitlyEnabledIntegrations/empty",
    "TestImplicitlyEnabledIntegrations/no implicit dependencies",
    "TestImplicitlyEnabledIntegrations/single implicit dependency",
    "TestImplicitlyEnabledIntegrations/multiple implicit dependencies",
    "TestImplicitlyEnabledIntegrations/nested implicit dependencies",
)
@pytest.mark.parametrize(
    ("implicit", "enabled", "want"),
    [
        ({}, [], set()),
        ({}, ["i1"], set()),
        ({"i1": ["i2"]}, ["i1"], {"i2"}),
        ({"i1": ["i2", "i3"]}, ["i1"], {"i2", "i3"}),
        ({"i1": ["i2", "i3"], "i2": ["i3"]}, ["i1", "i2"], {"i3"}),
    ],
)
def test_implicitly_enabled(implicit: dict[str, list[str]], enabled: list[str],
                            want: set[str]) -> None:
    m = IntegrationManager()
    for i, name in enumerate(["i1", "i2", "i3"]):
        m.register_integration(name, callbacks(
            GVK("g", "v1", f"K{i}"), implicitly_enabled_framework_names=implicit.get(name, [])))
    assert m.collect_implicitly_enabled_integrations(enabled) == want


def test_configure_from_configuration() -> None:
    m = IntegrationManager()
    m.register_integration("pod", callbacks(POD))
    m.register_integration("deployment", callbacks(
        DEPLOYMENT, implicitly_enabled_framework_names=["pod"]))
    m.register_integration("batch/job", callbacks(JOB))
    enabled = m.configure(["deployment", "batch/job"],
                          ["AppWrapper.v1beta2.workload.codeflare.dev"])
    assert enabled == {"pod", "deployment", "batch/job"}
    assert m.enabled_integrations() == {"pod", "deployment", "batch/job"}
    assert m.implicitly_enabled_integrations() == {"pod"}
    assert m.has_implicitly_enabled_framework(POD)
    assert not m.has_implicitly_enabled_framework(JOB)
    assert m.get_job_type_for_owner(ref(APPWRAPPER)) == APPWRAPPER
    with pytest.raises(IntegrationNotFoundError) as exc:
        IntegrationManager().configure(["nope"])
    assert str(exc.value) == 'check enabled frameworks list: "nope" integration not found'


def test_configure_can_support_integration() -> None:
    m = IntegrationManager()
    seen: dict[str, Any] = {}

    def can(**opts: Any) -> bool:
        seen.update(opts)
        return False

    m.register_integration("batch/job", callbacks(JOB, can_support_integration=can))
    with pytest.raises(IntegrationError) as exc:
        m.configure(["batch/job"], kube_server_version="1.36")
    assert str(exc.value) == "failed to configure reconcilers: %!w(<nil>)"
    assert seen == {"kube_server_version": "1.36"}
    assert m.enabled_integrations() == frozenset()

    def broken(**opts: Any) -> bool:
        raise RuntimeError("too old")

    m2 = IntegrationManager()
    m2.register_integration("batch/job", callbacks(JOB, can_support_integration=broken))
    with pytest.raises(IntegrationError, match=r"^failed to configure reconcilers: too old$"):
        m2.configure(["batch/job"])


async def test_setup_indexes_for_enabled_only() -> None:
    m = IntegrationManager()
    calls: list[tuple[str, object]] = []

    async def idx_job(indexer: object) -> None:
        calls.append(("job", indexer))

    def idx_mpi(indexer: object) -> None:
        calls.append(("mpi", indexer))

    async def failing(indexer: object) -> None:
        raise RuntimeError("boom")

    m.register_integration("batch/job", callbacks(JOB, setup_indexes=idx_job))
    m.register_integration("kubeflow.org/mpijob", callbacks(MPIJOB, setup_indexes=idx_mpi))
    m.register_integration("pod", callbacks(POD, setup_indexes=failing))
    marker = object()
    await m.setup_indexes(marker, ["batch/job"])
    assert calls == [("job", marker)]
    with pytest.raises(IntegrationError, match=r'^jobFrameworkName "pod": boom$'):
        await m.setup_indexes(marker, ["pod"])


def test_multikueue_adapters() -> None:
    class Adapter:
        def __init__(self, gvk: GVK) -> None:
            self._gvk = gvk

        def gvk(self) -> GVK:
            return self._gvk

    m = IntegrationManager()
    m.register_integration("a", callbacks(JOB, multikueue_adapter=Adapter(JOB)))  # type: ignore[arg-type]
    m.register_integration("b", callbacks(MPIJOB, multikueue_adapter=Adapter(JOB)))  # type: ignore[arg-type]
    assert list(m.get_multikueue_adapters(["a"])) == ["batch/v1, Kind=Job"]
    with pytest.raises(IntegrationError) as exc:
        m.get_multikueue_adapters(["a", "b"])
    assert str(exc.value) == 'multiple adapters for GVK: "batch/v1, Kind=Job"'


def test_default_manager_registration() -> None:
    name = "test.example.com/registration"
    register_integration(name, callbacks(GVK("example.com", "v1", "Reg")))
    assert DEFAULT_INTEGRATION_MANAGER.get_integration(name) is not None
    other = IntegrationManager()
    register_integration(name, callbacks(JOB), manager=other)
    assert other.get_integrations_list() == [name]


# --- find_ancestor_job_managed_by_kueue ---------------------------------------------------


class DictReader:
    def __init__(self, *objs: Object) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        obj = self.objs.get((gvk.kind, name))
        if obj is None or obj["apiVersion"] != gvk.api_version:
            raise new_not_found(gvk.kind.lower() + "s", name, gvk.group)
        return copy.deepcopy(obj)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def obj(gvk: GVK, name: str, uid: str | None = None, owner: Object | None = None,
        queue: str | None = None, owner_uid: str | None = None) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid or name}
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner_uid or owner["metadata"]["uid"], "controller": True}]
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": meta}


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with unmanaged workload "
    "owner that has a queue-name",
)
async def test_ancestor_unmanaged_owner() -> None:
    cron = obj(CRONJOB, "cronjob", queue="q")
    job = obj(JOB, "job", owner=cron)
    assert await manager().find_ancestor_job_managed_by_kueue(DictReader(cron), job, False) is None


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with unknown non-existing "
    "workload owner",
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with known non-existing "
    "workload owner",
)
@pytest.mark.parametrize("enabled", [[], ["kubeflow.org/mpijob"]])
async def test_ancestor_known_missing_owner(enabled: list[str]) -> None:
    mpi = obj(MPIJOB, "parent")
    job = obj(JOB, "job", owner=mpi)
    with pytest.raises(WorkloadOwnerNotFoundError) as exc:
        await manager(enabled).find_ancestor_job_managed_by_kueue(DictReader(), job, False)
    assert str(exc.value).startswith("workload owner not found\n")
    assert 'mpijobs.kubeflow.org "parent" not found' in str(exc.value)


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with known existing workload "
    "owner, and the parent job has queue-name label",
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with known existing workload "
    "owner, and the parent job doesn't has queue-name label",
)
@pytest.mark.parametrize(("queue", "found"), [("test-q", True), (None, False)])
async def test_ancestor_known_existing_owner(queue: str | None, found: bool) -> None:
    mpi = obj(MPIJOB, "parent", queue=queue)
    job = obj(JOB, "job", owner=mpi)
    got = await manager(["kubeflow.org/mpijob"]).find_ancestor_job_managed_by_kueue(
        DictReader(mpi), job, False)
    assert got == (mpi if found else None)


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/cyclic ownership links are properly handled",
)
async def test_ancestor_cycle() -> None:
    mpi_stub = obj(MPIJOB, "mpi")
    aw = obj(APPWRAPPER, "aw", owner=None)
    child = obj(JOB, "child", owner=mpi_stub)
    mpi = obj(MPIJOB, "mpi", owner=aw)
    aw = obj(APPWRAPPER, "aw", owner=child)
    m = manager(["kubeflow.org/mpijob", "workload.codeflare.dev/appwrapper", "batch/job"])
    with pytest.raises(CyclicOwnershipError, match=r"^cyclic ownership$"):
        await m.find_ancestor_job_managed_by_kueue(DictReader(mpi, aw, child), child, False)


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/cuts off ancestor traversal at the limit and generates an "
    "appropriate event",
)
async def test_ancestor_chain_limit() -> None:
    chain = [obj(JOB, "ancestor-0", queue="q")]
    for i in range(1, 12):
        chain.append(obj(JOB, f"ancestor-{i}", owner=chain[-1]))
    child = obj(JOB, "child", owner=chain[-1])
    with pytest.raises(ManagedOwnersChainLimitReachedError,
                       match=r"^managed owner chain limit reached$"):
        await manager(["batch/job"]).find_ancestor_job_managed_by_kueue(
            DictReader(*chain), child, False)
    # Ten ancestors are fine.
    short = chain[:10]
    child2 = obj(JOB, "child", owner=short[-1])
    got = await manager(["batch/job"]).find_ancestor_job_managed_by_kueue(
        DictReader(*short), child2, False)
    assert got == short[0]


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/Job -> JobSet -> AppWrapper => nil",
    "TestFindAncestorJobManagedByKueue/Job (queue-name) -> JobSet (queue-name) -> AppWrapper => "
    "JobSet",
    "TestFindAncestorJobManagedByKueue/Job (queue-name) -> JobSet -> AppWrapper (queue-name) => "
    "AppWrapper",
    "TestFindAncestorJobManagedByKueue/Job (queue-name) -> JobSet (queue-name) -> AppWrapper "
    "(queue-name) => AppWrapper",
    "TestFindAncestorJobManagedByKueue/Job -> JobSet (disabled) -> AppWrapper (queue-name) => "
    "AppWrapper",
    "TestFindAncestorJobManagedByKueue/Job -> JobSet -> AppWrapper => AppWrapper "
    "(manageJobsWithoutQueueName)",
    "TestFindAncestorJobManagedByKueue/Job (queue-name) -> JobSet (queue-name) -> AppWrapper => "
    "AppWrapper (manageJobsWithoutQueueName)",
    "TestFindAncestorJobManagedByKueue/Job -> JobSet (disabled) -> AppWrapper => AppWrapper "
    "(manageJobsWithoutQueueName)",
)
@pytest.mark.parametrize(
    ("enabled", "queues", "mjwqn", "want"),
    [
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"], {}, False, None),
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"],
         {"job", "jobset"}, False, "jobset"),
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"],
         {"job", "aw"}, False, "aw"),
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"],
         {"job", "jobset", "aw"}, False, "aw"),
        (["workload.codeflare.dev/appwrapper"], {"aw"}, False, "aw"),
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"], {}, True, "aw"),
        (["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"],
         {"job", "jobset"}, True, "aw"),
        (["workload.codeflare.dev/appwrapper"], {}, True, "aw"),
    ],
)
async def test_ancestor_job_jobset_appwrapper(enabled: list[str], queues: set[str], mjwqn: bool,
                                              want: str | None) -> None:
    aw = obj(APPWRAPPER, "aw", queue="q" if "aw" in queues else None)
    jobset = obj(JOBSET, "jobset", owner=aw, queue="q" if "jobset" in queues else None)
    job = obj(JOB, "job", owner=jobset, queue="q" if "job" in queues else None)
    got = await manager(enabled).find_ancestor_job_managed_by_kueue(
        DictReader(aw, jobset), job, mjwqn)
    assert got == {"aw": aw, "jobset": jobset, None: None}[want]


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/Job -> CronJob (external framework, not enabled) -> "
    "AppWrapper (queue-name) => AppWrapper",
    "TestFindAncestorJobManagedByKueue/Job -> CronJob (external framework, enabled) -> "
    "AppWrapper (queue-name) => AppWrapper",
)
@pytest.mark.parametrize(("external", "want_aw"), [([], False), (["CronJob.v1.batch"], True)])
async def test_ancestor_through_external_framework(external: list[str], want_aw: bool) -> None:
    aw = obj(APPWRAPPER, "aw", queue="q")
    cron = obj(CRONJOB, "cron", owner=aw)
    job = obj(JOB, "job", owner=cron)
    got = await manager(["workload.codeflare.dev/appwrapper"], external).\
        find_ancestor_job_managed_by_kueue(DictReader(aw, cron), job, False)
    assert got == (aw if want_aw else None)


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/child job has ownerReference whose UID does not match the "
    "referenced object => nil",
)
async def test_ancestor_forged_uid() -> None:
    mpi = obj(MPIJOB, "parent", queue="q")
    job = obj(JOB, "job", owner=mpi, owner_uid="forged-uid")
    got = await manager(["kubeflow.org/mpijob"]).find_ancestor_job_managed_by_kueue(
        DictReader(mpi), job, False)
    assert got is None


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/Pod -> ReplicaSet -> Deployment (queue-name) => Deployment",
)
async def test_ancestor_through_replicaset() -> None:
    deploy = obj(DEPLOYMENT, "deploy", queue="q")
    rs = obj(REPLICASET, "rs", owner=deploy)
    pod = obj(POD, "pod", owner=rs)
    got = await manager(["pod", "deployment"]).find_ancestor_job_managed_by_kueue(
        DictReader(deploy, rs), pod, False)
    assert got == deploy
