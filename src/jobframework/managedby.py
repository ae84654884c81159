"""``JobWithManagedBy`` for jobs whose manager is ``spec.managedBy``.

Kinds that keep the field at ``spec.managedBy`` (batch/v1 Job, AppWrapper, ...) share
the same three methods; :class:`SpecManagedBy` supplies them. A subclass sets
:attr:`~SpecManagedBy.own_controller_name` (the value meaning "the kind's own controller")
and provides ``spec`` and ``features``.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from .constants import FeatureGate, FeatureGates

__all__ = ["SpecManagedBy"]


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
