"""Testing kit: an in-memory API server with kube-apiserver semantics.

Build a server, take clients from it, and hand those to the code under test::

    server = APIServer(ManualClock())
    client = server.client()
    await client.create({...})
    await server.settle()   # let garbage collection and namespace cleanup finish

``jobframework.testing.fixtures`` is a pytest plugin with ready-made fixtures;
``jobframework.testing.http`` serves the same server over HTTP. See ``docs/testing.md``
for the manual clock, fault injection and where the in-memory server knowingly differs
from a real kube-apiserver.
"""

from ..runtime.clock import ManualClock
from ._registry import KindInfo, NoKindMatchError
from .admission import RegisteredWebhook, Rule
from .client import InMemoryClient
from .faults import FaultRule, Faults
from .server import APIServer

__all__ = [
    "APIServer",
    "FaultRule",
    "Faults",
    "InMemoryClient",
    "KindInfo",
    "ManualClock",
    "NoKindMatchError",
    "RegisteredWebhook",
    "Rule",
]
