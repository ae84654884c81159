"""``LosslessDefaulter``: a mutating-webhook defaulter whose JSON patch never deletes what it
did not touch.

The problem (kueue#2878): a defaulter that decodes the request into a typed model and
re-encodes it loses every field the model does not know, and the diff against the raw
request turns them into ``remove`` operations that silently delete user data. Two rules
fix it, both offered here:

- :attr:`LosslessMode.DROP_ALL_REMOVES` — Kueue's original ``LosslessDefaulter``: drop
  every ``remove`` operation (safe because job defaulters only add or change fields);
- :attr:`LosslessMode.DROP_ROUND_TRIP_REMOVES` — controller-runtime's rule since v0.20:
  drop only the removals that the round trip through the model alone produces, so a
  defaulter may still delete a field on purpose.

The defaulter receives the decoded object (``round_trip(raw)``; by default a plain deep copy,
which loses nothing) and edits it in place. Patches are computed with ``jsonpatch`` without
``move`` optimisation, so they contain only ``add``, ``remove`` and ``replace``.
"""

from __future__ import annotations

import copy
import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import jsonpatch

from .runtime.objects import Object

#: A defaulter: edits the object in place (may be async).
Defaulter = Callable[[Object], Awaitable[None] | None]
#: Decode + encode through a typed model (what a Go webhook's scheme does).
RoundTrip = Callable[[Object], Object]

JsonPatchOp = dict[str, Any]


class LosslessMode(enum.StrEnum):
    """Which ``remove`` operations to drop from the patch."""

    DROP_ALL_REMOVES = "DropAllRemoves"
    DROP_ROUND_TRIP_REMOVES = "DropRoundTripRemoves"


def _identity(obj: Object) -> Object:
    return copy.deepcopy(obj)


def create_patch(src: Object, dst: Object) -> list[JsonPatchOp]:
    """The RFC 6902 patch from ``src`` to ``dst`` (add/remove/replace only)."""
    patch: list[JsonPatchOp] = jsonpatch.JsonPatch.from_diff(src, dst, optimization=False).patch
    return patch


@attrs.frozen
class LosslessDefaulter:
    """Wraps ``defaulter`` so that :meth:`patch` only removes what it should (see module doc)."""

    defaulter: Defaulter
    round_trip: RoundTrip = _identity
    mode: LosslessMode = LosslessMode.DROP_ALL_REMOVES

    async def default(self, raw: Object) -> tuple[Object, list[JsonPatchOp]]:
        """Run the defaulter on a decoded copy of ``raw``.

        Returns the patch to send and the object the API server will store once the patch
        is applied to ``raw``; ``raw`` itself is not modified.
        """
        decoded = self.round_trip(copy.deepcopy(raw))
        original = copy.deepcopy(decoded)
        result = self.defaulter(decoded)
        if inspect.isawaitable(result):
            await result
        if self.mode is LosslessMode.DROP_ROUND_TRIP_REMOVES and decoded == original:
            # controller-runtime returns no patch when the defaulter changed nothing.
            return copy.deepcopy(raw), []
        patch = create_patch(raw, decoded)
        if self.mode is LosslessMode.DROP_ALL_REMOVES:
            patch = [op for op in patch if op["op"] != "remove"]
        else:
            by_round_trip = [op for op in create_patch(raw, original) if op["op"] == "remove"]
            patch = [op for op in patch if not (op["op"] == "remove" and op in by_round_trip)]
        patched: Object = jsonpatch.apply_patch(raw, patch) if patch else copy.deepcopy(raw)
        return patched, patch

    async def patch(self, raw: Object) -> list[JsonPatchOp]:
        """Only the JSON patch (empty when nothing is to change)."""
        _, ops = await self.default(raw)
        return ops
