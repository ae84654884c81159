"""Go's renderings of values, for messages that must read exactly as Kubernetes' do.

apimachinery's ``field.Error`` prints bad values with ``%q`` for strings, ``%v`` for
numbers and ``encoding/json`` for the rest; Kueue's errors quote names with ``%q``. Both
the in-memory API server and the jobframework build such messages, so the rules live here.
"""

from __future__ import annotations

import json
from typing import Any, Final

_SIMPLE_ESCAPES: Final = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", "\\": "\\\\", '"': '\\"',
}


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q``): printable characters kept, others escaped."""
    out = ['"']
    for ch in s:
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            cp = ord(ch)
            if cp < 0x80:
                out.append(f"\\x{cp:02x}")
            elif cp < 0x10000:
                out.append(f"\\u{cp:04x}")
            else:
                out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def go_float(f: float) -> str:
    """``%v`` of a float64: ``strconv.FormatFloat(f, 'g', -1, 64)``, exponent from 1e21."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    r = repr(f)
    if "e" in r:
        mant, exp = r.split("e")
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    return r


def go_json(value: Any) -> str:
    """``encoding/json.Marshal``: sorted keys, compact, HTML-safe escapes."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False,
                      default=str)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_value(value: Any) -> str:
    """A bad value as apimachinery's ``field.Error.ErrorBody`` renders it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)
