"""Kueue v0.19.2 ``reconciler_test.go`` ``TestFindAncestorJobManagedByKueue`` cases that
``test_integrations.py`` does not run as such (its fixtures are reused here).

Each case's pytest id is ``TestFindAncestorJobManagedByKueue/<Go case name>``.
"""

from __future__ import annotations

import pytest
from tests.unit.jobframework.test_integrations import (
    APPWRAPPER,
    CRONJOB,
    JOB,
    JOBSET,
    DictReader,
    manager,
    obj,
)

GO = "TestFindAncestorJobManagedByKueue"
BOTH = ["jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"]


@pytest.mark.kueue_case(
    "TestFindAncestorJobManagedByKueue/child job has ownerReference with unmanaged workload owner",
)
async def test_unmanaged_owner_without_queue_name() -> None:
    cron = obj(CRONJOB, "cronjob")
    job = obj(JOB, "job", owner=cron)
    assert await manager().find_ancestor_job_managed_by_kueue(DictReader(cron), job,
                                                              False) is None


@pytest.mark.parametrize("queues", [
    pytest.param({"job", "aw"}, id=f"{GO}/Job (queue-name) -> JobSet -> AppWrapper (queue-name)"
                                   " => AppWrapper (manageJobsWithoutQueueName)"),
    pytest.param({"job", "jobset", "aw"},
                 id=f"{GO}/Job (queue-name) -> JobSet (queue-name) -> AppWrapper (queue-name)"
                    " => AppWrapper (manageJobsWithoutQueueName)"),
])
async def test_top_ancestor_wins_with_manage_jobs_without_queue_name(queues: set[str]) -> None:
    aw = obj(APPWRAPPER, "aw", queue="q" if "aw" in queues else None)
    jobset = obj(JOBSET, "jobset", owner=aw, queue="q" if "jobset" in queues else None)
    job = obj(JOB, "job", owner=jobset, queue="q" if "job" in queues else None)
    got = await manager(BOTH).find_ancestor_job_managed_by_kueue(DictReader(aw, jobset), job,
                                                                 True)
    assert got == aw
