"""Decoding the JSON the API server and its webhooks send: fast, and exactly as ``json``.

Every watch event, response body and AdmissionReview is decoded once; on the real
control plane that is the largest single cost of the manager after HTTP itself. orjson
decodes such documents in less than half the time of the standard library, with one
difference that matters here: an integer literal beyond 64 bits comes back as a
``float``, silently rounded, where ``json`` keeps the exact ``int``. Objects must
round-trip losslessly (an unknown field of a custom resource may hold any integer), so a
document with a run of 19 or more digits anywhere, the only place such a literal can
come from, is left to the standard library; so is anything orjson refuses (invalid
UTF-8, lone surrogate escapes, ``NaN``...), so the result or the error is always the
standard library's; but nesting deeper than orjson's 1,024 levels raises
:class:`RecursionError` at once, as ``json`` does past the interpreter's recursion limit,
so that how deep a document may nest does not depend on that limit.

:func:`dumps` is the other direction, for request bodies and webhook answers: orjson
writes the same JSON value as ``json.dumps`` in a fraction of the time, except that it
writes ``NaN`` and the infinities as ``null`` where ``json`` writes tokens the API server
refuses. A document whose orjson encoding holds ``null`` anywhere is therefore encoded
again by the standard library, and so is anything orjson refuses (integers beyond 64
bits, keys that are not strings, lone surrogates, nesting deeper than 255, dates and
dataclasses, which ``json`` refuses in turn). The bytes may differ (orjson leaves
non-ASCII characters unescaped); the value they decode to does not.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

__all__ = ["dumps", "loads"]

#: Every ASCII digit maps to ``0``, every other byte to a space: a run of digits in the
#: document becomes a run of ``0`` in its translation, found by a substring search in C.
_DIGITS_TO_ZERO: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
#: 2**63 has 19 digits: any integer orjson could round has at least as many.
_LONG_DIGIT_RUN: Final = b"0" * 19


def loads(data: bytes | bytearray | str) -> Any:
    """``json.loads(data)``, the same value or the same error, decoded by orjson if it can."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if _LONG_DIGIT_RUN not in raw.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            if str(err).startswith("depth limit exceeded"):
                # Past 1,024 levels: refused whatever the interpreter's recursion limit
                # (json's own limit), so a hostile body is refused the same way always.
                raise RecursionError(f"JSON nested too deeply: {err}") from None
            # Otherwise the standard library's answer (a value or its error) decides.
    return json.loads(data)


#: Dates and dataclasses go to ``default`` (which refuses them) instead of being encoded,
#: as ``json`` refuses them too.
_ENCODE_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """``json.dumps(value, separators=(",", ":")).encode()``: the same JSON value (or the
    same error), encoded by orjson when that cannot change it."""
    try:
        out = orjson.dumps(value, default=_refuse, option=_ENCODE_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        out = None
    if out is None or b"null" in out:
        # NaN and infinities become null in orjson: only the standard library tells.
        return json.dumps(value, separators=(",", ":")).encode()
    return out
