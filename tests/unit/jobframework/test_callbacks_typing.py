"""The integration callbacks are typed (issue #12): mypy rejects a callback our code would
fail to call (a ``setup_webhook`` missing a keyword ``setup_controllers`` passes, a reconciler
factory of the wrong shape) and a misspelt ``IntegrationCallbacks`` field, and accepts the
four reference integrations' callbacks."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from mypy import api as mypy_api

from jobframework.integrations import (
    IntegrationCallbacks,
    IntegrationManager,
    MissingMandatoryFieldError,
)
from jobframework.runtime.objects import GVK

#: Each line that mypy must reject ends with ``# rejected: <text of the error>``; every other
#: line must pass.
SAMPLE = """\
from collections.abc import Awaitable
from typing import Any

import integrations.appwrapper.setup as appwrapper
import integrations.batchjob.setup as batchjob
import integrations.daemonjob.setup as daemonjob
import integrations.jobflow.setup as jobflow
from integrations.appwrapper.job import AppWrapperJob
from integrations.jobflow.job import JobFlowJob
from jobframework.constants import DEFAULT_FEATURES, FeatureGates
from jobframework.integrations import (
    CanSupportIntegration,
    EventRecorderLike,
    IntegrationCallbacks,
    ReconcilerFactory,
    SetupIndexes,
    SetupWebhook,
)
from jobframework.reconciler import (
    GenericReconciler,
    new_generic_reconciler_factory,
    new_noop_reconciler_factory,
)
from jobframework.options import ReconcilerOptions
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK
from jobframework.testing.pytest_plugin import callbacks_for
from jobframework.webhook.server import WebhookServer

WIDGET = GVK("example.com", "v1", "Widget")

# Accepted: the reference integrations' callbacks, and what the framework builds.
CALLBACKS: list[IntegrationCallbacks] = [
    batchjob.CALLBACKS, jobflow.CALLBACKS, daemonjob.CALLBACKS, appwrapper.CALLBACKS]
WEBHOOKS: list[SetupWebhook] = [
    batchjob.setup_webhook, jobflow.setup_kueue_webhook, daemonjob.setup_kueue_webhook,
    appwrapper.setup_kueue_webhook]
INDEXES: list[SetupIndexes] = [
    batchjob.setup_indexes, jobflow.setup_indexes, daemonjob.setup_indexes,
    appwrapper.setup_indexes, lambda indexer: None]
FACTORIES: list[ReconcilerFactory] = [
    batchjob.CALLBACKS.new_reconciler, new_noop_reconciler_factory(WIDGET),
    new_generic_reconciler_factory(AppWrapperJob)]
REBUILT = IntegrationCallbacks(
    new_job=JobFlowJob,
    new_reconciler=new_generic_reconciler_factory(JobFlowJob),
    new_additional_reconcilers=[new_noop_reconciler_factory(WIDGET)],
    setup_webhook=jobflow.setup_kueue_webhook, job_type=WIDGET,
    setup_indexes=jobflow.setup_indexes, can_support_integration=lambda **options: True)
PLUGIN = callbacks_for(JobFlowJob)


def wire(cb: IntegrationCallbacks, server: WebhookServer, client: Client,
         recorder: EventRecorderLike) -> None:
    cb.new_reconciler(client, None, recorder, options=ReconcilerOptions()).setup_with_manager(None)
    cb.new_reconciler(client, None, recorder, wait_for_pods_ready=True)
    cb.new_reconciler(client, None, recorder, wait_for_pod_ready=True)  # rejected: "wait_for_pod_ready"
    paths: list[str] = cb.setup_webhook(server, client, noop_webhook=True)
    cb.setup_webhook(server, client, noop=True)  # rejected: Unexpected keyword argument "noop"


def can_support(**options: Any) -> bool:
    return True


def can_support_nothing() -> bool:
    return True


