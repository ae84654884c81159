"""The AppWrapper webhooks: upstream's defaulting and invariants, and Kueue's on top.

:class:`AppWrapperWebhook` ports project-codeflare/appwrapper's webhook (v1.2.x).

Defaulting (CREATE):

- the queue label ``kueue.x-k8s.io/queue-name`` from ``default_queue_name`` when the
  AppWrapper has none;
- the labels ``workload.codeflare.dev/user`` and ``…/userid``: the requesting user's
  name and UID, sanitised (:func:`~.podsets.sanitize_label`), replacing what the client
  sent.

Create validation (every error reported, each naming its field), per component
``spec.components[i]``:

- the template is an object with ``apiVersion`` and ``kind``;
- it is not an AppWrapper ("Nested AppWrappers are forbidden");
- its namespace, if set, is the AppWrapper's;
- a kind whose PodSets are inferred comes in an API version inference knows
  (:data:`~.podsets.INFERABLE_KINDS`; this port's addition: upstream infers nothing for
  another version and trusts the declared PodSets);
- the requesting user may create it: one SubjectAccessReview per component, with the
  request's user, UID, groups and extra (``userRBACAdmissionCheck``, on by default), in
  the AppWrapper's namespace for a namespaced kind and cluster-wide (no namespace) for a
  cluster-scoped one, from the kind's REST mapping (upstream always uses the namespace).
  A kind the cluster does not serve (yet) is accepted as upstream accepts it, so that an
  AppWrapper may be applied before the CRD of a kind it wraps (GitOps tools apply in any
  order): it is asked about as resource ``*``, as upstream, but cluster-wide, its scope
  being unknown, so only a user who may create anything anywhere passes;
- each declared PodSet has a path to a pod template; inference succeeds for the kinds
  upstream infers and agrees with the declared PodSets;
- in all, 1 to 8 PodSets (a Workload holds at most 8).

Update validation: components, templates, declared PodSet paths and replicas, the user
labels and ``spec.managedBy`` are immutable; ``suspend``, ``podSetInfos``, annotations
and other labels may change.

:class:`AppWrapperKueueWebhook` serves both webhooks as one: upstream's defaulting,
then Kueue's base webhook (``suspend`` for queued AppWrappers, ``managedBy`` for
MultiKueue, the default LocalQueue); upstream's validation plus Kueue's (queue name,
prebuilt workload, ...). That is what a cluster running both operators does with two
webhook configurations, AppWrapper's first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from jobframework import field
from jobframework.admittedstate import DEFAULT_PRIVILEGED_USERS, PrivilegedUsers
from jobframework.base_webhook import BaseWebhook
from jobframework.constants import DEFAULT_FEATURES, QUEUE_LABEL, FeatureGates
from jobframework.field import OMIT_VALUE, ErrorList, Path
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object, labels_of, namespace_of
from jobframework.webhook import AdmissionRequest, Warnings

from .admission import admitted_state_errors
from .api import APPWRAPPER_GVK, MAX_POD_SETS, USER_LABEL, USERID_LABEL
from .job import AppWrapperJob
from .podsets import (
    InferenceError,
    PathError,
    TemplateError,
    get_pod_template_spec,
    infer_pod_sets,
    replicas,
    sanitize_label,
    supported_api_versions,
    template_gvk,
    validate_pod_sets,
)

log = logging.getLogger(__name__)

__all__ = [
    "IMMUTABLE_MSG",
    "SUBJECT_ACCESS_REVIEW_GVK",
    "AppWrapperKueueWebhook",
    "AppWrapperWebhook",
    "validate_appwrapper_update",
]

SUBJECT_ACCESS_REVIEW_GVK: Final = GVK("authorization.k8s.io", "v1", "SubjectAccessReview")
#: Upstream's detail for every immutability error.
IMMUTABLE_MSG: Final = "attempt to change immutable field"

_SPEC: Final = Path.new("spec")
_COMPONENTS: Final = _SPEC.child("components")


class MissingAdmissionRequestError(RuntimeError):
    """The webhook was called without the admission request it needs (the user)."""


def _components(aw: Mapping[str, Any]) -> list[Any]:
    spec = aw.get("spec")
    components = spec.get("components") if isinstance(spec, Mapping) else None
    return components if isinstance(components, list) else []


def _spec(aw: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = aw.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _declared(component: Any) -> list[Mapping[str, Any]]:
    pod_sets = component.get("podSets") if isinstance(component, Mapping) else None
    if not isinstance(pod_sets, list):
        return []
    return [p if isinstance(p, Mapping) else {} for p in pod_sets]


def _canonical(value: Any) -> str:
    # Upstream compares the stored JSON bytes; the canonical JSON is the same test here.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def validate_appwrapper_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> ErrorList:
    """Upstream's update rules: what the create validation checked may not change."""
    old_components, new_components = _components(old), _components(new)
    if len(old_components) != len(new_components):
        return ErrorList([field.forbidden(_COMPONENTS, IMMUTABLE_MSG)])
    errs = ErrorList()
    for idx, (old_c, new_c) in enumerate(zip(old_components, new_components, strict=True)):
        path = _COMPONENTS.index_(idx)
        old_t = old_c.get("template") if isinstance(old_c, Mapping) else None
        new_t = new_c.get("template") if isinstance(new_c, Mapping) else None
        if _canonical(old_t) != _canonical(new_t):
            errs.append(field.forbidden(path.child("template", "raw"), IMMUTABLE_MSG))
        old_ps, new_ps = _declared(old_c), _declared(new_c)
        # Upstream spells this field "podsets" in its paths.
        ps_path = path.child("podsets")
        if len(old_ps) != len(new_ps):
            errs.append(field.forbidden(ps_path, IMMUTABLE_MSG))
            continue
        for j, (o, n) in enumerate(zip(old_ps, new_ps, strict=True)):
            if replicas(o) != replicas(n):
                errs.append(field.forbidden(ps_path.index_(j).child("replicas"), IMMUTABLE_MSG))
            if o.get("path", "") != n.get("path", ""):
                errs.append(field.forbidden(ps_path.index_(j).child("path"), IMMUTABLE_MSG))
    old_labels, new_labels = labels_of(old), labels_of(new)
    for key in (USER_LABEL, USERID_LABEL):
        if old_labels.get(key, "") != new_labels.get(key, ""):
            errs.append(field.forbidden(Path.new("metadata").child("labels").key(key),
                                        IMMUTABLE_MSG))
    old_spec = _spec(old)
    new_spec = _spec(new)
    # Pointer equality: absent and "" differ.
    if ("managedBy" in old_spec, old_spec.get("managedBy")) != (
            "managedBy" in new_spec, new_spec.get("managedBy")):
        errs.append(field.forbidden(_SPEC.child("managedBy"), IMMUTABLE_MSG))
    return errs


