"""Predicates: filters deciding which object events reach a controller's event handler.

A :class:`Predicate` answers, per event kind, whether the event should be handled. They
combine with :func:`and_`, :func:`or_`, :func:`not_`. The common ones, as
controller-runtime's ``predicate`` package:

- :class:`GenerationChangedPredicate`: updates only when ``metadata.generation`` changed,
  i.e. the spec changed (status-only writes are ignored);
- :class:`LabelChangedPredicate`, :class:`AnnotationChangedPredicate`,
  :class:`ResourceVersionChangedPredicate`;
- :class:`Funcs` for ad-hoc filters and :func:`new_predicate_funcs` for one function
  applied to the object of every event.

Create, delete and generic events pass every built-in change predicate; only updates
are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol, runtime_checkable

from .event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from .objects import Object, annotations_of, labels_of, metadata, resource_version_of
from .selectors import LabelSelector

__all__ = [
    "AnnotationChangedPredicate",
    "Funcs",
    "GenerationChangedPredicate",
    "LabelChangedPredicate",
    "LabelSelectorPredicate",
    "Predicate",
    "ResourceVersionChangedPredicate",
    "and_",
    "new_predicate_funcs",
    "not_",
    "or_",
]


@runtime_checkable
class Predicate(Protocol):
    """Filters events before they reach a handler (True: handle it)."""

    def create(self, event: CreateEvent) -> bool:
        """Whether to handle a create."""

    def update(self, event: UpdateEvent) -> bool:
        """Whether to handle an update."""

    def delete(self, event: DeleteEvent) -> bool:
        """Whether to handle a delete."""

    def generic(self, event: GenericEvent) -> bool:
        """Whether to handle a generic event."""


class Funcs:
    """A predicate from optional functions; a missing function means "handle it"."""

    def __init__(
        self,
        *,
        create: Callable[[CreateEvent], bool] | None = None,
        update: Callable[[UpdateEvent], bool] | None = None,
        delete: Callable[[DeleteEvent], bool] | None = None,
        generic: Callable[[GenericEvent], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete
        self._generic = generic

    def create(self, event: CreateEvent) -> bool:
        """Apply the create function (True when unset)."""
        return self._create(event) if self._create else True

    def update(self, event: UpdateEvent) -> bool:
        """Apply the update function (True when unset)."""
        return self._update(event) if self._update else True

    def delete(self, event: DeleteEvent) -> bool:
        """Apply the delete function (True when unset)."""
        return self._delete(event) if self._delete else True

    def generic(self, event: GenericEvent) -> bool:
        """Apply the generic function (True when unset)."""
        return self._generic(event) if self._generic else True


def new_predicate_funcs(fn: Callable[[Object], bool]) -> Funcs:
    """A predicate applying ``fn`` to the event's object (the new one for updates)."""
    return Funcs(
        create=lambda e: fn(e.object),
        update=lambda e: fn(e.object_new),
        delete=lambda e: fn(e.object),
        generic=lambda e: fn(e.object),
    )


class _UpdateOnly:
    """Base for predicates that pass everything but compare updates."""

    def create(self, event: CreateEvent) -> bool:
        """Creates always pass."""
        return True

    def delete(self, event: DeleteEvent) -> bool:
        """Deletes always pass."""
        return True

    def generic(self, event: GenericEvent) -> bool:
        """Generic events always pass."""
        return True

    def update(self, event: UpdateEvent) -> bool:
        """Compare old and new (overridden)."""
        raise NotImplementedError


def _has_metadata(event: UpdateEvent) -> bool:
    return bool(metadata(event.object_old)) and bool(metadata(event.object_new))


class GenerationChangedPredicate(_UpdateOnly):
    """Updates pass only when ``metadata.generation`` changed (spec edits, not status)."""

    #: Compares metadata only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def update(self, event: UpdateEvent) -> bool:
        """True when both objects exist and their generations differ."""
        if not _has_metadata(event):
            return False
        old: Any = metadata(event.object_old).get("generation")
        new: Any = metadata(event.object_new).get("generation")
        return bool(old != new)