def webhook_missing_a_keyword(
    server: WebhookServer, client: Any = None, *, integration_manager: Any = None,
    managed_jobs_namespace_selector: Any = None, queues: Any = None,
    features: FeatureGates = DEFAULT_FEATURES, noop_webhook: bool = False,
) -> list[str]:
    return []


def webhook_misspelt_keyword(
    server: WebhookServer, client: Any = None, *, integration_manager: Any = None,
    manage_job_without_queue_name: bool = False, managed_jobs_namespace_selector: Any = None,
    queues: Any = None, features: FeatureGates = DEFAULT_FEATURES, noop_webhook: bool = False,
) -> list[str]:
    return []


def webhook_with_options(server: WebhookServer, client: Any = None, **options: Any) -> None:
    return None


def factory_without_indexer(client: Any, recorder: Any, options: Any = None) -> GenericReconciler:
    raise NotImplementedError


def factory_of_nothing(client: Any, indexer: Any, recorder: Any, options: Any = None) -> None:
    return None


def factory_without_options(client: Any, indexer: Any, recorder: Any) -> GenericReconciler:
    raise NotImplementedError


def indexes_of_two(indexer: Any, gvk: GVK) -> Awaitable[None]:
    raise NotImplementedError


F = batchjob.CALLBACKS.new_reconciler
W = batchjob.setup_webhook
J = WIDGET
CB = IntegrationCallbacks
OK = CB(new_reconciler=F, setup_webhook=W, job_type=J, can_support_integration=can_support)
CB(new_reconciler=F, setup_webhook=webhook_missing_a_keyword, job_type=J)  # rejected: Argument "setup_webhook"
CB(new_reconciler=F, setup_webhook=webhook_misspelt_keyword, job_type=J)  # rejected: Argument "setup_webhook"
CB(new_reconciler=F, setup_webhook=webhook_with_options, job_type=J)  # rejected: Argument "setup_webhook"
CB(new_reconciler=factory_without_indexer, setup_webhook=W, job_type=J)  # rejected: Argument "new_reconciler"
CB(new_reconciler=factory_of_nothing, setup_webhook=W, job_type=J)  # rejected: Argument "new_reconciler"
CB(new_reconciler=factory_without_options, setup_webhook=W, job_type=J)  # rejected: Argument "new_reconciler"
CB(new_reconciler=F, setup_webhook=W, job_type=J, new_additional_reconcilers=[factory_without_indexer])  # rejected: List item 0
CB(new_reconciler=F, setup_webhook=W, job_type=J, setup_indexes=indexes_of_two)  # rejected: Argument "setup_indexes"
CB(new_reconciler=F, setup_webhook=W, job_type=J, can_support_integration=can_support_nothing)  # rejected: Argument "can_support_integration"
CB(new_reconciler=F, setup_webhook=W, job_type=J, setup_index=batchjob.setup_indexes)  # rejected: Unexpected keyword argument "setup_index"
CB(new_reconciler=F, setup_webhooks=W, job_type=J)  # rejected: Unexpected keyword argument "setup_webhooks"
CB(setup_webhook=W, job_type=J)  # rejected: Missing named argument "new_reconciler"
CB(new_reconciler=None, setup_webhook=W, job_type=J)  # rejected: incompatible type "None"
"""  # noqa: E501 (each rejected line carries the error it expects)

_REJECTED = re.compile(r"#\s*rejected:\s*(.*)$")


def _expected() -> dict[int, str]:
    return {n: m.group(1).strip() for n, line in enumerate(SAMPLE.splitlines(), 1)
            if (m := _REJECTED.search(line))}


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    tmp = tmp_path_factory.mktemp("callbacks_typing")
    sample = tmp / "sample.py"
    sample.write_text(SAMPLE)
    out, err, status = mypy_api.run([
        "--strict", "--no-error-summary", "--cache-dir", str(tmp / "cache"),
        "--follow-imports", "silent", str(sample)])
    assert status in (0, 1), (out, err)
    errors: dict[int, list[str]] = {}
    for line in out.splitlines():
        m = re.match(r".*sample\.py:(\d+): error: (.*)$", line)
        if m:
            errors.setdefault(int(m.group(1)), []).append(m.group(2))
    return errors


def test_the_sample_marks_every_kind_of_mistake() -> None:
    reasons = " ".join(_expected().values())
    for field in ("setup_webhook", "new_reconciler", "setup_indexes",
                  "can_support_integration", "Unexpected keyword argument"):
        assert field in reasons


def test_mypy_rejects_exactly_the_marked_lines(mypy_errors: dict[int, list[str]]) -> None:
    expected = _expected()
    lines = SAMPLE.splitlines()
    unexpected = {n: (lines[n - 1], e) for n, e in mypy_errors.items() if n not in expected}
    missed = {n: lines[n - 1] for n in expected if n not in mypy_errors}
    assert not unexpected, f"mypy rejects lines it should accept: {unexpected}"
    assert not missed, f"mypy accepts lines it should reject: {missed}"
    for n, text in expected.items():
        assert any(text in e for e in mypy_errors[n]), (n, text, mypy_errors[n])


@pytest.mark.parametrize(("missing", "go_field"),
                         [("new_reconciler", "NewReconciler"), ("setup_webhook", "SetupWebhook")])
def test_a_mandatory_callback_left_out_is_still_kueues_registration_error(
    missing: str, go_field: str
) -> None:
    # Required in the type (the sample's "Missing named argument" line), but at run time an
    # untyped caller that leaves one out gets Kueue's error at registration, as before.
    fields: dict[str, Any] = {"new_reconciler": _noop, "setup_webhook": _noop,
                              "job_type": GVK("example.com", "v1", "Widget")}
    del fields[missing]
    callbacks = IntegrationCallbacks(**fields)
    assert getattr(callbacks, missing) is None
    with pytest.raises(MissingMandatoryFieldError,
                       match=f'^mandatory field missing "{go_field}" for "fw"$'):
        IntegrationManager().register_integration("fw", callbacks)


def _noop(*args: Any, **kwargs: Any) -> list[str]:
    return []


def _reference_webhooks() -> list[tuple[str, Any, GVK]]:
    # The packages re-export a ``setup`` function under the submodule's name.
    appwrapper, batchjob, daemonjob, jobflow = (
        importlib.import_module(f"integrations.{n}.setup")
        for n in ("appwrapper", "batchjob", "daemonjob", "jobflow"))
    return [("batchjob", batchjob.setup_webhook, batchjob.JOB_GVK),
            ("jobflow", jobflow.setup_kueue_webhook, jobflow.JOBFLOW_GVK),
            ("daemonjob", daemonjob.setup_kueue_webhook, daemonjob.DAEMONJOB_GVK),
            ("appwrapper", appwrapper.setup_kueue_webhook, appwrapper.APPWRAPPER_GVK)]


@pytest.mark.parametrize(("name", "setup_webhook", "gvk"), _reference_webhooks(),
                         ids=[w[0] for w in _reference_webhooks()])
def test_reference_webhooks_take_every_keyword_the_framework_passes(
    name: str, setup_webhook: Any, gvk: GVK
) -> None:
    from jobframework.constants import DEFAULT_FEATURES
    from jobframework.webhook.builder import mutate_path, validate_path
    from jobframework.webhook.server import WebhookServer

    server = WebhookServer()
    paths = setup_webhook(server, None, integration_manager=IntegrationManager(),
                          manage_jobs_without_queue_name=True,
                          managed_jobs_namespace_selector=None, queues=None,
                          features=DEFAULT_FEATURES)
    assert {mutate_path(gvk), validate_path(gvk)} <= set(paths)
    # A disabled framework: a webhook allowing everything, for its own kind only.
    noop = WebhookServer()
    assert setup_webhook(noop, None, noop_webhook=True) == [mutate_path(gvk), validate_path(gvk)]
