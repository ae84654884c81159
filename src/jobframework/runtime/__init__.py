"""The controller runtime: what Kueue's reconcilers get from controller-runtime, in asyncio.

Layers, lowest first (a module imports only from layers below it):

- :mod:`.client` — the :class:`~.client.Client` protocol; :class:`~.client.rest.RestClient`
  for a real API server (kubernetes-asyncio auth and transport, raw JSON), discovery;
- :mod:`.cache` — reflectors, informers, indexers, the cache-backed reader;
- :mod:`.workqueue` — the rate-limited work queue;
- :mod:`.controller`, :mod:`.builder`, :mod:`.manager` — controllers, the builder, the
  manager with :mod:`.leaderelection`, :mod:`.healthz` and :mod:`.metrics`;
- :mod:`.events` — the events.k8s.io/v1 recorder.
- :mod:`.runner` — a manager's process: event loop, garbage collector, signals
  (:func:`~.runner.run`, :func:`~.runner.setup_signal_handler`).

The names most programs need are re-exported here; see ``docs/runtime.md``.
"""

from .builder import ControllerBuilder
from .clock import Clock, ManualClock, RealClock
from .errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
)
from .events import EventRecorder
from .handler import EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc
from .leaderelection import LeaderElectionConfig
from .manager import LeaderElectionLost, Manager
from .objects import GVK, GVR, GroupVersionKind, GroupVersionResource, Object, ObjectKey
from .predicate import (
    AnnotationChangedPredicate,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    ResourceVersionChangedPredicate,
)
from .reconcile import Reconciler, Request, Result, TerminalError
from .runner import run, setup_signal_handler

__all__ = [
    "GVK",
    "GVR",
    "AlreadyExists",
    "AnnotationChangedPredicate",
    "ApiError",
    "Clock",
    "Conflict",
    "ControllerBuilder",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventRecorder",
    "Forbidden",
    "GenerationChangedPredicate",
    "Gone",
    "GroupVersionKind",
    "GroupVersionResource",
    "Invalid",
    "LabelChangedPredicate",
    "LeaderElectionConfig",
    "LeaderElectionLost",
    "Manager",
    "ManualClock",
    "NotFound",
    "Object",
    "ObjectKey",
    "RealClock",
    "Reconciler",
    "Request",
    "ResourceVersionChangedPredicate",
    "Result",
    "TerminalError",
    "run",
    "setup_signal_handler",
]
