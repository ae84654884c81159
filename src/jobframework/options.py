"""The options of job reconcilers and webhooks: Kueue's jobframework ``Options``.

:class:`ReconcilerOptions` is what :func:`~jobframework.reconciler.new_reconciler`, the
reconciler factories and :func:`~jobframework.reconciler.setup_controllers` take;
:func:`~jobframework.config.reconciler_options_from` builds it from Kueue's
Configuration. This module sits below both so that neither imports the other; every name
is re-exported by :mod:`jobframework.reconciler`.

The classes are defined in :mod:`jobframework.integrations`, beside the integration
callbacks whose types name them (a reconciler factory takes ``ReconcilerOptions``, whose
``integration_manager`` is an ``IntegrationManager`` holding those callbacks): one module
holds that cycle of types, so no two modules import each other. Import them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .integrations import ReconcilerOptionOverrides as ReconcilerOptionOverrides
from .integrations import ReconcilerOptions as ReconcilerOptions
from .integrations import WorkloadRetentionPolicy as WorkloadRetentionPolicy

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ReconcilerOptionOverrides",
    "ReconcilerOptions",
    "WorkloadRetentionPolicy",
    "process_options",
]


def process_options(
    options: ReconcilerOptions | None = None, **overrides: Unpack[ReconcilerOptionOverrides]
) -> ReconcilerOptions:
    """Options with ``overrides`` applied (``ProcessOptions``)."""
    base = options or ReconcilerOptions()
    return attrs.evolve(base, **overrides) if overrides else base
