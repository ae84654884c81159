"""Kueue's base_webhook_test.go (§4, W1-W16) and the batch Job webhook, both directly and
through the in-memory API server's admission chain."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.batchjob import (
    CALLBACKS,
    FRAMEWORK_NAME,
    JOB_GVK,
    BatchJob,
    BatchJobWebhook,
    setup_webhook,
)
from jobframework import constants as c
from jobframework.base_webhook import BaseWebhook, NoopWebhook, setup_base_webhook
from jobframework.defaults import StaticQueueLookup
from jobframework.field import AggregateError, ErrorList, invalid, new_path
from jobframework.integrations import IntegrationManager
from jobframework.lossless import LosslessMode
from jobframework.runtime import errors
from jobframework.runtime.selectors import LabelSelector
from jobframework.webhook import WebhookServer, rule

from .helpers import World


def job(namespace: str = "default", queue: str | None = "queue", suspend: bool = False,
        **labels: str) -> dict[str, Any]:
    all_labels = {**({c.QUEUE_LABEL: queue} if queue else {}), **labels}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": namespace, "uid": "uid",
                         "labels": all_labels},
            "spec": {"suspend": suspend, "parallelism": 1,
                     "template": {"spec": {"containers": [{"name": "c"}]}}}}


def manager() -> IntegrationManager:
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, CALLBACKS)
    im.enable_integration(FRAMEWORK_NAME)
    return im


MULTIKUEUE = StaticQueueLookup(
    local_queues=[{"metadata": {"name": "multikueue", "namespace": "default"},
                   "spec": {"clusterQueue": "cluster-queue"}},
                  {"metadata": {"name": "queue", "namespace": "default"},
                   "spec": {"clusterQueue": "plain"}}],
    cluster_queues=[{"metadata": {"name": "cluster-queue"},
                     "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "ac"}]}}}],
    admission_checks=[{"metadata": {"name": "ac"},
                       "spec": {"controllerName": c.MULTIKUEUE_CONTROLLER_NAME}}])


@pytest.mark.kueue_case(
    "TestBaseWebhookDefault/update the suspend field with 'manageJobsWithoutQueueName=false'",
    "TestBaseWebhookDefault/update the suspend field 'manageJobsWithoutQueueName=true'",
    "TestBaseWebhookDefault/default lq is created, job doesn't have queue label",
    "TestBaseWebhookDefault/default lq is created, job has queue label",
    "TestBaseWebhookDefault/default lq isn't created, job doesn't have queue label",
    "TestBaseWebhookDefault/ManagedByDefaulting, targeting multikueue local queue",
    "TestBaseWebhookDefault/ManagedByDefaulting, targeting non-multikueue local queue",
    "TestBaseWebhookDefault/job in unmanaged namespace with default lq should not get queue "
    "label or be suspended",
)
@pytest.mark.parametrize(("case", "obj", "options", "check"), [
    ("W1 suspend", job(), {}, lambda o: o["spec"]["suspend"] is True),
    ("W2 suspend, manage jobs without queue", job(),
     {"manage_jobs_without_queue_name": True}, lambda o: o["spec"]["suspend"] is True),
    ("W3 default lq added", job(queue=None), {"default_local_queue_exist": lambda ns: True},
     lambda o: o["metadata"]["labels"] == {c.QUEUE_LABEL: "default"}
     and o["spec"]["suspend"] is True),
    ("W4 default lq, job has a queue", job(), {"default_local_queue_exist": lambda ns: True},
     lambda o: o["metadata"]["labels"] == {c.QUEUE_LABEL: "queue"}),
    ("W5 no default lq", job(queue=None), {},
     lambda o: o["metadata"]["labels"] == {} and o["spec"]["suspend"] is False),
    ("W6 no integration manager", job(queue=None), {"integration_manager": None},
     lambda o: o == job(queue=None)),
    ("W7 managedBy for a MultiKueue queue", job(queue="multikueue"), {"queues": MULTIKUEUE},
     lambda o: o["spec"]["managedBy"] == c.MULTIKUEUE_CONTROLLER_NAME),
    ("W9 non-MultiKueue queue", job(), {"queues": MULTIKUEUE},
     lambda o: "managedBy" not in o["spec"]),
    ("W10 unmanaged namespace", job("unmanaged-ns", queue=None),
     {"default_local_queue_exist": lambda ns: True,
      "managed_jobs_namespace_selector": LabelSelector.parse(
          "kubernetes.io/metadata.name notin (unmanaged-ns)")},
     lambda o: o["metadata"]["labels"] == {} and o["spec"]["suspend"] is False),
])
async def test_w1_w10_default(case: str, obj: dict[str, Any], options: dict[str, Any],
                              check: Any) -> None:
    w = World()
    await w.setup()
    await w.client.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "unmanaged-ns"}})
    options.setdefault("integration_manager", manager())
    webhook = BaseWebhook(BatchJob, w.client, **options)
    await webhook.default(obj)
    assert check(obj), case


@pytest.mark.kueue_case(
    "TestBaseWebhookDefault/ManagedByDefaulting, targeting multikueue local queue but already "
    "managaed by someone else",
)
async def test_w8_already_managed_by_someone_else() -> None:
    w = World()
    obj = job(queue="multikueue")
    obj["spec"]["managedBy"] = "someone-else"
    await BaseWebhook(BatchJob, w.client, queues=MULTIKUEUE).default(obj)
    assert obj["spec"]["managedBy"] == "someone-else"


#: A ``default`` LocalQueue in namespace ``default``, and a held one in ``held``.
DEFAULT_QUEUES = StaticQueueLookup(local_queues=[
    {"metadata": {"name": "default", "namespace": "default"}, "spec": {"clusterQueue": "cq"}},
    {"metadata": {"name": "default", "namespace": "held"},
     "spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}}])
NO_DEFAULT_QUEUE = 'queue-name must not be empty in namespace with default queue'


@pytest.mark.parametrize(("namespace", "options", "labelled"), [
    ("default", {}, True),
    ("other", {}, False),
    # Kueue's queue manager forgets a held LocalQueue: no default while it is stopped.
    ("held", {}, False),
    # An explicit answer wins over the queues'.
    ("default", {"default_local_queue_exist": lambda ns: False}, False),
])
async def test_default_local_queue_comes_from_the_queues(
        namespace: str, options: dict[str, Any], labelled: bool) -> None:
    # Kueue's webhooks ask their queue manager (Queues.DefaultLocalQueueExist): given the
    # queues, the webhook needs no separate default_local_queue_exist.
    w = World()
    await w.setup()
    for name in ("other", "held"):
        await w.client.create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name}})
    webhook = BatchJobWebhook(w.client, integration_manager=manager(), queues=DEFAULT_QUEUES,
                              **options)
    obj = job(namespace, queue=None)
    await webhook.default(obj)
    assert obj["metadata"]["labels"] == ({c.QUEUE_LABEL: "default"} if labelled else {})
    assert obj["spec"]["suspend"] is labelled


async def test_queue_name_must_stay_in_a_namespace_with_a_default_queue() -> None:
    # Kueue's ValidateJobOnUpdate with the queue manager's DefaultLocalQueueExist: a
    # suspended Job may change its queue, but not drop it where a default queue exists.
    webhook = BatchJobWebhook(None, queues=DEFAULT_QUEUES)
    with pytest.raises(AggregateError) as agg:
        await webhook.validate_update(job(suspend=True), job(queue=None, suspend=True))
    assert str(agg.value) == (
        f'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": {NO_DEFAULT_QUEUE}')
    assert await webhook.validate_update(job("other", suspend=True),
                                         job("other", queue=None, suspend=True)) is None
    assert await webhook.validate_update(job(suspend=True),
                                         job(queue="changed", suspend=True)) is None
    base = BaseWebhook(BatchJob, None, queues=DEFAULT_QUEUES)
    with pytest.raises(AggregateError, match=NO_DEFAULT_QUEUE):
        await base.validate_update(job(suspend=True), job(queue=None, suspend=True))


class CustomJob(BatchJob):
    """JobWithCustomValidation returning (or raising) what the test says."""

    outcome: Any = None

    def validate_on_create(self) -> ErrorList:
        return self._outcome()

    def validate_on_update(self, old_job: Any) -> ErrorList:
        return self._outcome()

    def _outcome(self) -> ErrorList:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return ErrorList(self.outcome or [])


CUSTOM = invalid(new_path("metadata", "annotations"), None, "custom validation test error")


@pytest.mark.kueue_case(
    "TestValidateOnCreate/valid request",
    "TestValidateOnCreate/invalid request",
    "TestValidateOnCreate/invalid request custom validation error",
)
async def test_w11_w13_validate_create() -> None:
    w = World()
    webhook = BaseWebhook(CustomJob, w.client)
    CustomJob.outcome = None
    assert await webhook.validate_create(job()) is None
    bad = job(**{c.MAX_EXEC_TIME_SECONDS_LABEL: "0"})
    CustomJob.outcome = [CUSTOM]
    with pytest.raises(AggregateError) as agg:
        await webhook.validate_create(bad)
    assert [str(e) for e in agg.value.errors] == [
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: "
        "should be greater than 0", str(CUSTOM)]
    CustomJob.outcome = RuntimeError("custom failure")
    with pytest.raises(RuntimeError, match="custom failure"):
        await webhook.validate_create(bad)


@pytest.mark.kueue_case(
    "TestValidateOnUpdate/valid request",
    "TestValidateOnUpdate/invalid request",
    "TestValidateOnUpdate/invalid request custom validation error",
)
async def test_w14_w16_validate_update() -> None:
    w = World()
    webhook = BaseWebhook(CustomJob, w.client)
    CustomJob.outcome = None
    assert await webhook.validate_update(job(), job()) is None
    CustomJob.outcome = [CUSTOM]
    with pytest.raises(AggregateError) as agg:
        await webhook.validate_update(job(), job(queue="changed"))
    assert str(agg.value) == (
        '[metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "changed": '
        f"field is immutable, {CUSTOM}]")
    CustomJob.outcome = RuntimeError("custom failure")
    with pytest.raises(RuntimeError, match="custom failure"):
        await webhook.validate_update(job(), job(queue="changed"))


@pytest.mark.kueue_case(
    "TestValidateCreate/invalid partial admission annotation (format)",
    "TestValidateCreate/invalid partial admission annotation (badValue)",
    "TestValidateCreate/valid sync completions annotation, wrong job completions type (default)",
)
@pytest.mark.parametrize(("annotations", "spec", "message"), [
    ({c.JOB_MIN_PARALLELISM_ANNOTATION: "5"}, {"parallelism": 4, "completions": 6},
     "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 5: "
     "should be between 0 and 3"),
    ({c.JOB_MIN_PARALLELISM_ANNOTATION: "NaN"}, {"parallelism": 4, "completions": 6},
     'metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "NaN": '
     'strconv.Atoi: parsing "NaN": invalid syntax'),
    ({c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true"},
     {"parallelism": 4, "completions": 4},
     'metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]: Invalid '
     'value: "true": should not be enabled for NonIndexed jobs'),
])
async def test_batch_job_partial_admission_rules(annotations: dict[str, str],
                                                 spec: dict[str, Any], message: str) -> None:
    obj = job()
    obj["metadata"]["annotations"] = annotations
    obj["spec"].update(spec)
    with pytest.raises(AggregateError, match=None) as agg:
        await BatchJobWebhook(None).validate_create(obj)
    assert [str(e) for e in agg.value.errors] == [message]


@pytest.mark.kueue_case(
    "TestValidateUpdate/immutable parallelism while unsuspended with partial admission enabled",
)
async def test_batch_job_parallelism_frozen_while_partially_admitted_job_runs() -> None:
    old = job()
    old["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: "2"}
    old["spec"]["parallelism"] = 4
    new = job()
    new["metadata"]["annotations"] = dict(old["metadata"]["annotations"])
    new["spec"]["parallelism"] = 3
    with pytest.raises(AggregateError) as agg:
        await BatchJobWebhook(None).validate_update(old, new)
    assert str(agg.value) == ("spec.parallelism: Forbidden: cannot change when partial "
                              "admission is enabled and the job is not suspended")


async def test_through_the_admission_chain_patches_only_what_changes() -> None:
    w = World()
    await w.setup()
    webhooks = WebhookServer()
    paths = setup_webhook(webhooks, w.client, integration_manager=manager())
    assert paths == ["/mutate-batch-v1-job", "/validate-batch-v1-job"]
    w.server.add_mutating_webhook(webhooks.as_admission_hook(paths[0]), name="mjob.kb.io",
                                  rules=[rule("batch", "v1", "jobs", ["CREATE"])])
    w.server.add_validating_webhook(webhooks.as_admission_hook(paths[1]), name="vjob.kb.io",
                                    rules=[rule("batch", "v1", "jobs", ["CREATE", "UPDATE"])])
    obj = job("ns")
    obj["spec"]["somethingNewer"] = {"kept": True}
    del obj["metadata"]["uid"]
    created = await w.client.create(obj)
    assert created["spec"]["suspend"] is True
    assert created["spec"]["somethingNewer"] == {"kept": True}
    bad = job("ns", queue="Not_A_Name")
    bad["metadata"]["name"] = "bad"
    del bad["metadata"]["uid"]
    with pytest.raises(errors.Forbidden, match="queue-name"):
        await w.client.create(bad)
    created["metadata"]["labels"][c.QUEUE_LABEL] = "other"
    created["spec"]["suspend"] = False
    with pytest.raises(errors.Forbidden, match="field is immutable"):
        await w.client.update(created)


async def test_noop_webhook_and_round_trip_mode() -> None:
    webhooks = WebhookServer()
    assert setup_webhook(webhooks, None, noop_webhook=True) == [
        "/mutate-batch-v1-job", "/validate-batch-v1-job"]
    await NoopWebhook().default(job())
    other = WebhookServer()
    assert setup_base_webhook(other, JOB_GVK, NoopWebhook(),
                              lossless_mode=LosslessMode.DROP_ROUND_TRIP_REMOVES)


class Dropping(BaseWebhook):
    """A defaulter that (wrongly) deletes a field it does not understand."""

    async def default(self, obj: dict[str, Any], request: Any = None) -> None:
        await super().default(obj, request)
        obj["spec"].pop("somethingNewer", None)


@pytest.mark.parametrize(("mode", "kept"), [(LosslessMode.DROP_ALL_REMOVES, True),
                                            (LosslessMode.DROP_ROUND_TRIP_REMOVES, False)])
async def test_lossless_modes(mode: LosslessMode, kept: bool) -> None:
    w = World()
    await w.setup()
    webhooks = WebhookServer()
    setup_base_webhook(webhooks, JOB_GVK,
                       Dropping(BatchJob, w.client, integration_manager=manager()),
                       lossless_mode=mode)
    w.server.add_mutating_webhook(webhooks.as_admission_hook("/mutate-batch-v1-job"),
                                  rules=[rule("batch", "v1", "jobs", ["CREATE"])])
    obj = job("ns")
    del obj["metadata"]["uid"]
    obj["spec"]["somethingNewer"] = {"x": 1}
    created = await w.client.create(obj)
    assert created["spec"]["suspend"] is True
    assert ("somethingNewer" in created["spec"]) is kept
