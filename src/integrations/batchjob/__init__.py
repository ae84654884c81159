"""Kueue's batch/v1 Job integration (framework ``batch/job``), the reference
:class:`~jobframework.interface.GenericJob`.

- :class:`BatchJob` — the job adapter;
- :class:`BatchJobWebhook` — defaulting and validation;
- :data:`CALLBACKS` / :func:`register` — the integration record.
"""

from .job import FRAMEWORK_NAME, JOB_GVK, BatchJob, parse_indexes, terminal_indexes_count
from .setup import CALLBACKS, register, setup_indexes, setup_webhook, watch_child_jobs
from .webhook import BatchJobWebhook, validate_partial_admission_create

__all__ = [
    "CALLBACKS",
    "FRAMEWORK_NAME",
    "JOB_GVK",
    "BatchJob",
    "BatchJobWebhook",
    "parse_indexes",
    "register",
    "setup_indexes",
    "setup_webhook",
    "terminal_indexes_count",
    "validate_partial_admission_create",
    "watch_child_jobs",
]
