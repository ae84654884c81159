"""Base model and ``ObjectMeta`` shared by the Kueue API models.

Every model is lossless: unknown fields are kept (``extra="allow"``) and
:meth:`KueueModel.to_dict` dumps exactly the fields that were given or assigned
(``exclude_unset``), under their JSON names, so ``Model.from_dict(d).to_dict() == d``
for any valid ``d``. Validation is strict (no coercion of ``"1"`` into ``1``), because a
coerced value would not survive the round trip.
"""

from __future__ import annotations

import contextvars
import copy
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..runtime.objects import marshal_copy

# True while KueueModel.model_validate runs (possibly nested).
_VALIDATING: contextvars.ContextVar[bool] = contextvars.ContextVar("_VALIDATING", default=False)

#: A ``resource.Quantity`` as it appears in JSON (``"100m"``, ``"1Gi"``, or a number).
Quantity = str | int | float

#: A ``corev1.ResourceList``.
ResourceList = dict[str, Quantity]


class KueueModel(BaseModel):
    """Base of every API model: camelCase JSON names, unknown fields kept, strict types."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
        protected_namespaces=(),
    )

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        extra: Any = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """Validate JSON data; the result dumps back to exactly ``obj`` (see module doc)."""
        token = _VALIDATING.set(True)
        try:
            return super().model_validate(
                obj, strict=strict, extra=extra, from_attributes=from_attributes,
                context=context, by_alias=by_alias, by_name=by_name,
            )
        finally:
            _VALIDATING.reset(token)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        """A deep copy (``model_copy(deep=True)``, ``copy.deepcopy``), as pydantic's own but
        with JSON values (pod templates, label maps) copied through :mod:`marshal`, several
        times faster than :func:`copy.deepcopy` walking them: a reconcile copies pod sets
        to compare them with the job's."""
        if memo is None:
            memo = {}
        cls = type(self)
        m = cls.__new__(cls)
        memo[id(self)] = m
        object.__setattr__(m, "__dict__", _deep_values(self.__dict__, memo))
        extra = self.__pydantic_extra__
        object.__setattr__(m, "__pydantic_extra__",
                           None if extra is None else _deep_values(extra, memo))
        object.__setattr__(m, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        private = getattr(self, "__pydantic_private__", None)
        object.__setattr__(m, "__pydantic_private__",
                           None if private is None else copy.deepcopy(private, memo))
        return m

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: fields that were set, under their JSON names, extras included."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Validate a JSON object (raises ``pydantic.ValidationError`` if it is invalid)."""
        return cls.model_validate(data)


_ATOMS = (str, int, float, bool, type(None))


def _deep_values(values: dict[str, Any], memo: dict[int, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if type(value) in _ATOMS:
            out[key] = value
        elif isinstance(value, KueueModel):
            out[key] = memo[id(value)] if id(value) in memo else value.__deepcopy__(memo)
        elif type(value) in (dict, list) and id(value) not in memo:
            # copy.deepcopy when a value holds models (a list of pod sets, say) or
            # anything else marshal cannot copy.
            try:
                out[key] = marshal_copy(value)
            except ValueError:
                out[key] = copy.deepcopy(value, memo)
        else:
            out[key] = copy.deepcopy(value, memo)
    return out


class OwnerReference(KueueModel):
    """``metav1.OwnerReference``."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KueueModel):
    """``metav1.ObjectMeta``: the fields the jobframework reads; the rest survive as extras."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None
    managed_fields: list[dict[str, Any]] | None = None

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with ``controller: true`` (``metav1.GetControllerOf``)."""
        for ref in self.owner_references or []:
            if ref.controller:
                return ref
        return None


class TypedObject(KueueModel):
    """A top-level API object: ``apiVersion``, ``kind``, ``metadata``.

    Built in code (``Workload(...)``), the object carries its default ``apiVersion`` and
    ``kind`` in :meth:`to_dict`; validated from JSON (``from_dict``) it keeps exactly the
    keys it was given.
    """

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        # Pydantic runs this __init__ for validated data too; only objects built in code
        # get their default apiVersion/kind, so JSON round trips stay exact.
        if not _VALIDATING.get():
            for name in ("api_version", "kind"):
                if getattr(self, name) is not None:
                    self.__pydantic_fields_set__.add(name)

    @property
    def name(self) -> str:
        """``metadata.name`` or ``""``."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` or ``""``."""
        return self.metadata.namespace or ""

    @property
    def key(self) -> str:
        """``<namespace>/<name>`` (``workload.Key``), or the name when cluster-scoped."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name
