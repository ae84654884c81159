"""The garbage collector and namespace controller of the in-memory server.

One :func:`collect` sweep does what kube-controller-manager's controllers would do next:

* namespace deletion: delete the content of a terminating namespace (background
  propagation), then drop the ``kubernetes`` spec finalizer so the namespace goes away;
* ``orphan`` finalizer: remove the owner reference from every dependent, then the
  finalizer;
* ``foregroundDeletion`` finalizer: remove it once no dependent with
  ``blockOwnerDeletion: true`` remains;
* dependents (``attemptToDeleteItem``): an object whose owners are all gone (absent, or
  present with another uid) or waiting for their dependents is deleted; one with a live
  owner only loses its references to the others.

Owners are looked up live, by the reference's kind, name and uid, in the dependent's
namespace (cluster-scoped owners at cluster scope). References to kinds the server does
not serve are left alone, as the real collector cannot resolve them either.
"""

from __future__ import annotations

from typing import Any

from ..runtime.client.interface import PropagationPolicy
from ..runtime.objects import Object, deep_copy
from ._backend import Key, ServerBackend
from ._registry import NAMESPACE_GVK, GroupResource, KindInfo

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"
FINALIZER_NAMESPACE = "kubernetes"


def _meta(obj: Object) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _kinds(server: ServerBackend) -> dict[GroupResource, KindInfo]:
    out: dict[GroupResource, KindInfo] = {}
    for info in server._registry.all():
        out.setdefault(info.gr, info)
    return out


