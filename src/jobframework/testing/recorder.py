"""An event recorder for tests: it keeps every event instead of writing Event objects.

One :class:`EventCollector` serves any number of reporting controllers
(:meth:`EventCollector.for_`), so a test sees the events of its integration's reconciler
and of the Kueue stand-in in one list, in the order they were recorded::

    collector = EventCollector()
    mgr = Manager(client, event_recorder_factory=collector.for_)
    ...
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in collector.events
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

import attrs

from ..runtime.events import EventRecorder
from ..runtime.objects import name_of, namespace_of

__all__ = ["EventCollector", "RecordedEvent", "ReporterRecorder"]


@attrs.frozen
class RecordedEvent:
    """One event: its ``type``, ``reason`` and ``message``, the object it is about (a
    copy, as it was when the event was recorded) and the reporting controller."""

    type: str
    reason: str
    message: str
    object: Mapping[str, Any]
    reporter: str = ""

    @property
    def triple(self) -> tuple[str, str, str]:
        """``(type, reason, message)``."""
        return (self.type, self.reason, self.message)

    @property
    def kind(self) -> str:
        """The involved object's kind."""
        return str(self.object.get("kind", ""))

    @property
    def name(self) -> str:
        """The involved object's name."""
        return name_of(self.object)

    @property
    def namespace(self) -> str:
        """The involved object's namespace (empty for cluster-scoped objects)."""
        return namespace_of(self.object)


class EventCollector:
    """Collects the events of every recorder it hands out (and its own :meth:`event`)."""

    def __init__(self) -> None:
        #: Every event recorded, oldest first.
        self.records: list[RecordedEvent] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str,
              **_: Any) -> None:
        """Record an event about ``obj`` with no reporting controller."""
        self._add(obj, type, reason, message, "")

    def eventf(self, obj: Mapping[str, Any], type: str, reason: str, message_fmt: str,
               *args: object, **_: Any) -> None:
        """:meth:`event` with a ``%``-format message."""
        self.event(obj, type, reason, message_fmt % args if args else message_fmt)

    def for_(self, reporter: str) -> ReporterRecorder:
        """A recorder whose events are collected here, reported as ``reporter``."""
        return ReporterRecorder(self, reporter)

    @property
    def events(self) -> list[tuple[str, str, str]]:
        """``(type, reason, message)`` of every event, oldest first."""
        return [r.triple for r in self.records]

    def reasons(self, kind: str | None = None) -> list[str]:
        """The reasons, oldest first (only events about ``kind`` objects when given)."""
        return [r.reason for r in self.records if kind is None or r.kind == kind]

    def about(self, obj_or_name: Mapping[str, Any] | str, *,
              kind: str | None = None) -> list[RecordedEvent]:
        """The events about one object, given itself or its name (and optionally kind)."""
        if isinstance(obj_or_name, str):
            name, namespace = obj_or_name, None
        else:
            name, namespace = name_of(obj_or_name), namespace_of(obj_or_name)
            kind = kind or str(obj_or_name.get("kind") or "") or None
        return [r for r in self.records
                if r.name == name and (namespace is None or r.namespace == namespace)
                and (kind is None or r.kind == kind)]

    def clear(self) -> None:
        """Forget every event recorded so far."""
        self.records.clear()

    def _add(self, obj: Mapping[str, Any], type: str, reason: str, message: str,
             reporter: str) -> None:
        self.records.append(RecordedEvent(type, reason, message, copy.deepcopy(dict(obj)),
                                          reporter))


class ReporterRecorder(EventRecorder):
    """A recorder handed out by :meth:`EventCollector.for_`: a runtime
    :class:`~jobframework.runtime.events.EventRecorder` (so a
    :class:`~jobframework.runtime.manager.Manager` can take :meth:`EventCollector.for_`
    as its ``event_recorder_factory``) whose events go to the collector, not the API."""

    def __init__(self, collector: EventCollector, reporting_controller: str) -> None:
        super().__init__(cast(Any, None), reporting_controller, "test")
        self.collector = collector

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              action: str | None = None, related: Mapping[str, Any] | None = None) -> None:
        """Record an event about ``obj``."""
        del action, related
        self.collector._add(obj, type, reason, message, self.reporting_controller)
