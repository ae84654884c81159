"""Clients: the :class:`Client` protocol and its implementations.

- :mod:`.rest` — a real API server, through kubernetes-asyncio's configuration and transport.
- :mod:`jobframework.testing` — the in-memory API server's client.
"""

from .interface import (
    Client,
    FieldSel,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    Reader,
    RESTMapper,
    RESTMapping,
    Selector,
    WatchEvent,
    WatchEventType,
    get_read_only,
)
from .rest import RestClient

__all__ = [
    "Client",
    "FieldSel",
    "ObjectList",
    "PatchType",
    "Preconditions",
    "PropagationPolicy",
    "RESTMapper",
    "RESTMapping",
    "Reader",
    "RestClient",
    "Selector",
    "WatchEvent",
    "WatchEventType",
    "get_read_only",
]
