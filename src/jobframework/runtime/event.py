"""The object events that sources emit and that handlers and predicates consume.

As controller-runtime's ``event`` package: :class:`CreateEvent`, :class:`UpdateEvent`,
:class:`DeleteEvent` and :class:`GenericEvent`. They sit below :mod:`.handler`,
:mod:`.predicate` and :mod:`.source`, which all speak them. (Not to be confused with
:mod:`.events`, the events.k8s.io/v1 recorder.)

The objects in events are the informer's: handlers and predicates must not mutate them.
"""

from __future__ import annotations

import attrs

from .objects import Object

__all__ = ["CreateEvent", "DeleteEvent", "GenericEvent", "UpdateEvent"]


@attrs.frozen
class CreateEvent:
    """An object appeared (or was listed for the first time)."""

    object: Object


@attrs.frozen
class UpdateEvent:
    """An object changed from ``object_old`` to ``object_new``."""

    object_old: Object
    object_new: Object


@attrs.frozen
class DeleteEvent:
    """An object was deleted.

    ``delete_state_unknown`` is True when the deletion was inferred from a relist: the
    object is the last state the cache saw, possibly stale.
    """

    object: Object
    delete_state_unknown: bool = False


@attrs.frozen
class GenericEvent:
    """An event from outside the cluster's watch (e.g. a timer or an external system)."""

    object: Object
