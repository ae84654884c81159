"""Resource quantities as Kueue's scheduler counts and prints them.

Kueue keeps every request as an ``int64``: milli-units for ``cpu``, whole units for
everything else (``resources.ResourceValue``, rounding up), and turns them back into
canonical ``resource.Quantity`` strings with its ``ResourceFormatter``: ``cpu`` as a
decimal milli quantity (``1500m``, ``2``), ``memory``, ``ephemeral-storage`` and
``hugepages-*`` in binary form when a power of 1024 divides them (``2Gi``), anything else
decimal (``4``, ``2k``).
"""

from __future__ import annotations

import decimal
import math
from typing import Any

from ..validation import quantity_value

__all__ = ["format_quantity", "resource_value"]

_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T",
                     15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _is_binary(resource: str) -> bool:
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def resource_value(resource: str, quantity: Any) -> int:
    """The integer Kueue counts for ``quantity`` of ``resource`` (milli for ``cpu``)."""
    value = quantity_value(quantity)
    if value is None:
        raise ValueError(f"invalid quantity {quantity!r} for {resource}")
    if resource == "cpu":
        value *= 1000
    return math.ceil(value)


def _decimal_si(value: decimal.Decimal) -> str:
    if value == 0:
        return "0"
    exponent = 18
    while exponent > -9:
        scaled = value.scaleb(-exponent)
        if scaled == scaled.to_integral_value():
            break
        exponent -= 3
    mantissa = value.scaleb(-exponent).to_integral_value(rounding=decimal.ROUND_CEILING)
    return f"{int(mantissa)}{_DECIMAL_SUFFIXES[exponent]}"


def format_quantity(resource: str, value: int) -> str:
    """The canonical quantity string Kueue prints for ``value`` (as :func:`resource_value`)."""
    if resource == "cpu":
        return _decimal_si(decimal.Decimal(value).scaleb(-3))
    if _is_binary(resource) and abs(value) >= 1024:
        power = 0
        mantissa = value
        while mantissa % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            mantissa //= 1024
            power += 1
        if power:
            return f"{mantissa}{_BINARY_SUFFIXES[power]}"
    return _decimal_si(decimal.Decimal(value))
