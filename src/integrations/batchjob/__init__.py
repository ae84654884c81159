"""Kueue's batch/v1 Job integration (framework ``batch/job``), the reference
:class:`~jobframework.interface.GenericJob`.

- :class:`BatchJob` — the job adapter;
- :class:`BatchJobWebhook` — defaulting and validation;
- :class:`BatchJobMultiKueueAdapter` — the MultiKueue adapter (manager side);
- :data:`CALLBACKS` / :func:`register` — the integration record;
- :func:`setup` and the rest of a reference integration's surface, so our manager can run
  it as an external framework (``python -m integrations run --integrations batchjob``).
"""

from .job import FRAMEWORK_NAME, JOB_GVK, BatchJob, parse_indexes, terminal_indexes_count
from .multikueue import BatchJobMultiKueueAdapter
from .rbac import RBAC
from .setup import (
    CALLBACKS,
    EXTERNAL_FRAMEWORK_NAME,
    BatchJobSetup,
    load_crds,
    probe_object,
    register,
    setup,
    setup_indexes,
    setup_webhook,
    watch_child_jobs,
    webhook_resources,
)
from .webhook import BatchJobWebhook, validate_partial_admission_create

__all__ = [
    "CALLBACKS",
    "EXTERNAL_FRAMEWORK_NAME",
    "FRAMEWORK_NAME",
    "JOB_GVK",
    "RBAC",
    "BatchJob",
    "BatchJobMultiKueueAdapter",
    "BatchJobSetup",
    "BatchJobWebhook",
    "load_crds",
    "parse_indexes",
    "probe_object",
    "register",
    "setup",
    "setup_indexes",
    "setup_webhook",
    "terminal_indexes_count",
    "validate_partial_admission_create",
    "watch_child_jobs",
    "webhook_resources",
]
