"""The in-memory API server: one process, kube-apiserver semantics, no HTTP.

Requests go through the same stages as in the real server's generic registry: built-in
admission (namespace lifecycle), mutating webhooks, the kind's strategy (system fields,
status subresource split, generation), validation, validating webhooks, then a storage
write guarded by resourceVersion. Every write bumps one global resourceVersion and feeds
the per-resource watch history. Garbage collection and namespace cleanup run
asynchronously, like the controllers of the same names; ``await server.settle()`` waits
until they have nothing left to do.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from ..runtime import errors
from ..runtime.client.interface import (
    PatchType,
    Preconditions,
    PropagationPolicy,
    RESTMapping,
    WatchEvent,
)
from ..runtime.clock import Clock, RealClock, rfc3339
from ..runtime.objects import GVK, Object, deep_copy
from ..runtime.selectors import FieldSelector, LabelSelector
from . import _apply, _defaults, _gc
from ._backend import Key as Key
from ._gc import FINALIZER_FOREGROUND, FINALIZER_NAMESPACE, FINALIZER_ORPHAN
from ._patch import apply_json_patch, json_equal, merge_patch, strategic_merge_patch
from ._registry import (
    CRD_GVK,
    NAMESPACE_GVK,
    GroupResource,
    KindInfo,
    Registry,
    builtin_kinds,
    kinds_from_crd,
)
from ._schema import StructuralSchema
from ._validation import job_update_causes, meta_causes, name_causes
from ._watch import History, StoredEvent, Watcher, bookmark
from .admission import (
    DEFAULT_RULES,
    AdmissionAttributes,
    AdmissionChain,
    FailurePolicy,
    Operation,
    RegisteredWebhook,
    Rule,
    Webhook,
)
from .faults import Faults

if TYPE_CHECKING:
    from .client import InMemoryClient

_CONFLICT_MSG = ("the object has been modified; please apply your changes to the latest "
                 "version and try again")
# utilrand.String's alphabet: no vowels (no accidental words) and no confusable 0/1/3.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_SUFFIX = 5
_MAX_GENERATE_BASE = 63 - _GENERATED_SUFFIX

_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: The field manager of writes that name none (the real server derives it from the
#: User-Agent; clients of this library are Python programs).
DEFAULT_FIELD_MANAGER = "jobframework"


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _non_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}


def _strip_rv(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(_meta(obj))
    meta.pop("resourceVersion", None)
    out["metadata"] = meta
    return out


def _unsupported_media_type() -> errors.ApiError:
    return errors.ApiError(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml",
        code=415, reason="UnsupportedMediaType")


def apply_patch(target: Object, patch: Any, patch_type: PatchType) -> Object:
    """Apply a merge, JSON or strategic merge patch; the single switch for the engines."""
    if patch_type == PatchType.JSON:
        return apply_json_patch(target, patch)
    if patch_type == PatchType.STRATEGIC:
        return strategic_merge_patch(target, patch)
    return merge_patch(target, patch)


class APIServer:
    """An in-memory kube-apiserver.

    ``clock`` stamps creation/deletion timestamps and drives bookmarks, watch timeouts and
    injected latency (a :class:`~jobframework.runtime.clock.ManualClock` makes all of it
    deterministic). ``watch_history`` bounds the events kept per resource for watches
    that resume from a resourceVersion; ``bookmark_interval`` is the clock time between
    BOOKMARK events on watches that allow them. ``builtin_defaults`` turns on the
    built-in defaults controllers read back (Job parallelism/completions/suspend and
    generated selector, Pod phase; see ``_defaults``), as a real server applies them,
    and the immutability rules of Job updates (see ``_validation.job_update_causes``).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        watch_history: int = 1000,
        bookmark_interval: float = 1.0,
        builtin_defaults: bool = False,
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.builtin_defaults = builtin_defaults
        self.watch_history = watch_history
        self.bookmark_interval = bookmark_interval
        self.faults = Faults(self)
        self.admission = AdmissionChain()
        self._registry = Registry()
        self._rv = 0
        self._stores: dict[GroupResource, dict[Key, Object]] = {}
        self._histories: dict[GroupResource, History] = {}
        self._watchers: set[Watcher] = set()
        self._gc_scheduled: asyncio.AbstractEventLoop | None = None
        self._gc_running = False
        self._random = random.Random()
        self._schemas: dict[GVK, StructuralSchema | None] = {}
        for info in builtin_kinds():
            self._registry.add(info)
        for ns in _SYSTEM_NAMESPACES:
            self._bootstrap_namespace(ns)
        for info in self._registry.all():
            # The watch cache starts now: older resourceVersions are already "compacted".
            self._history(info.gr).compact(self._rv)

    # ------------------------------------------------------------------ public surface

    def client(self, *, user: str = "admin") -> InMemoryClient:
        """A :class:`~jobframework.runtime.client.Client` on this server acting as ``user``."""
        from .client import InMemoryClient

        return InMemoryClient(self, user=user)

    @property
    def rest_mapper(self) -> Registry:
        """The server's :class:`~jobframework.runtime.client.RESTMapper`."""
        return self._registry

    @property
    def resource_version(self) -> str:
        """The current (latest written) resourceVersion."""
        return str(self._rv)

    def resources(self) -> list[RESTMapping]:
        """Every served kind, for discovery."""
        return [info.mapping() for info in self._registry.all()]

    def kind_info(self, gvk: GVK) -> KindInfo:
        """How ``gvk`` is served; :class:`~._registry.NoKindMatchError` when it is not."""
        return self._registry.kind(gvk)

    def register_kind(
        self,
        gvk: GVK,
        plural: str,
        namespaced: bool,
        *,
        status_subresource: bool = True,
        schema: Any = None,
    ) -> None:
        """Serve a kind (a custom resource without a CRD object)."""
        info = KindInfo(gvk, plural, namespaced, status_subresource=status_subresource,
                        schema=schema, unconditional_update=False)
        self._registry.add(info)
        self._schemas.pop(gvk, None)
        self._start_history(info)

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve the versions of an ``apiextensions.k8s.io/v1`` CRD manifest.

        Creating the CRD through a client does this too (and stores the CRD object).
        Raises ``ValueError`` for a manifest missing group, names or versions.
        """
        name = _meta(crd).get("name")
        infos = kinds_from_crd(crd)
        if name:
            self._registry.remove_crd(str(name))
        for info in infos:
            self._registry.add(info)
            self._schemas.pop(info.gvk, None)
            self._start_history(info)

    def add_mutating_webhook(
        self,
        fn: Webhook,
        *,
        name: str | None = None,
        rules: list[dict[str, Any]] | None = None,
        failure_policy: FailurePolicy = "Fail",
        namespace_selector: Mapping[str, Any] | None = None,
        object_selector: Mapping[str, Any] | None = None,
    ) -> RegisteredWebhook:
        """Add a mutating webhook (runs before every validating one).

        ``rules`` are ``RuleWithOperations`` dicts (``operations``, ``apiGroups``,
        ``apiVersions``, ``resources``, ``scope``); the default selects CREATE and UPDATE
        of every resource. Selectors are ``metav1.LabelSelector`` dicts.
        """
        return self.admission.add(self._hook(True, fn, name, rules, failure_policy,
                                             namespace_selector, object_selector))

    def add_validating_webhook(
        self,
        fn: Webhook,
        *,
        name: str | None = None,
        rules: list[dict[str, Any]] | None = None,
        failure_policy: FailurePolicy = "Fail",
        namespace_selector: Mapping[str, Any] | None = None,
        object_selector: Mapping[str, Any] | None = None,
    ) -> RegisteredWebhook:
        """Add a validating webhook (runs after mutation and schema validation)."""
        return self.admission.add(self._hook(False, fn, name, rules, failure_policy,
                                             namespace_selector, object_selector))

    def remove_webhook(self, hook: RegisteredWebhook) -> None:
        """Take a webhook out of the admission chain."""
        self.admission.remove(hook)

    async def settle(self, *, max_rounds: int = 1000) -> None:
        """Run garbage collection and namespace cleanup until nothing changes.

        Also lets open watches and other ready tasks run, so a test that awaits this sees
        the cluster in its quiescent state.
        """
        for _ in range(max_rounds):
            for _ in range(3):
                await asyncio.sleep(0)
            if not self._gc_round():
                for _ in range(3):
                    await asyncio.sleep(0)
                if not self._gc_round():
                    return
        raise RuntimeError("the in-memory server did not settle")

    def objects(self, gvk: GVK, namespace: str | None = None) -> list[Object]:
        """A snapshot of the stored objects of a kind (copies), for assertions."""
        info = self._registry.kind(gvk)
        return [self._out(info, o) for (ns, _), o in sorted(self._store(info.gr).items())
                if namespace is None or ns == namespace]

    # ------------------------------------------------------------------ internals: storage

    def _store(self, gr: GroupResource) -> dict[Key, Object]:
        return self._stores.setdefault(gr, {})

    def _history(self, gr: GroupResource) -> History:
        hist = self._histories.get(gr)
        if hist is None:
            hist = self._histories[gr] = History(self.watch_history)
        return hist

    def _start_history(self, info: KindInfo) -> None:
        # A new kind's watch cache starts at the current resourceVersion, as the real one
        # does when a CRD becomes established.
        if info.gr not in self._histories:
            self._history(info.gr).compact(self._rv)

    def _out(self, info: KindInfo, obj: Object) -> Object:
        out = deep_copy(obj)
        out["apiVersion"] = info.gvk.api_version
        out["kind"] = info.gvk.kind
        return out

    def _key(self, info: KindInfo, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if info.namespaced else "", name)

    def _lookup(self, info: KindInfo, key: Key) -> Object:
        obj = self._store(info.gr).get(key)
        if obj is None:
            raise errors.new_not_found(info.plural, key[1], info.gvk.group)
        return obj

    def _commit(
        self, info: KindInfo, key: Key, new: Object | None, old: Object | None
    ) -> Object:
        """Write (or delete when ``new`` is None) at a new resourceVersion; emit the event."""
        self._rv += 1
        rv = self._rv
        store = self._store(info.gr)
        if new is None:
            assert old is not None
            del store[key]
            stored = deep_copy(old)
            stored["metadata"]["resourceVersion"] = str(rv)
            event = StoredEvent(rv, "DELETED", stored, old)
        else:
            stored = new
            stored.setdefault("metadata", {})["resourceVersion"] = str(rv)
            store[key] = stored
            event = StoredEvent(rv, "ADDED" if old is None else "MODIFIED", stored, old)
        self._history(info.gr).append(event)
        delay = self.faults._event_delay(info)
        deliver_at = self.clock.monotonic() + delay if delay > 0 else 0.0
        for watcher in list(self._watchers):
            if watcher.gr == info.gr:
                watcher.push(event, deliver_at)
        self._after_commit(info, event)
        if event.type == "DELETED" or _gc_relevant(stored) or (old and _gc_relevant(old)):
            self._schedule_gc()
        return stored

    def _after_commit(self, info: KindInfo, event: StoredEvent) -> None:
        if info.gvk.group == CRD_GVK.group and info.plural == "customresourcedefinitions":
            name = str(_meta(event.obj).get("name") or "")
            if event.type == "DELETED":
                for gone in self._registry.remove_crd(name):
                    self._drop_all(gone)
            else:
                self.register_crd(event.obj)

    def _drop_all(self, info: KindInfo) -> None:
        # The CRD finalizer deletes every custom resource before the CRD goes away.
        if self._registry.find(info.gvk) is not None:
            return
        for key, obj in list(self._store(info.gr).items()):
            if self._store(info.gr).get(key) is obj:
                self._commit(info, key, None, obj)

    def _bootstrap_namespace(self, name: str) -> None:
        info = self._registry.kind(NAMESPACE_GVK)
        obj: Object = {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": name, "labels": {
                           "kubernetes.io/metadata.name": name}}}
        self._prepare_create(info, obj)
        self._commit(info, ("", name), obj, None)

    def _drop_watches(self) -> int:
        watchers = list(self._watchers)
        for w in watchers:
            w.close()
        self._watchers.clear()
        return len(watchers)

    def _compact(self) -> None:
        for gr in {*self._stores, *self._histories}:
            self._history(gr).compact(self._rv)

    # ------------------------------------------------------------------ internals: GC

    def _schedule_gc(self) -> None:
        if self._gc_running:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # No loop (construction time): settle() or the next write will run it.
        # A tick scheduled on another (maybe closed) loop will never run: schedule anew.
        if self._gc_scheduled is loop:
            return
        self._gc_scheduled = loop
        loop.call_soon(self._gc_tick)

    def _gc_tick(self) -> None:
        self._gc_scheduled = None
        self._gc_round()

    def _gc_round(self) -> bool:
        """One garbage collection round to a fixpoint; True when it changed anything."""
        if self._gc_running:
            return False
        self._gc_running = True
        try:
            changed = False
            for _ in range(1000):
                if not _gc.collect(self):
                    break
                changed = True
            return changed
        finally:
            self._gc_running = False

    # ------------------------------------------------------------------ internals: strategy

    def _hook(
        self, mutating: bool, fn: Webhook, name: str | None,
        rules: list[dict[str, Any]] | None, failure_policy: FailurePolicy,
        namespace_selector: Mapping[str, Any] | None,
        object_selector: Mapping[str, Any] | None,
    ) -> RegisteredWebhook:
        hook_name = name or f"{getattr(fn, '__name__', 'webhook')}.webhook.local"
        parsed = tuple(Rule.from_dict(r) for r in (rules or DEFAULT_RULES))
        return RegisteredWebhook(
            hook_name, fn, mutating, parsed, failure_policy,
            LabelSelector.from_dict(namespace_selector), LabelSelector.from_dict(object_selector))

    def _schema(self, info: KindInfo) -> StructuralSchema | None:
        if info.gvk not in self._schemas:
            raw = info.schema
            self._schemas[info.gvk] = (
                raw if isinstance(raw, StructuralSchema) or raw is None
                else StructuralSchema(raw))
        return self._schemas[info.gvk]

    def _decode(self, info: KindInfo, obj: Object) -> Object:
        """What decoding a request body does to a custom resource: prune, drop disallowed
        nulls, default (also re-run on what mutating webhooks return)."""
        schema = self._schema(info)
        if schema is not None:
            return schema.normalize(obj)
        if self.builtin_defaults:
            _defaults.apply_defaults(info.gvk, obj)
        return obj

    def _validate_schema(self, info: KindInfo, obj: Object) -> None:
        schema = self._schema(info)
        if schema is None:
            return
        causes = schema.validate(obj)
        if causes:
            raise errors.new_invalid(info.gvk.kind, str(_meta(obj).get("name") or ""),
                                     list(causes), info.gvk.group)

    def _track(
        self, info: KindInfo, old: Object | None, new: Object, subresource: str,
        field_manager: str | None,
    ) -> Object:
        """Record a non-apply write in ``metadata.managedFields`` (operation Update)."""
        reset = ["status"] if info.status_subresource and not subresource else None
        return _apply.update_managed_fields(
            old, new, manager=field_manager or DEFAULT_FIELD_MANAGER,
            now=rfc3339(self.clock.now()), subresource=subresource or None,
            schema=self._schema(info), reset_fields=reset)

    def _generate_name(self, base: str) -> str:
        suffix = "".join(self._random.choice(_NAME_ALPHABET) for _ in range(_GENERATED_SUFFIX))
        return base[:_MAX_GENERATE_BASE] + suffix

    def _prepare_create(self, info: KindInfo, obj: Object) -> None:
        """``rest.BeforeCreate`` + the kind's ``PrepareForCreate``, in place."""
        meta = obj.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        if not info.namespaced:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(str(meta["generateName"]))
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(field, None)
        if info.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if info.status_subresource:
            obj.pop("status", None)
        if info.gvk == NAMESPACE_GVK:
            spec = obj.setdefault("spec", {})
            finalizers = list(spec.get("finalizers") or [])
            if FINALIZER_NAMESPACE not in finalizers:
                finalizers.append(FINALIZER_NAMESPACE)
            spec["finalizers"] = finalizers
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name")
        if info.gvk == CRD_GVK:
            obj["status"] = _crd_status(obj)
        if self.builtin_defaults:
            _defaults.prepare_create(info.gvk, obj)

    def _validate_create(self, info: KindInfo, obj: Object) -> None:
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        causes: list[dict[str, Any]] = []
        if not name:
            causes.append({"reason": "FieldValueRequired", "field": "metadata.name",
                           "message": "Required value: name or generateName is required"})
        else:
            causes.extend(name_causes(info, name))
        causes.extend(meta_causes(meta))
        if causes:
            raise errors.new_invalid(info.gvk.kind, name, causes, info.gvk.group)
        self._validate_crd(info, obj)

    def _validate_crd(self, info: KindInfo, obj: Object) -> None:
        # A CRD must describe servable kinds: registration happens right after the write.
        if info.gvk != CRD_GVK:
            return
        try:
            kinds_from_crd(obj)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise errors.new_invalid(info.gvk.kind, str(_meta(obj).get("name") or ""), [
                {"reason": "FieldValueInvalid", "field": "spec", "message": str(exc)}],
                info.gvk.group) from exc

    def _prepare_update(
        self, info: KindInfo, old: Object, new: Object, subresource: str
    ) -> Object:
        """``rest.BeforeUpdate`` + the kind's ``PrepareForUpdate``; returns the object."""
        old_meta = _meta(old)
        if subresource == "status":
            # statusStrategy: everything but status comes from the stored object.
            out = deep_copy(old)
            if "status" in new:
                out["status"] = deep_copy(new["status"])
            else:
                out.pop("status", None)
            # managedFields were computed for this very write: keep them.
            if "managedFields" in _meta(new):
                out["metadata"]["managedFields"] = deep_copy(_meta(new)["managedFields"])
            return out
        out = deep_copy(new)
        meta = out.setdefault("metadata", {})
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
            raise errors.new_invalid(info.gvk.kind, str(old_meta.get("name")), [
                {"reason": "FieldValueInvalid", "field": "metadata.uid",
                 "message": f'Invalid value: "{meta["uid"]}": field is immutable'}],
                info.gvk.group)
        for field in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation", "name", "namespace"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or []
                     if f not in (old_meta.get("finalizers") or [])]
            if added:
                raise errors.new_invalid(info.gvk.kind, str(old_meta.get("name")), [
                    {"reason": "FieldValueForbidden", "field": "metadata.finalizers",
                     "message": "Forbidden: no new finalizers can be added if the object is "
                                f"being deleted, found new finalizers {added!r}"}],
                    info.gvk.group)
        if info.status_subresource:
            if "status" in old:
                out["status"] = deep_copy(old["status"])
            else:
                out.pop("status", None)
        if info.gvk == NAMESPACE_GVK:
            out.setdefault("spec", {})["finalizers"] = list(
                (old.get("spec") or {}).get("finalizers") or [])
        if info.gvk == CRD_GVK:
            out["status"] = _crd_status(out)
        if info.generation and not json_equal(_non_metadata(out), _non_metadata(old)):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        return out

    def _namespace_check(
        self, info: KindInfo, namespace: str, operation: str, name: str = ""
    ) -> None:
        # The NamespaceLifecycle admission plugin, which runs before any webhook.
        if not info.namespaced:
            return
        ns_info = self._registry.kind(NAMESPACE_GVK)
        ns = self._store(ns_info.gr).get(("", namespace))
        if ns is None:
            raise errors.new_not_found("namespaces", namespace)
        if operation == "CREATE" and _meta(ns).get("deletionTimestamp"):
            raise errors.Forbidden(
                f'{info.plural}{"." + info.gvk.group if info.gvk.group else ""} '
                f'"{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                details={"causes": [{"reason": "NamespaceTerminating",
                                     "message": f"namespace {namespace} is being terminated",
                                     "field": "metadata.namespace"}]})

    def _namespace_labels(self, info: KindInfo, namespace: str) -> dict[str, str]:
        if not info.namespaced:
            return {}
        ns = self._store(self._registry.kind(NAMESPACE_GVK).gr).get(("", namespace))
        return dict(_meta(ns).get("labels") or {}) if ns else {}

    async def _admit(
        self, mutating: bool, info: KindInfo, operation: Operation, namespace: str, name: str,
        subresource: str, user: str, dry_run: bool, options: dict[str, Any],
        obj: Object | None, old: Object | None,
    ) -> Object | None:
        if not self.admission.webhooks:
            return obj
        attrs_ = AdmissionAttributes(operation, info, namespace, name, subresource, user,
                                     dry_run, options, self._namespace_labels(info, namespace))
        return await self.admission.run(mutating, attrs_, obj, old)

    # ------------------------------------------------------------------ internals: verbs

    async def _get(self, info: KindInfo, namespace: str | None, name: str) -> Object:
        await self.faults.before("get", info.gvk, info.plural, namespace, name)
        return self._out(info, self._lookup(info, self._key(info, namespace, name)))

    async def _list(
        self, info: KindInfo, namespace: str | None, labels: LabelSelector,
        fields: FieldSelector,
    ) -> tuple[list[Object], str]:
        await self.faults.before("list", info.gvk, info.plural, namespace, None)
        items = []
        for (ns, _), obj in sorted(self._store(info.gr).items()):
            if info.namespaced and namespace and ns != namespace:
                continue
            if labels.matches(_meta(obj).get("labels")) and fields.matches(obj):
                items.append(self._out(info, obj))
        return items, str(self._rv)

    async def _watch(
        self, info: KindInfo, namespace: str | None, labels: LabelSelector,
        fields: FieldSelector, resource_version: str | None, allow_bookmarks: bool,
        timeout_seconds: int | None,
    ) -> AsyncGenerator[WatchEvent, None]:
        await self.faults.before("watch", info.gvk, info.plural, namespace, None)
        watcher = Watcher(info, namespace if info.namespaced else None, labels, fields)
        if self.faults._take_watch_expiry():
            raise errors.Gone(f"too old resource version: {resource_version or 0} ({self._rv})")
        if resource_version in (None, "", "0"):
            for _, obj in sorted(self._store(info.gr).items()):
                watcher.push_initial(obj)
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise errors.BadRequest(
                    f'invalid resource version "{resource_version}"') from None
            for event in self._history(info.gr).since(since):
                watcher.push(event)
            watcher.after = since
        self._watchers.add(watcher)
        clock = self.clock
        start = clock.monotonic()
        deadline = start + timeout_seconds if timeout_seconds else None
        interval = self.bookmark_interval
        next_bookmark = start + interval if allow_bookmarks and interval > 0 else None
        timer: asyncio.Future[Any] | None = None
        timer_at: float | None = None
        try:
            while True:
                while watcher.ready(clock.monotonic()):
                    yield watcher.queue.popleft().event
                if watcher.closed:
                    return
                now = clock.monotonic()
                if deadline is not None and now >= deadline:
                    return
                if next_bookmark is not None and now >= next_bookmark:
                    while next_bookmark <= now:
                        next_bookmark += interval
                    yield bookmark(info, watcher.bookmark_rv(self._rv))
                    continue
                pending_at = watcher.queue[0].deliver_at if watcher.queue else None
                wake_at = min((t for t in (deadline, next_bookmark, pending_at)
                               if t is not None), default=None)
                if wake_at is not None and (timer is None or timer.done()
                                            or timer_at != wake_at):
                    if timer is not None:
                        timer.cancel()
                    timer = asyncio.ensure_future(clock.sleep(wake_at - now))
                    timer_at = wake_at
                await watcher.wait(timer, now)
        finally:
            self._watchers.discard(watcher)
            if timer is not None:
                timer.cancel()

    async def _create(
        self, info: KindInfo, obj: Object, *, user: str, field_manager: str | None,
        dry_run: bool, verb: str = "create", tracked: bool = False,
    ) -> Object:
        """POST. ``tracked``: managedFields were already computed (server-side apply)."""
        obj = deep_copy(obj)
        meta = obj.setdefault("metadata", {})
        namespace = str(meta.get("namespace") or "") if info.namespaced else ""
        if info.namespaced and not namespace:
            raise errors.BadRequest("the object has no metadata.namespace; namespaced kinds "
                                    "must be created in a namespace")
        await self.faults.before(verb, info.gvk, info.plural, namespace,
                                 meta.get("name") or None)
        self._namespace_check(info, namespace, "CREATE", str(meta.get("name") or ""))
        options = {"kind": "CreateOptions" if verb == "create" else "PatchOptions",
                   "apiVersion": "meta.k8s.io/v1"}
        if field_manager:
            options["fieldManager"] = field_manager
        obj["apiVersion"] = info.gvk.api_version
        obj["kind"] = info.gvk.kind
        obj = self._decode(info, obj)
        mutated = await self._admit(True, info, "CREATE", namespace, str(meta.get("name") or ""),
                                    "", user, dry_run, options, obj, None)
        assert mutated is not None
        obj = self._decode(info, mutated) if mutated is not obj else mutated
        self._prepare_create(info, obj)
        self._validate_create(info, obj)
        self._validate_schema(info, obj)
        if not tracked:
            obj = self._track(info, None, obj, "", field_manager)
        name = str(_meta(obj)["name"])
        await self._admit(False, info, "CREATE", namespace, name, "", user, dry_run, options,
                          obj, None)
        self._namespace_check(info, namespace, "CREATE", name)
        key = self._key(info, namespace, name)
        store = self._store(info.gr)
        if key in store:
            base = _meta(obj).get("generateName")
            if not base or _meta(obj).get("name") != name:
                raise errors.new_already_exists(info.plural, name, info.gvk.group)
            while key in store:  # a generated name collided: draw another, as a retry would
                name = self._generate_name(str(base))
                key = self._key(info, namespace, name)
            obj["metadata"]["name"] = name
        if dry_run:
            return self._out(info, obj)
        return self._out(info, self._commit(info, key, obj, None))

    async def _update(
        self, info: KindInfo, obj: Object, *, subresource: str, user: str,
        field_manager: str | None, dry_run: bool, verb: str = "update",
        patcher: Any = None, tracked: bool = False,
    ) -> Object:
        """PUT (or, with ``patcher``, PATCH): a read-modify-write guarded by resourceVersion.

        ``patcher(current) -> Object`` recomputes the request object from the latest
        stored state; an unconditional request is retried when the object changed while
        webhooks ran, as the registry's GuaranteedUpdate does.
        """
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "") if info.namespaced else ""
        if subresource not in ("", "status") or (subresource and not info.status_subresource):
            raise errors.NotFound("the server could not find the requested resource")
        await self.faults.before(verb, info.gvk, info.plural, namespace, name, subresource or None)
        if not name:
            raise errors.BadRequest("resource name may not be empty")
        self._namespace_check(info, namespace, "UPDATE")
        key = self._key(info, namespace, name)
        options: dict[str, Any] = {"kind": "UpdateOptions" if verb == "update" else "PatchOptions",
                                   "apiVersion": "meta.k8s.io/v1"}
        if field_manager:
            options["fieldManager"] = field_manager
        for _ in range(100):
            old = self._lookup(info, key)
            request = deep_copy(patcher(self._out(info, old)) if patcher else obj)
            request["apiVersion"] = info.gvk.api_version
            request["kind"] = info.gvk.kind
            wanted_rv = str(_meta(request).get("resourceVersion") or "")
            if not wanted_rv and not info.unconditional_update:
                # The registry names the resource where the kind belongs (a known TODO).
                raise errors.new_invalid(info.plural, name, [
                    {"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                     "message": "Invalid value: 0: must be specified for an update"}],
                    info.gvk.group)
            if wanted_rv and wanted_rv != _meta(old).get("resourceVersion"):
                raise errors.new_conflict(info.plural, name, _CONFLICT_MSG, info.gvk.group)
            wanted_uid = _meta(request).get("uid")
            if patcher is None and wanted_uid and wanted_uid != _meta(old).get("uid"):
                # A PUT's uid is a storage precondition (defaultUpdatedObjectInfo).
                raise errors.new_conflict(
                    info.plural, name, f"Precondition failed: UID in precondition: "
                    f"{wanted_uid}, UID in object meta: {_meta(old).get('uid')}",
                    info.gvk.group)
            old_out = self._out(info, old)
            request = self._decode(info, request)
            mutated = await self._admit(True, info, "UPDATE", namespace, name, subresource,
                                        user, dry_run, options, request, old_out)
            assert mutated is not None
            if mutated is not request:
                mutated = self._decode(info, mutated)
            new = self._prepare_update(info, old, mutated, subresource)
            causes = meta_causes(_meta(new))
            if self.builtin_defaults and info.gvk == _defaults.JOB and not subresource:
                # Built-in validation comes with built-in defaults (the same opt-in).
                causes.extend(job_update_causes(old, new))
            if causes:
                raise errors.new_invalid(info.gvk.kind, name, causes, info.gvk.group)
            self._validate_schema(info, new)
            self._validate_crd(info, new)
            if not tracked:
                new = self._track(info, old_out, new, subresource, field_manager)
            await self._admit(False, info, "UPDATE", namespace, name, subresource, user,
                              dry_run, options, new, old_out)
            current = self._store(info.gr).get(key)
            if current is None:
                raise errors.new_not_found(info.plural, name, info.gvk.group)
            if current is not old:
                if wanted_rv and patcher is None:
                    raise errors.new_conflict(info.plural, name, _CONFLICT_MSG, info.gvk.group)
                # Unconditional, or a patch: redo against the latest state (a patch that
                # carries a resourceVersion then conflicts on the next round).
                continue
            if dry_run:
                return self._out(info, new)
            return self._out(info, self._write_update(info, key, old, new))
        raise errors.new_conflict(info.plural, name, _CONFLICT_MSG, info.gvk.group)

    def _write_update(self, info: KindInfo, key: Key, old: Object, new: Object) -> Object:
        """Store ``new`` over ``old``: a no-op when nothing changed, a delete when the last
        finalizer of an object being deleted was removed."""
        new_meta = new.setdefault("metadata", {})
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers") and not (
                info.gvk == NAMESPACE_GVK and (new.get("spec") or {}).get("finalizers")):
            return self._commit(info, key, None, old)
        if json_equal(_strip_rv(new), _strip_rv(old)):
            return old  # GuaranteedUpdate skips writes that change nothing.
        return self._commit(info, key, new, old)

    async def _patch(
        self, info: KindInfo, namespace: str | None, name: str, patch: Any,
        patch_type: PatchType, *, subresource: str, user: str, field_manager: str | None,
        force: bool | None, dry_run: bool,
    ) -> Object:
        if patch_type == PatchType.APPLY:
            return await self._server_side_apply(
                info, namespace, name, patch, subresource=subresource, user=user,
                field_manager=field_manager, force=bool(force), dry_run=dry_run)
        if patch_type == PatchType.STRATEGIC and info.crd is not None:
            raise _unsupported_media_type()
        # Built-in kinds merge keyed lists (containers, env, volumes, ...) by their patch
        # merge keys; the table of keys lives with the engine (testing/_patch.py).
        effective = patch_type

        def patcher(current: Object) -> Object:
            return apply_patch(current, deep_copy(patch), effective)

        ns = (namespace or "") if info.namespaced else ""
        stub: Object = {"metadata": {"name": name, "namespace": ns}}
        return await self._update(info, stub, subresource=subresource, user=user,
                                  field_manager=field_manager, dry_run=dry_run, verb="patch",
                                  patcher=patcher)

    async def _server_side_apply(
        self, info: KindInfo, namespace: str | None, name: str, applied: Any, *,
        subresource: str, user: str, field_manager: str | None, force: bool, dry_run: bool,
    ) -> Object:
        """PATCH with ``application/apply-patch+yaml``: create or merge by field ownership."""
        if not field_manager:
            raise errors.new_invalid("PatchOptions", "", [
                {"reason": "FieldValueRequired", "field": "fieldManager",
                 "message": "Required value: is required for apply patch"}], "meta.k8s.io")
        if not isinstance(applied, Mapping):
            raise errors.BadRequest("error decoding YAML: apply patch must be an object")
        config = deep_copy(dict(applied))
        api_version = config.get("apiVersion")
        kind = config.get("kind")
        if api_version != info.gvk.api_version or kind != info.gvk.kind:
            raise errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({info.gvk.api_version})" if api_version != info.gvk.api_version
                else f"the kind in the data ({kind}) does not match the expected kind "
                     f"({info.gvk.kind})")
        ns = (namespace or "") if info.namespaced else ""
        meta = config.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise errors.BadRequest(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})")
        meta["name"] = name
        if info.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise errors.BadRequest("the namespace of the provided object does not match "
                                        "the namespace sent on the request")
            meta["namespace"] = ns
        schema = self._schema(info)
        if schema is not None:  # built-in defaults are applied to the result, unowned
            config = schema.normalize(config)
        reset = ["status"] if info.status_subresource and not subresource else None

        applied_rv = meta.get("resourceVersion")

        def merge(current: Object | None) -> Object:
            out = _apply.apply(current, config, manager=field_manager, force=force,
                               now=rfc3339(self.clock.now()), schema=schema,
                               subresource=subresource or None, reset_fields=reset)
            if subresource and applied_rv:
                # The update's resourceVersion precondition is checked before the status
                # strategy takes all but status from the stored object, so the applied
                # version must reach that check (it is not stored: the strategy resets it).
                out.setdefault("metadata", {})["resourceVersion"] = applied_rv
            return out

        key = self._key(info, ns, name)
        if key not in self._store(info.gr):
            if subresource:
                raise errors.new_not_found(info.plural, name, info.gvk.group)
            try:
                return await self._create(info, merge(None), user=user,
                                          field_manager=field_manager, dry_run=dry_run,
                                          verb="patch", tracked=True)
            except errors.AlreadyExists:
                pass  # created meanwhile: apply to it
        stub: Object = {"metadata": {"name": name, "namespace": ns}}
        return await self._update(info, stub, subresource=subresource, user=user,
                                  field_manager=field_manager, dry_run=dry_run, verb="patch",
                                  patcher=merge, tracked=True)

    async def _delete(
        self, info: KindInfo, namespace: str | None, name: str, *,
        propagation_policy: PropagationPolicy | None, preconditions: Preconditions | None,
        user: str, dry_run: bool,
    ) -> Object | None:
        ns = (namespace or "") if info.namespaced else ""
        await self.faults.before("delete", info.gvk, info.plural, ns, name)
        key = self._key(info, ns, name)
        old = self._lookup(info, key)
        self._check_preconditions(info, old, preconditions)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = str(propagation_policy)
        old_out = self._out(info, old)
        for mutating in (True, False):
            await self._admit(mutating, info, "DELETE", ns, name, "", user, dry_run, options,
                              None, old_out)
        old = self._lookup(info, key)
        self._check_preconditions(info, old, preconditions)
        if dry_run:
            return old_out
        remaining = self._delete_now(info, key, old, propagation_policy)
        return self._out(info, remaining) if remaining is not None else None

    def _check_preconditions(
        self, info: KindInfo, obj: Object, preconditions: Preconditions | None
    ) -> None:
        if preconditions is None:
            return
        meta = _meta(obj)
        name = str(meta.get("name"))
        if preconditions.uid is not None and preconditions.uid != meta.get("uid"):
            raise errors.new_conflict(
                info.plural, name, f"Precondition failed: UID in precondition: "
                f"{preconditions.uid}, UID in object meta: {meta.get('uid')}", info.gvk.group)
        if (preconditions.resource_version is not None
                and preconditions.resource_version != meta.get("resourceVersion")):
            raise errors.new_conflict(
                info.plural, name, "Precondition failed: ResourceVersion in precondition: "
                f"{preconditions.resource_version}, ResourceVersion in object meta: "
                f"{meta.get('resourceVersion')}", info.gvk.group)

    def _delete_now(
        self, info: KindInfo, key: Key, old: Object, policy: PropagationPolicy | None
    ) -> Object | None:
        """The registry's delete: mark for deletion while finalizers remain, else remove.

        Returns the stored object when it remains, None when it is gone.
        """
        new = deep_copy(old)
        meta = new.setdefault("metadata", {})
        if info.gvk == NAMESPACE_GVK:
            # The namespace registry always defers to the namespace controller.
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = rfc3339(self.clock.now())
                meta["deletionGracePeriodSeconds"] = 0
                new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
                return self._commit(info, key, new, old)
            return old
        finalizers = _deletion_finalizers(info, list(meta.get("finalizers") or []), policy)
        if finalizers:
            meta["finalizers"] = finalizers
            if not meta.get("deletionTimestamp"):
                # markAsDeleting: generation moves when deletion starts.
                if int(meta.get("generation") or 0) > 0:
                    meta["generation"] = int(meta["generation"]) + 1
                meta["deletionTimestamp"] = rfc3339(self.clock.now())
                meta["deletionGracePeriodSeconds"] = 0
            if json_equal(new, old):
                return old
            return self._commit(info, key, new, old)
        self._commit(info, key, None, old)
        return None