class AppWrapperWebhook:
    """Upstream's AppWrapper defaulter and validator (see the module docstring).

    Args:
        client: creates the SubjectAccessReviews and maps kinds to resources (its
            ``rest_mapper``); None disables the RBAC check.
        default_queue_name: the queue label to add when there is none ("" = none).
        user_rbac_admission_check: whether to check, with a SubjectAccessReview, that
            the requesting user may create every wrapped object.
    """

    def __init__(self, client: Client | None = None, *, default_queue_name: str = "",
                 user_rbac_admission_check: bool = True) -> None:
        self.client = client
        self.default_queue_name = default_queue_name
        self.user_rbac_admission_check = user_rbac_admission_check

    # -- defaulting -------------------------------------------------------------------------

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """The queue label (when configured and absent) and the user labels, in place.

        Raises :class:`MissingAdmissionRequestError` without a request (the user is
        unknown), as upstream does.
        """
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        if self.default_queue_name:
            labels.setdefault(QUEUE_LABEL, self.default_queue_name)
        if request is None:
            raise MissingAdmissionRequestError("admission.Request not found in context")
        labels[USER_LABEL] = sanitize_label(request.user_info.username)
        labels[USERID_LABEL] = sanitize_label(request.user_info.uid)

    # -- validation -------------------------------------------------------------------------

    async def create_errors(self, aw: Object, request: AdmissionRequest | None) -> ErrorList:
        """Every create-time error of ``aw`` (see the module docstring)."""
        errs = ErrorList()
        if request is None:
            errs.append(field.internal_error(
                _COMPONENTS, MissingAdmissionRequestError("admission.Request not found in "
                                                          "context")))
        errs.extend(await self.spec_errors(aw, request))
        return errs

    async def spec_errors(self, aw: Object, request: AdmissionRequest | None = None
                          ) -> ErrorList:
        """The create-time errors of ``aw``'s components; without a ``request`` (the
        framework controller checking an AppWrapper written past the webhook) no
        SubjectAccessReview is asked, the creator being unknown."""
        errs = ErrorList()
        namespace = namespace_of(aw) or (request.namespace if request is not None else "")
        count = 0
        for idx, component in enumerate(_components(aw)):
            count += await self._component_errors(errs, idx, component, namespace, request)
        if count == 0:
            errs.append(field.invalid(_COMPONENTS, OMIT_VALUE, "components contains no podspecs"))
        if count > MAX_POD_SETS:
            errs.append(field.invalid(
                _COMPONENTS, OMIT_VALUE,
                f"components contains {count} podspecs; at most {MAX_POD_SETS} are allowed"))
        return errs

    async def _component_errors(self, errs: ErrorList, idx: int, component: Any,
                                namespace: str, request: AdmissionRequest | None) -> int:
        """Append component ``idx``'s errors; returns how many PodSets it counts for."""
        path = _COMPONENTS.index_(idx)
        template_path = path.child("template")
        template = component.get("template") if isinstance(component, Mapping) else None
        gvk = template_gvk(template) if isinstance(template, Mapping) else None
        if gvk is None or not gvk.kind or not gvk.version:
            # Upstream goes on with a nil kind and crashes; nothing more can be checked.
            errs.append(field.invalid(template_path, OMIT_VALUE, "failed to decode as JSON"))
            return 0
        assert isinstance(template, Mapping)
        if gvk == APPWRAPPER_GVK:
            errs.append(field.forbidden(template_path, "Nested AppWrappers are forbidden"))
        meta = template.get("metadata")
        template_ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        if template_ns and template_ns != namespace:
            errs.append(field.forbidden(template_path.child("metadata", "namespace"),
                                        "AppWrappers cannot create objects in other namespaces"))
        declared = _declared(component)
        supported = supported_api_versions(gvk)
        if supported and gvk.api_version not in supported:
            # Deviation: upstream infers nothing here and trusts the declared PodSets.
            errs.append(field.not_supported(template_path.child("apiVersion"),
                                            gvk.api_version, supported))
            return len(declared)
        await self._access_errors(errs, template_path, gvk, namespace, request)

        pod_sets_path = path.child("podSets")
        for j, ps in enumerate(declared):
            ps_path = pod_sets_path.index_(j).child("path")
            value = ps.get("path")
            ps_str = value if isinstance(value, str) else ""
            if not ps_str:
                errs.append(field.required(ps_path, "podspec must specify path"))
            try:
                get_pod_template_spec(template, ps_str)
            except (PathError, TemplateError) as err:
                errs.append(field.invalid(ps_path, ps_str,
                                          f"path does not refer to a v1.PodSpecTemplate: {err}"))
        try:
            inferred = infer_pod_sets(template)
        except InferenceError as err:
            errs.append(field.invalid(template_path, OMIT_VALUE,
                                      f"error inferring PodSets: {err}"))
            return 0
        problem = validate_pod_sets(declared, inferred)
        if problem is not None:
            errs.append(field.invalid(pod_sets_path, OMIT_VALUE, problem))
        return max(len(declared), len(inferred))

    async def _access_errors(self, errs: ErrorList, template_path: Path, gvk: GVK,
                             namespace: str, request: AdmissionRequest | None) -> None:
        """The SubjectAccessReview (``userRBACAdmissionCheck``)."""
        if self.client is None or not self.user_rbac_admission_check or request is None:
            return
        try:
            mapping = await self.client.rest_mapper.rest_mapping(gvk)
        except LookupError:
            # Not served (yet): accepted as upstream does, so an AppWrapper may be applied
            # before the CRD of a kind it wraps; created before the CRD is installed, the
            # component fails the AppWrapper (CreateFailed), as upstream.
            resource = "*"  # upstream's fallback when discovery does not know the kind
            # Scope unknown: asked cluster-wide, so a namespaced grant never stands in
            # for a cluster-scoped one (the object cannot be created anyway).
            review_namespace = ""
        else:
            resource = mapping.resource.resource
            # Deviation: upstream always asks in the AppWrapper's namespace, which a
            # RoleBinding there satisfies for a cluster-scoped kind too.
            review_namespace = namespace if mapping.namespaced else ""
        user = request.user_info
        spec: dict[str, Any] = {
            "resourceAttributes": {"namespace": review_namespace, "verb": "create",
                                   "group": gvk.group, "version": gvk.version,
                                   "resource": resource},
            "user": user.username, "uid": user.uid, "groups": list(user.groups)}
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        sar: Object = {"apiVersion": SUBJECT_ACCESS_REVIEW_GVK.api_version,
                       "kind": SUBJECT_ACCESS_REVIEW_GVK.kind, "metadata": {}, "spec": spec}
        try:
            review = await self.client.create(sar)
        except Exception as err:  # any failure to ask is an internal error
            errs.append(field.internal_error(template_path, err))
            return
        status = review.get("status")
        if not (isinstance(status, Mapping) and status.get("allowed") is True):
            where = f"in {review_namespace}" if review_namespace else "cluster-wide"
            errs.append(field.forbidden(
                template_path, f"User {user.username} is not authorized to create "
                f"{resource} {where}"))

    async def validate_create(self, obj: Object,
                              request: AdmissionRequest | None = None) -> Warnings:
        """Reject an AppWrapper that breaks a create rule (403 with every error)."""
        agg = (await self.create_errors(obj, request)).to_aggregate()
        if agg is not None:
            raise agg
        return None

    async def validate_update(self, old: Object, new: Object,
                              request: AdmissionRequest | None = None) -> Warnings:
        """Reject a change to an immutable part (403 with every error)."""
        del request
        agg = validate_appwrapper_update(old, new).to_aggregate()
        if agg is not None:
            raise agg
        return None

    async def validate_delete(self, obj: Object,
                              request: AdmissionRequest | None = None) -> Warnings:
        """Deletes are always allowed."""
        del obj, request
        return None