def _owner(server: ServerBackend, ref: dict[str, Any], namespace: str) -> tuple[str, Object | None]:
    """Classify one owner reference: ``("unknown"|"dangling"|"waiting"|"solid", owner)``."""
    info = server._registry.for_owner(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
    if info is None:
        return "unknown", None
    key = (namespace if info.namespaced else "", str(ref.get("name", "")))
    owner = server._store(info.gr).get(key)
    if owner is None or _meta(owner).get("uid") != ref.get("uid"):
        return "dangling", None
    meta = _meta(owner)
    if meta.get("deletionTimestamp") and FINALIZER_FOREGROUND in (meta.get("finalizers") or []):
        return "waiting", owner
    return "solid", owner


def collect(server: ServerBackend) -> bool:
    """One sweep; True when it wrote anything (call again until False)."""
    kinds = _kinds(server)
    everything: list[tuple[KindInfo, Key, Object]] = [
        (info, key, obj) for gr, info in kinds.items()
        for key, obj in list(server._store(gr).items())]
    dependents: dict[str, list[tuple[KindInfo, Key, Object, dict[str, Any]]]] = {}
    for info, key, obj in everything:
        for ref in _meta(obj).get("ownerReferences") or []:
            dependents.setdefault(str(ref.get("uid")), []).append((info, key, obj, ref))

    def live(info: KindInfo, key: Key, obj: Object) -> bool:
        return server._store(info.gr).get(key) is obj

    def write(info: KindInfo, key: Key, old: Object, new: Object) -> None:
        server._write_update(info, key, old, new)

    changed = False
    ns_info = kinds[GroupResource("", "namespaces")]
    for key, ns in list(server._store(ns_info.gr).items()):
        if _meta(ns).get("deletionTimestamp"):
            changed |= _finalize_namespace(server, kinds, ns_info, key, ns)
    if changed:
        return True

    for info, key, obj in everything:
        if not live(info, key, obj):
            continue
        meta = _meta(obj)
        finalizers = list(meta.get("finalizers") or [])
        uid = str(meta.get("uid"))
        if not meta.get("deletionTimestamp"):
            continue
        if FINALIZER_ORPHAN in finalizers:
            for dep_info, dep_key, _dep, _ref in dependents.get(uid, []):
                current = server._store(dep_info.gr).get(dep_key)
                if current is None:
                    continue
                new = deep_copy(current)
                refs = [r for r in _meta(new).get("ownerReferences") or [] if r.get("uid") != uid]
                _set_refs(new, refs)
                write(dep_info, dep_key, current, new)
            current = server._store(info.gr)[key]
            new = deep_copy(current)
            _meta(new)["finalizers"] = [f for f in finalizers if f != FINALIZER_ORPHAN]
            write(info, key, current, new)
            return True
        if FINALIZER_FOREGROUND in finalizers:
            blocking = [d for d in dependents.get(uid, [])
                        if d[3].get("blockOwnerDeletion") and live(d[0], d[1], d[2])]
            if not blocking:
                new = deep_copy(obj)
                _meta(new)["finalizers"] = [f for f in finalizers if f != FINALIZER_FOREGROUND]
                write(info, key, obj, new)
                return True

    for info, key, obj in everything:
        if not live(info, key, obj):
            continue
        meta = _meta(obj)
        refs = list(meta.get("ownerReferences") or [])
        if not refs or meta.get("deletionTimestamp"):
            continue
        namespace = key[0]
        solid: list[dict[str, Any]] = []
        dangling: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []
        for ref in refs:
            state, _ = _owner(server, ref, namespace)
            if state in ("solid", "unknown"):
                solid.append(ref)
            elif state == "dangling":
                dangling.append(ref)
            else:
                waiting.append(ref)
        if solid:
            if dangling or waiting:
                gone = {str(r.get("uid")) for r in dangling + waiting}
                new = deep_copy(obj)
                _set_refs(new, [r for r in refs if str(r.get("uid")) not in gone])
                write(info, key, obj, new)
                return True
            continue
        finalizers = meta.get("finalizers") or []
        own_dependents = dependents.get(str(meta.get("uid")), [])
        if waiting and own_dependents:
            if any(_deleting_dependents(server._store(d[0].gr).get(d[1]))
                   for d in own_dependents):
                # A dependent waits for its dependents too: make this object's references
                # non-blocking first, so an ownership cycle cannot deadlock.
                unblocked = deep_copy(obj)
                _set_refs(unblocked, [{**r, "blockOwnerDeletion": False}
                                      if r.get("blockOwnerDeletion") else r for r in refs])
                if _meta(unblocked) != meta:
                    server._write_update(info, key, obj, unblocked)
                    obj = server._store(info.gr)[key]
            policy = PropagationPolicy.FOREGROUND
        elif FINALIZER_ORPHAN in finalizers:
            policy = PropagationPolicy.ORPHAN
        elif FINALIZER_FOREGROUND in finalizers:
            policy = PropagationPolicy.FOREGROUND
        else:
            policy = PropagationPolicy.BACKGROUND
        server._delete_now(info, key, obj, policy)
        return True
    return False


def _deleting_dependents(obj: Object | None) -> bool:
    if obj is None:
        return False
    meta = _meta(obj)
    return bool(meta.get("deletionTimestamp")) and FINALIZER_FOREGROUND in (
        meta.get("finalizers") or [])


def _set_refs(obj: Object, refs: list[dict[str, Any]]) -> None:
    meta = obj.setdefault("metadata", {})
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)


def _finalize_namespace(
    server: ServerBackend, kinds: dict[GroupResource, KindInfo], ns_info: KindInfo, key: Key,
    ns: Object,
) -> bool:
    """The namespace controller: delete the content, then the namespace's spec finalizer."""
    name = key[1]
    changed = False
    remaining = False
    for info in kinds.values():
        if not info.namespaced:
            continue
        for obj_key, obj in list(server._store(info.gr).items()):
            if obj_key[0] != name:
                continue
            remaining = True
            if not _meta(obj).get("deletionTimestamp"):
                server._delete_now(info, obj_key, obj, PropagationPolicy.BACKGROUND)
                changed = True
    if remaining or changed:
        return changed
    spec_finalizers = list((ns.get("spec") or {}).get("finalizers") or [])
    if FINALIZER_NAMESPACE in spec_finalizers:
        new = deep_copy(ns)
        new.setdefault("spec", {})["finalizers"] = [
            f for f in spec_finalizers if f != FINALIZER_NAMESPACE]
        server._write_update(ns_info, key, ns, new)
        return True
    assert ns_info.gvk == NAMESPACE_GVK
    return False