class LabelChangedPredicate(_UpdateOnly):
    """Updates pass only when ``metadata.labels`` changed."""

    #: Compares metadata only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def update(self, event: UpdateEvent) -> bool:
        """True when the label maps differ."""
        if not _has_metadata(event):
            return False
        return labels_of(event.object_old) != labels_of(event.object_new)


class AnnotationChangedPredicate(_UpdateOnly):
    """Updates pass only when ``metadata.annotations`` changed."""

    #: Compares metadata only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def update(self, event: UpdateEvent) -> bool:
        """True when the annotation maps differ."""
        if not _has_metadata(event):
            return False
        return annotations_of(event.object_old) != annotations_of(event.object_new)


class ResourceVersionChangedPredicate(_UpdateOnly):
    """Updates pass only when ``metadata.resourceVersion`` changed (drops resyncs)."""

    #: Compares metadata only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def update(self, event: UpdateEvent) -> bool:
        """True when the resourceVersions differ."""
        if not _has_metadata(event):
            return False
        return resource_version_of(event.object_old) != resource_version_of(event.object_new)


class LabelSelectorPredicate:
    """Events pass only for objects whose labels match ``selector`` (new object on update)."""

    #: Reads the labels only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def __init__(self, selector: LabelSelector | str) -> None:
        self.selector = (selector if isinstance(selector, LabelSelector)
                         else LabelSelector.parse(selector))

    def _match(self, obj: Object) -> bool:
        return self.selector.matches(labels_of(obj))

    def create(self, event: CreateEvent) -> bool:
        """Match the created object."""
        return self._match(event.object)

    def update(self, event: UpdateEvent) -> bool:
        """Match the new object."""
        return self._match(event.object_new)

    def delete(self, event: DeleteEvent) -> bool:
        """Match the deleted object."""
        return self._match(event.object)

    def generic(self, event: GenericEvent) -> bool:
        """Match the object."""
        return self._match(event.object)


class _And:
    def __init__(self, preds: tuple[Predicate, ...]) -> None:
        self.preds = preds

    def create(self, event: CreateEvent) -> bool:
        return all(p.create(event) for p in self.preds)

    def update(self, event: UpdateEvent) -> bool:
        return all(p.update(event) for p in self.preds)

    def delete(self, event: DeleteEvent) -> bool:
        return all(p.delete(event) for p in self.preds)

    def generic(self, event: GenericEvent) -> bool:
        return all(p.generic(event) for p in self.preds)


class _Or:
    def __init__(self, preds: tuple[Predicate, ...]) -> None:
        self.preds = preds

    def create(self, event: CreateEvent) -> bool:
        return any(p.create(event) for p in self.preds)

    def update(self, event: UpdateEvent) -> bool:
        return any(p.update(event) for p in self.preds)

    def delete(self, event: DeleteEvent) -> bool:
        return any(p.delete(event) for p in self.preds)

    def generic(self, event: GenericEvent) -> bool:
        return any(p.generic(event) for p in self.preds)


class _Not:
    def __init__(self, pred: Predicate) -> None:
        self.pred = pred

    def create(self, event: CreateEvent) -> bool:
        return not self.pred.create(event)

    def update(self, event: UpdateEvent) -> bool:
        return not self.pred.update(event)

    def delete(self, event: DeleteEvent) -> bool:
        return not self.pred.delete(event)

    def generic(self, event: GenericEvent) -> bool:
        return not self.pred.generic(event)


def and_(*predicates: Predicate) -> Predicate:
    """Passes when every predicate passes (vacuously True)."""
    return _And(predicates)


def or_(*predicates: Predicate) -> Predicate:
    """Passes when any predicate passes (False when given none)."""
    return _Or(predicates)


def not_(predicate: Predicate) -> Predicate:
    """Passes when ``predicate`` does not."""
    return _Not(predicate)
