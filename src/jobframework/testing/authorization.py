"""SubjectAccessReviews for tests: an authorizer whose rules the test gives.

The in-memory API server has no authorizer and does not serve
``authorization.k8s.io/v1 SubjectAccessReview``. Code that asks the API server "may
this user do that?" (a webhook checking its caller's rights, as AppWrapper's does)
creates a SubjectAccessReview through its client; in tests, wrap the server's client in
an :class:`AuthorizingClient` and those creates are answered by an :class:`Authorizer`::

    authorizer = Authorizer([AccessRule(users=("alice",), verbs=("create",),
                                        resources=("pods",))])
    client = AuthorizingClient(server.client(), authorizer)
    review = await client.create(subject_access_review(...))
    review["status"]["allowed"]   # True for alice creating pods, False otherwise

The rules are RBAC-like grants (users or groups, verbs, API groups, resources,
namespaces; ``"*"`` matches anything). A review is allowed when any rule matches.
An authorizer built with no rules at all allows everything (``allow_all`` overrides
both defaults). Every review received is kept in :attr:`Authorizer.reviews`, and
``error`` makes the create fail, as an unreachable authorizer would. Everything else
the wrapped client does is passed through unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from ..runtime.objects import GVK, Object

__all__ = [
    "SUBJECT_ACCESS_REVIEW_GVK",
    "AccessRule",
    "Authorizer",
    "AuthorizingClient",
]

SUBJECT_ACCESS_REVIEW_GVK: Final = GVK("authorization.k8s.io", "v1", "SubjectAccessReview")


def _tuple(value: Iterable[str] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _match(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


@attrs.frozen
class AccessRule:
    """One grant: ``users`` or ``groups`` (either matching) may use ``verbs`` on
    ``resources`` of ``api_groups`` in ``namespaces`` (``""`` is the core group, and
    the namespace of a cluster-scoped request)."""

    users: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    groups: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    verbs: tuple[str, ...] = attrs.field(default=("*",), converter=_tuple)
    api_groups: tuple[str, ...] = attrs.field(default=("*",), converter=_tuple)
    resources: tuple[str, ...] = attrs.field(default=("*",), converter=_tuple)
    namespaces: tuple[str, ...] = attrs.field(default=("*",), converter=_tuple)

    def matches(self, spec: Mapping[str, Any]) -> bool:
        """Whether this rule grants the access a SubjectAccessReview ``spec`` asks about."""
        user = str(spec.get("user") or "")
        groups = [str(g) for g in spec.get("groups") or []]
        if not (_match(self.users, user) or any(_match(self.groups, g) for g in groups)):
            return False
        attrs_ = spec.get("resourceAttributes")
        if not isinstance(attrs_, Mapping):
            return False  # only resource requests are modelled
        resource = str(attrs_.get("resource") or "")
        subresource = str(attrs_.get("subresource") or "")
        if subresource:
            resource = f"{resource}/{subresource}"
        return (_match(self.verbs, str(attrs_.get("verb") or ""))
                and _match(self.api_groups, str(attrs_.get("group") or ""))
                and _match(self.resources, resource)
                and _match(self.namespaces, str(attrs_.get("namespace") or "")))


class Authorizer:
    """Answers SubjectAccessReviews from :class:`AccessRule` grants (see the module
    docstring). ``allow_all`` defaults to True without rules and False with some."""

    def __init__(self, rules: Iterable[AccessRule] = (), *, allow_all: bool | None = None,
                 error: BaseException | None = None) -> None:
        self.rules = list(rules)
        self.allow_all = (not self.rules) if allow_all is None else allow_all
        #: Raised by every review while set (an authorizer that cannot be reached).
        self.error = error
        #: The ``spec`` of every review received, in order.
        self.reviews: list[dict[str, Any]] = []

    def allowed(self, spec: Mapping[str, Any]) -> bool:
        """Whether the rules allow what ``spec`` asks."""
        return self.allow_all or any(rule.matches(spec) for rule in self.rules)

    def review(self, sar: Object) -> Object:
        """The review with its ``status`` filled in (``allowed``, and ``reason``)."""
        if self.error is not None:
            raise self.error
        out = copy.deepcopy(sar)
        raw = out.get("spec")
        spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        self.reviews.append(copy.deepcopy(dict(spec)))
        if self.allowed(spec):
            out["status"] = {"allowed": True, "reason": "allowed by the test authorizer"}
        else:
            out["status"] = {"allowed": False}
        return out


class AuthorizingClient:
    """A client whose SubjectAccessReview creates are answered by ``authorizer``;
    every other call goes to ``inner`` unchanged."""

    def __init__(self, inner: Any, authorizer: Authorizer) -> None:
        self.inner = inner
        self.authorizer = authorizer

    async def create(self, obj: Object, *, field_manager: str | None = None,
                     dry_run: bool = False) -> Object:
        """Review a SubjectAccessReview; create anything else through ``inner``."""
        if (obj.get("apiVersion"), obj.get("kind")) == (
                SUBJECT_ACCESS_REVIEW_GVK.api_version, SUBJECT_ACCESS_REVIEW_GVK.kind):
            return self.authorizer.review(obj)
        result: Object = await self.inner.create(obj, field_manager=field_manager,
                                                 dry_run=dry_run)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
