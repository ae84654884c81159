"""Label and field selectors with apimachinery's syntax and matching rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_REQ = re.compile(
    rf"^\s*(?:(?P<neg>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<val>[-A-Za-z0-9_.]*)"
    rf"|\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\))?)\s*$"
)


@attrs.frozen
class Requirement:
    """One clause of a label selector."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this clause (apimachinery semantics)."""
        has = self.key in labels
        value = labels.get(self.key)
        if self.operator == "=":
            return has and value == self.values[0]
        if self.operator == "!=":
            return not has or value != self.values[0]
        if self.operator == "in":
            return has and value in self.values
        if self.operator == "notin":
            return not has or value not in self.values
        if self.operator == "exists":
            return has
        return not has

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(sorted(self.values))})"
        return f"{self.key}{self.operator}{self.values[0]}"


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


@attrs.frozen
class LabelSelector:
    """A conjunction of :class:`Requirement`; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """Parse the string form (``a=b,c!=d,e in (f,g),!h``); ``ValueError`` when malformed."""
        if not text or not text.strip():
            return cls()
        reqs: list[Requirement] = []
        for clause in _split_top_level(text):
            m = _REQ.match(clause)
            if not m:
                raise ValueError(f"unable to parse requirement: {clause.strip()!r}")
            if m.group("neg"):
                reqs.append(Requirement(m.group("nkey"), "!"))
            elif m.group("op"):
                op: Operator = "!=" if m.group("op") == "!=" else "="
                reqs.append(Requirement(m.group("key"), op, (m.group("val"),)))
            elif m.group("setop"):
                vals = tuple(v.strip() for v in m.group("vals").split(",") if v.strip())
                setop: Operator = "in" if m.group("setop") == "in" else "notin"
                reqs.append(Requirement(m.group("key"), setop, vals))
            else:
                reqs.append(Requirement(m.group("key"), "exists"))
        return cls(tuple(reqs))

    @classmethod
    def from_dict(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """Convert a ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``)."""
        if not selector:
            return cls()
        reqs = [Requirement(k, "=", (str(v),))
                for k, v in sorted((selector.get("matchLabels") or {}).items())]
        for expr in selector.get("matchExpressions") or []:
            op = expr.get("operator")
            key = expr["key"]
            values = tuple(expr.get("values") or ())
            if op == "In":
                reqs.append(Requirement(key, "in", values))
            elif op == "NotIn":
                reqs.append(Requirement(key, "notin", values))
            elif op == "Exists":
                reqs.append(Requirement(key, "exists"))
            elif op == "DoesNotExist":
                reqs.append(Requirement(key, "!"))
            else:
                raise ValueError(f"{op!r} is not a valid label selector operator")
        return cls(tuple(reqs))

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> LabelSelector:
        """Equality on every given label."""
        return cls(tuple(Requirement(k, "=", (v,)) for k, v in sorted(labels.items())))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether every requirement holds for ``labels``."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when it selects everything."""
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _field_value(obj: Mapping[str, Any], path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    if cur is None:
        return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@attrs.frozen
class FieldSelector:
    """Equality/inequality on dotted field paths (``metadata.name=x,status.phase!=y``)."""

    terms: tuple[tuple[str, bool, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        """Parse the string form; ``ValueError`` when a term has no operator."""
        if not text or not text.strip():
            return cls()
        terms = []
        for raw in text.split(","):
            term = raw.strip()
            for op, equal in (("!=", False), ("==", True), ("=", True)):
                if op in term:
                    field, _, value = term.partition(op)
                    terms.append((field.strip(), equal, value.strip()))
                    break
            else:
                raise ValueError(f"invalid field selector: {term!r}")
        return cls(tuple(terms))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether every term holds; an absent field compares as ``""``."""
        for field, equal, value in self.terms:
            actual = _field_value(obj, field) or ""
            if (actual == value) != equal:
                return False
        return True

    @property
    def empty(self) -> bool:
        """True when it selects everything."""
        return not self.terms

    def __str__(self) -> str:
        return ",".join(f"{f}{'=' if eq else '!='}{v}" for f, eq, v in self.terms)