class AppWrapperKueueWebhook(BaseWebhook):
    """Upstream's AppWrapper webhook and Kueue's base webhook served as one.

    ``appwrapper`` holds upstream's options; ``privileged_users`` who may change the
    ``podSetInfos`` (the admission, see :mod:`.admission`); the other keyword arguments
    are :class:`~jobframework.base_webhook.BaseWebhook`'s.
    """

    def __init__(self, client: Any, *, appwrapper: AppWrapperWebhook | None = None,
                 features: FeatureGates = DEFAULT_FEATURES,
                 privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS,
                 **options: Any) -> None:
        def from_object(obj: Object) -> AppWrapperJob:
            return AppWrapperJob(obj, features=features)

        super().__init__(from_object, client, features=features, **options)
        self.appwrapper = appwrapper if appwrapper is not None else AppWrapperWebhook(client)
        self.privileged_users = privileged_users

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """Upstream's defaults (queue and user labels), then Kueue's (suspend, ...)."""
        await self.appwrapper.default(obj, request)
        await super().default(obj, request)

    async def validate_create(self, obj: Object,
                              request: AdmissionRequest | None = None) -> Sequence[str] | None:
        """Upstream's create rules, then Kueue's; one denial with every error."""
        errs = await self.appwrapper.create_errors(obj, request)
        errs.extend(self.create_errors(self.from_object(obj)))
        agg = errs.to_aggregate()
        if agg is not None:
            raise agg
        return None

    async def validate_update(self, old: Object, new: Object,
                              request: AdmissionRequest | None = None) -> Sequence[str] | None:
        """Upstream's immutability rules, who may change the ``podSetInfos``, then Kueue's;
        one denial with every error."""
        errs = validate_appwrapper_update(old, new)
        # Deviation: upstream lets anyone who may update the AppWrapper rewrite them.
        errs.extend(admitted_state_errors(old, new, request, self.privileged_users))
        errs.extend(self.update_errors(self.from_object(old), self.from_object(new)))
        agg = errs.to_aggregate()
        if agg is not None:
            raise agg
        return None