def _gc_relevant(obj: Object) -> bool:
    # Writes the collector or the namespace controller may have to act on.
    meta = _meta(obj)
    return bool(meta.get("ownerReferences") or meta.get("deletionTimestamp")
                or meta.get("finalizers"))


def _deletion_finalizers(
    info: KindInfo, finalizers: list[str], policy: PropagationPolicy | None
) -> list[str]:
    """The finalizers after a delete: GC finalizers per policy (deletionFinalizersFor-
    GarbageCollection), the object's own kept in order."""
    if policy == PropagationPolicy.ORPHAN:
        orphan, foreground = True, False
    elif policy == PropagationPolicy.FOREGROUND:
        orphan, foreground = False, True
    elif policy == PropagationPolicy.BACKGROUND:
        orphan, foreground = False, False
    elif FINALIZER_ORPHAN in finalizers:
        orphan, foreground = True, False
    elif FINALIZER_FOREGROUND in finalizers:
        orphan, foreground = False, True
    else:
        orphan, foreground = info.default_gc == "Orphan", False
    out = [f for f in finalizers if f not in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)]
    if orphan:
        out.append(FINALIZER_ORPHAN)
    if foreground:
        out.append(FINALIZER_FOREGROUND)
    if set(out) == set(finalizers):
        return finalizers
    return out


def _crd_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind") and not names.get("listKind"):
        names["listKind"] = f"{names['kind']}List"
    if names.get("plural") and not names.get("singular"):
        names["singular"] = str(names.get("kind", "")).lower()
    stored = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    old_status = crd.get("status") or {}
    conditions = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found", "lastTransitionTime": _epoch()},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": _epoch()},
    ]
    old_conditions = {c.get("type"): c for c in old_status.get("conditions") or []}
    for cond in conditions:
        prev = old_conditions.get(cond["type"])
        if prev and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", cond["lastTransitionTime"])
    stored_versions = list(old_status.get("storedVersions") or [])
    for v in stored:
        if v not in stored_versions:
            stored_versions.append(v)
    return {"acceptedNames": names, "conditions": conditions, "storedVersions": stored_versions}


def _epoch() -> str:
    return "1970-01-01T00:00:00Z"
