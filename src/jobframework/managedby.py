"""``JobWithManagedBy`` for jobs whose manager is ``spec.managedBy``.

Kinds that keep the field at ``spec.managedBy`` (batch/v1 Job, AppWrapper, ...) share
the same three methods; :class:`SpecManagedBy` supplies them. A subclass sets
:attr:`~SpecManagedBy.own_controller_name` (the value meaning "the kind's own controller")
and provides ``spec`` and ``features``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from . import field
from .constants import FeatureGate, FeatureGates
from .k8svalidation import is_domain_prefixed_path

__all__ = [
    "MANAGED_BY_PATH",
    "MAX_MANAGED_BY_LENGTH",
    "SpecManagedBy",
    "validate_managed_by",
]

#: batch/v1 Job's limit on ``spec.managedBy``.
MAX_MANAGED_BY_LENGTH: Final = 63
#: Where the kinds of :class:`SpecManagedBy` keep it.
MANAGED_BY_PATH: Final = field.Path.new("spec").child("managedBy")


def validate_managed_by(obj: Mapping[str, Any]) -> field.ErrorList:
    """``spec.managedBy``, when set: a string, a domain-prefixed path of at most
    :data:`MAX_MANAGED_BY_LENGTH` characters (batch/v1 Job's rule); errors name the
    field."""
    spec = obj.get("spec") or {}
    value = spec.get("managedBy")
    if value is None:
        return field.ErrorList()
    if not isinstance(value, str):
        return field.ErrorList([field.invalid(MANAGED_BY_PATH, value, "must be a string")])
    errs = is_domain_prefixed_path(MANAGED_BY_PATH, value)
    if len(value) > MAX_MANAGED_BY_LENGTH:
        errs.append(field.too_long(MANAGED_BY_PATH, value, MAX_MANAGED_BY_LENGTH))
    return errs


class SpecManagedBy:
    """The ``JobWithManagedBy`` methods over ``spec.managedBy`` (a mixin)."""

    #: The ``spec.managedBy`` value of the kind's own controller.
    own_controller_name: ClassVar[str]
    features: FeatureGates

    @property
    @abc.abstractmethod
    def spec(self) -> dict[str, Any]:
        """The job's ``spec`` (mutable)."""

    def can_default_managed_by(self) -> bool:
        """MultiKueue may take the job over: managedBy unset or the kind's own controller."""
        return (self.features.enabled(FeatureGate.MULTIKUEUE)
                and self.spec.get("managedBy") in (None, self.own_controller_name))

    def managed_by(self) -> str | None:
        """``spec.managedBy``."""
        value = self.spec.get("managedBy")
        return None if value is None else str(value)

    def set_managed_by(self, value: str | None) -> None:
        """Set (or clear) ``spec.managedBy``."""
        if value is None:
            self.spec.pop("managedBy", None)
        else:
            self.spec["managedBy"] = value
