"""Testing kit: an in-memory API server with kube-apiserver semantics.

Build a server, take clients from it, and hand those to the code under test::

    server = APIServer(ManualClock())
    client = server.client()
    await client.create({...})
    await server.settle()   # let garbage collection and namespace cleanup finish

``jobframework.testing.kueue`` plays Kueue's core (:class:`KueueStandIn`: admission,
preemption, eviction) on the server; ``jobframework.testing.pytest_plugin``, loaded by
pytest through the package's ``pytest11`` entry point, gives the users' fixtures
(``kueue_server``, ``kueue_client``, ``kueue``, ``event_recorder``, ``kueue_manager``).
``jobframework.testing.fixtures`` is a pytest plugin with lower-level fixtures;
``jobframework.testing.http`` serves the same server over HTTP. See ``docs/testing.md``
for the manual clock, fault injection and where the in-memory server knowingly differs
from a real kube-apiserver.
"""

from ..runtime.clock import ManualClock
from ._registry import KindInfo, NoKindMatchError
from .admission import RegisteredWebhook, Rule
from .client import InMemoryClient
from .faults import FaultRule, Faults
from .kueue import KueueStandIn, NotAdmissibleError, ScheduleResult, register_kueue_kinds
from .recorder import EventCollector, RecordedEvent
from .server import APIServer

__all__ = [
    "APIServer",
    "EventCollector",
    "FaultRule",
    "Faults",
    "InMemoryClient",
    "KindInfo",
    "KueueStandIn",
    "ManualClock",
    "NoKindMatchError",
    "NotAdmissibleError",
    "RecordedEvent",
    "RegisteredWebhook",
    "Rule",
    "ScheduleResult",
    "register_kueue_kinds",
]
