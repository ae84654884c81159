"""Where an AppWrapper's pods are: PodSet paths, inference, normalisation and injection.

Pure functions on JSON dicts, shared by the Kueue adapter (:mod:`.job`), the webhook
(:mod:`.webhook`) and the framework controller (:mod:`.controller`). They port
upstream's ``pkg/utils`` (project-codeflare/appwrapper v1.2.x) and the pod-template part
of the controller's ``createComponent``:

- :func:`get_value_at_path`: the PodSet path grammar (``template.spec.x[1].y``), with
  upstream's error texts;
- :func:`infer_pod_sets`: the PodSets of the kinds upstream knows (Pod, Deployment,
  StatefulSet, Job, JobSet, PyTorchJob, RayCluster, RayJob), keyed by group and kind,
  each with its known API versions (:data:`INFERABLE_KINDS`; another version is an
  error, not "no PodSets"); other kinds have none;
- :func:`get_pod_template_spec`: the canonical pod template Kueue sees for a PodSet (the
  fields Kueue compares, with the API server's defaults), so the Workload's PodSets
  compare equal to the job's on every reconcile;
- :func:`set_pod_set_infos` / :func:`clear_pod_set_infos`: Kueue's admission data
  stored in ``spec.components[].podSetInfos``;
- :func:`inject_pod_set_infos`: the object the controller creates for a component, with
  the AppWrapper label and the admission data merged into each pod template.
"""

from __future__ import annotations

import copy
import decimal
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from jobframework.runtime.gofmt import go_float
from jobframework.runtime.objects import GVK, Object, name_of, namespace_of
from jobframework.validation import quantity_value

from .api import (
    APPWRAPPER_GVK,
    APPWRAPPER_LABEL,
    TAS_POD_INDEX_LABEL_ANNOTATION,
    TAS_SUB_GROUP_COUNT_ANNOTATION,
    TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION,
)

__all__ = [
    "INFERABLE_GVKS",
    "INFERABLE_KINDS",
    "InferenceError",
    "InjectionError",
    "PathError",
    "PodSetCountError",
    "TemplateError",
    "UnsupportedVersionError",
    "clear_pod_set_infos",
    "effective_pod_sets",
    "expected_pods",
    "get_component_pod_sets",
    "get_pod_template_spec",
    "get_raw_template",
    "get_replicas",
    "get_value_at_path",
    "go_value",
    "infer_pod_sets",
    "inject_pod_set_infos",
    "replicas",
    "sanitize_label",
    "set_pod_set_infos",
    "supported_api_versions",
    "template_gvk",
    "validate_pod_sets",
]

TEMPLATE: Final = "template"

#: Label values written by inference into the TAS hints (Kubernetes, JobSet, Kubeflow).
JOB_COMPLETION_INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-index"
KUBEFLOW_REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"

#: (group, kind) of the kinds whose PodSets are inferred.
_POD: Final = ("", "Pod")
_DEPLOYMENT: Final = ("apps", "Deployment")
_STATEFULSET: Final = ("apps", "StatefulSet")
_JOB: Final = ("batch", "Job")
_JOBSET: Final = ("jobset.x-k8s.io", "JobSet")
_PYTORCHJOB: Final = ("kubeflow.org", "PyTorchJob")
_RAYCLUSTER: Final = ("ray.io", "RayCluster")
_RAYJOB: Final = ("ray.io", "RayJob")

#: Inference is keyed by (group, kind), with the API versions whose layout is known for
#: each (upstream's table, v1.2.x; no LeaderWorkerSet). Another version of one of these
#: kinds, such as a ``ray.io/v1alpha1`` RayCluster that older KubeRay still serves, is
#: refused rather than trusted: its declared PodSets could not be checked.
INFERABLE_KINDS: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    _POD: ("v1",),
    _DEPLOYMENT: ("v1",),
    _STATEFULSET: ("v1",),
    _JOB: ("v1",),
    _JOBSET: ("v1alpha2",),
    _PYTORCHJOB: ("v1",),
    _RAYCLUSTER: ("v1",),
    _RAYJOB: ("v1",),
}

#: The GVKs whose PodSets are inferred (every known version of every inferable kind).
INFERABLE_GVKS: Final = frozenset(GVK(group, version, kind)
                                  for (group, kind), versions in INFERABLE_KINDS.items()
                                  for version in versions)


class PathError(ValueError):
    """A PodSet path that does not lead where it should (upstream's message)."""


class TemplateError(ValueError):
    """The content at a PodSet path is not a pod template (upstream's message)."""


class InferenceError(ValueError):
    """A template of an inferable kind whose PodSets cannot be inferred."""


class UnsupportedVersionError(InferenceError):
    """A template of an inferable kind in an API version whose layout is not known."""


class InjectionError(ValueError):
    """The admission data cannot be merged into a component (a conflict, a bad shape)."""


class PodSetCountError(ValueError):
    """``set_pod_set_infos`` got a number of infos other than the number of PodSets."""


# --- Go renderings and parsers ---------------------------------------------------------------


def go_value(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value (maps print sorted, as fmt does)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, Mapping):
        inner = " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value))
        return f"map[{inner}]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    return str(value)


def _atoi(text: str) -> int:
    # Go's strconv.Atoi: an optional sign, then ASCII digits only.
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all("0" <= ch <= "9" for ch in body):
        raise ValueError(f"invalid syntax: {text!r}")
    value = int(body)
    return -value if text[:1] == "-" else value


def _int32(value: int) -> int:
    # Go's int32(v): two's-complement wrap-around.
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


def _is_int(value: Any) -> bool:
    # A JSON integer (Go decodes it as int64); booleans and floats are not.
    return isinstance(value, int) and not isinstance(value, bool)


# --- the path grammar ------------------------------------------------------------------------


def get_value_at_path(obj: Mapping[str, Any], path: str) -> Any:
    """The value at a PodSet ``path`` inside a component (``template`` is ``obj`` itself).

    Grammar: ``template`` then any of ``.key`` (up to the next ``.`` or ``[``) and
    ``[n]``. Raises :class:`PathError` with upstream's message naming the position.
    """
    processed = TEMPLATE
    if not path.startswith(processed):
        raise PathError("first element of the path must be 'template'")
    remaining = path[len(processed):]
    cursor: Any = obj
    while remaining:
        if remaining.startswith("["):
            end = remaining.find("]")
            if end < 0:
                raise PathError(f"at path position '{processed}' invalid array index "
                                f"'{remaining}'")
            try:
                index = _atoi(remaining[1:end])
            except ValueError:
                raise PathError(f"at path position '{processed}' invalid index expression "
                                f"'{remaining[1:end]}'") from None
            if not isinstance(cursor, list):
                raise PathError(f"at path position '{processed}' found non-array value")
            if index < 0 or index >= len(cursor):
                raise PathError(f"at path position '{processed}' out of bounds index "
                                f"'{index}'")
            cursor = cursor[index]
            # Upstream keeps the '[n' without its ']' in later messages.
            processed += remaining[:end]
            remaining = remaining[end + 1:]
        elif remaining.startswith("."):
            remaining = remaining[1:]
            processed += "."
            end = len(remaining)
            dot = remaining.find(".")
            if dot > 0:
                end = dot
            bracket = remaining.find("[")
            if 0 < bracket < end:
                end = bracket
            key = remaining[:end]
            if not isinstance(cursor, Mapping):
                raise PathError(f"at path position '{processed}' non-map value")
            if key not in cursor:
                raise PathError(f"at path position '{processed}' missing field '{key}'")
            cursor = cursor[key]
            remaining = remaining[len(key):]
            processed += key
        else:
            raise PathError(f"at path position '{processed}' invalid path element "
                            f"'{remaining}'")
    return cursor


def get_raw_template(obj: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The map at ``path`` (upstream's ``GetRawTemplate``); :class:`PathError` otherwise."""
    value = get_value_at_path(obj, path)
    if not isinstance(value, dict):
        raise PathError(f"at path position '{path}' non-map value")
    return value


def get_replicas(obj: Mapping[str, Any], path: str) -> int:
    """The integer at ``path`` (upstream's ``GetReplicas``); :class:`PathError` otherwise."""
    value = get_value_at_path(obj, path)
    if not _is_int(value):
        raise PathError(f"at path position '{path}' non-int value {go_value(value)}")
    return _int32(value)


def _infer_replicas(obj: Mapping[str, Any], path: str) -> int:
    """The replica count at ``path``: absent or null means 1, a non-integer is an error."""
    if path == "":
        return 1
    parent: Mapping[str, Any] = obj
    dot = path.rfind(".")
    if dot >= 0:
        parent = get_raw_template(obj, path[:dot])
    value = parent.get(path[dot + 1:])
    if value is None:
        return 1
    if not _is_int(value):
        raise InferenceError(f"at path position '{path}' non-int value {go_value(value)}")
    return _int32(value)


# --- inference -------------------------------------------------------------------------------


def template_gvk(template: Mapping[str, Any]) -> GVK | None:
    """The GVK a component template declares (None without a usable apiVersion or kind).

    As apimachinery's ``ParseGroupVersion``: more than one ``/`` is not a group/version.
    """
    api_version = template.get("apiVersion")
    kind = template.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    if api_version.count("/") > 1:
        return None
    return GVK.from_api_version(api_version, kind)


def supported_api_versions(gvk: GVK) -> tuple[str, ...]:
    """The apiVersions (``group/version``) inference knows for ``gvk``'s group and kind.

    Empty for a kind that is not inferred (a Service, a LeaderWorkerSet): any version of
    it is accepted, with its declared PodSets, as upstream.
    """
    versions = INFERABLE_KINDS.get((gvk.group, gvk.kind), ())
    return tuple(GVK(gvk.group, v, gvk.kind).api_version for v in versions)


def _pod_set(path: str, count: int, annotations: dict[str, str] | None = None) -> Object:
    pod_set: Object = {"replicas": count, "path": path}
    if annotations:
        pod_set["annotations"] = annotations
    return pod_set


def _present(obj: Mapping[str, Any], path: str) -> bool:
    try:
        get_value_at_path(obj, path)
    except PathError:
        return False
    return True


def _optional_int(obj: Mapping[str, Any], path: str) -> int | None:
    try:
        return get_replicas(obj, path)
    except PathError:
        return None


def _ray_pod_sets(obj: Mapping[str, Any], prefix: str) -> list[Object]:
    # The head is always there (its template is checked with the others afterwards).
    out = [_pod_set(prefix + "headGroupSpec.template", 1)]
    try:
        workers = get_value_at_path(obj, prefix + "workerGroupSpecs")
    except PathError:
        return out
    if isinstance(workers, list):
        for i in range(len(workers)):
            worker = f"{prefix}workerGroupSpecs[{i}]."
            if _present(obj, worker + TEMPLATE):
                out.append(_pod_set(worker + TEMPLATE, _infer_replicas(obj, worker + "replicas")))
    return out


def infer_pod_sets(template: Mapping[str, Any]) -> list[Object]:
    """The PodSets of a component template, for the kinds upstream infers.

    Other kinds (a Service, a LeaderWorkerSet, a ConfigMap) have none: an empty list.
    Raises :class:`InferenceError` when a template of an inferable kind is malformed
    (a non-integer replica count, a PodSet path that is not a pod template), and its
    subclass :class:`UnsupportedVersionError` for an inferable kind in an API version
    not listed in :data:`INFERABLE_KINDS`.
    """
    # Paths start with "template", which names the component template itself.
    root = template
    gvk = template_gvk(template)
    if gvk is None:
        return []
    supported = supported_api_versions(gvk)
    if supported and gvk.api_version not in supported:
        raise UnsupportedVersionError(
            f'{gvk.kind} in apiVersion "{gvk.api_version}": PodSets are inferred only for '
            f"{', '.join(supported)}")
    gk = (gvk.group, gvk.kind)
    pod_sets: list[Object] = []
    try:
        if gk == _JOB:
            count = 1
            parallelism = _optional_int(root, "template.spec.parallelism")
            if parallelism is not None:
                count = parallelism
            completions = _optional_int(root, "template.spec.completions")
            if completions is not None and completions < count:
                count = completions
            pod_sets.append(_pod_set("template.spec.template", count,
                                     {TAS_POD_INDEX_LABEL_ANNOTATION: JOB_COMPLETION_INDEX_LABEL}))
        elif gk == _JOBSET:
            try:
                jobs = get_value_at_path(root, "template.spec.replicatedJobs")
            except PathError:
                jobs = None
            if isinstance(jobs, list):
                for i in range(len(jobs)):
                    prefix = f"template.spec.replicatedJobs[{i}]."
                    if not _present(root, prefix + TEMPLATE):
                        continue
                    pods = 1
                    parallelism = _optional_int(root, prefix + "template.spec.parallelism")
                    if parallelism is not None:
                        pods = parallelism
                    completions = _optional_int(root, prefix + "template.spec.completions")
                    if completions is not None and completions < pods:
                        pods = completions
                    job_replicas = _optional_int(root, prefix + "replicas")
                    if job_replicas is None:
                        job_replicas = 1
                    pod_sets.append(_pod_set(
                        prefix + "template.spec.template", _int32(job_replicas * pods),
                        {TAS_POD_INDEX_LABEL_ANNOTATION: JOB_COMPLETION_INDEX_LABEL,
                         TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: JOBSET_JOB_INDEX_LABEL,
                         TAS_SUB_GROUP_COUNT_ANNOTATION: str(job_replicas)}))
        elif gk == _PYTORCHJOB:
            for replica_type in ("Master", "Worker"):
                prefix = f"template.spec.pytorchReplicaSpecs.{replica_type}."
                if _present(root, prefix + TEMPLATE):
                    pod_sets.append(_pod_set(
                        prefix + TEMPLATE, _infer_replicas(root, prefix + "replicas"),
                        {TAS_POD_INDEX_LABEL_ANNOTATION: KUBEFLOW_REPLICA_INDEX_LABEL}))
        elif gk == _RAYCLUSTER:
            pod_sets.extend(_ray_pod_sets(root, "template.spec."))
        elif gk == _RAYJOB:
            pod_sets.extend(_ray_pod_sets(root, "template.spec.rayClusterSpec."))
        elif gk == _POD:
            pod_sets.append(_pod_set(TEMPLATE, 1))
        elif gk in (_DEPLOYMENT, _STATEFULSET) and _present(root, "template.spec.template"):
            pod_sets.append(_pod_set("template.spec.template",
                                         _infer_replicas(root, "template.spec.replicas")))
    except PathError as err:
        raise InferenceError(str(err)) from None
    for ps in pod_sets:
        try:
            get_pod_template_spec(template, ps["path"])
        except (PathError, TemplateError) as err:
            raise InferenceError(
                f"{ps['path']} does not refer to a v1.PodSpecTemplate: {err}") from None
    return pod_sets


def get_component_pod_sets(component: Mapping[str, Any]) -> list[Object]:
    """A component's effective PodSets: its declared ``podSets``, else the inferred ones.

    Raises :class:`InferenceError` when the template is not an object or cannot be
    inferred.
    """
    declared = component.get("podSets")
    if isinstance(declared, list) and declared:
        return [copy.deepcopy(dict(p)) for p in declared if isinstance(p, Mapping)]
    template = component.get("template")
    if not isinstance(template, Mapping):
        raise InferenceError("component template is not an object")
    return infer_pod_sets(template)


def _components(aw: Mapping[str, Any]) -> list[Any]:
    components = (aw.get("spec") or {}).get("components")
    return components if isinstance(components, list) else []


def _component_statuses(aw: Mapping[str, Any]) -> list[Any]:
    status = aw.get("status")
    statuses = status.get("componentStatus") if isinstance(status, Mapping) else None
    return statuses if isinstance(statuses, list) else []


def effective_pod_sets(aw: Mapping[str, Any]) -> list[list[Object]]:
    """Per component, its PodSets (upstream's ``EnsureComponentStatusInitialized``).

    The ones frozen in ``status.componentStatus`` when it has one entry per component,
    else computed (declared, else inferred) without touching ``aw``. Raises
    :class:`InferenceError` like :func:`get_component_pod_sets`.
    """
    components = _components(aw)
    statuses = _component_statuses(aw)
    if statuses and len(statuses) == len(components):
        return [[dict(p) for p in (cs.get("podSets") or []) if isinstance(p, Mapping)]
                if isinstance(cs, Mapping) else [] for cs in statuses]
    return [get_component_pod_sets(c) if isinstance(c, Mapping) else
            _raise(InferenceError(f"component {i} is not an object"))
            for i, c in enumerate(components)]


def _raise(err: Exception) -> list[Object]:
    raise err


def replicas(pod_set: Mapping[str, Any]) -> int:
    """A PodSet's pod count: ``replicas``, 1 when absent (upstream's ``Replicas``)."""
    value = pod_set.get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def expected_pods(aw: Mapping[str, Any]) -> int:
    """The pods an AppWrapper makes: the effective PodSets' replicas summed."""
    return sum(replicas(ps) for pod_sets in effective_pod_sets(aw) for ps in pod_sets)


def validate_pod_sets(declared: Sequence[Mapping[str, Any]],
                      inferred: Sequence[Mapping[str, Any]]) -> str | None:
    """Upstream's ``ValidatePodSets``: why the declared PodSets disagree with inference.

    None when they agree (or nothing is declared, or the kind is not inferable).
    Declared annotations are not compared.
    """
    if not declared:
        return None
    by_path: dict[str, Mapping[str, Any]] = {}
    for ps in declared:
        path = str(ps.get("path") or "")
        if path in by_path:
            return f"multiple DeclaredPodSets with path '{path}'"
        by_path[path] = ps
    if inferred:
        if len(inferred) != len(declared):
            return (f"DeclaredPodSet count {len(declared)} differs from inferred count "
                    f"{len(inferred)}")
        for ips in inferred:
            path = str(ips.get("path") or "")
            dps = by_path.get(path)
            if dps is None:
                return f"PodSet with path '{path}' is missing"
            if replicas(ips) != replicas(dps):
                return (f"replica count {replicas(dps)} differs from inferred count "
                        f"{replicas(ips)} for PodSet at path position '{path}'")
    return None


# --- the pod template Kueue sees -------------------------------------------------------------

#: ``v1.PodSpec`` fields (Kubernetes 1.36); anything else is an unknown field.
_POD_SPEC_FIELDS: Final = frozenset({
    "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
    "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
    "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
    "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims", "resources", "hostnameOverride", "workloadRef",
})
#: ``v1.Container`` fields (Kubernetes 1.36).
_CONTAINER_FIELDS: Final = frozenset({
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
    "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
    "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
    "tty", "stopSignal",
})
_EPHEMERAL_CONTAINER_FIELDS: Final = _CONTAINER_FIELDS | {"targetContainerName"}
_RESOURCE_FIELDS: Final = frozenset({"limits", "requests", "claims"})

_LIST_FIELDS: Final = frozenset({
    "volumes", "initContainers", "containers", "ephemeralContainers", "imagePullSecrets",
    "tolerations", "hostAliases", "readinessGates", "topologySpreadConstraints",
    "schedulingGates", "resourceClaims"})
_MAP_FIELDS: Final = frozenset({
    "nodeSelector", "securityContext", "affinity", "dnsConfig", "overhead", "os", "resources",
    "workloadRef"})
_STRING_FIELDS: Final = frozenset({
    "restartPolicy", "dnsPolicy", "serviceAccountName", "serviceAccount", "nodeName",
    "hostname", "subdomain", "schedulerName", "priorityClassName", "runtimeClassName",
    "preemptionPolicy", "hostnameOverride"})
_INT_FIELDS: Final = frozenset({"terminationGracePeriodSeconds", "activeDeadlineSeconds",
                                "priority"})
_BOOL_FIELDS: Final = frozenset({"automountServiceAccountToken", "hostNetwork", "hostPID",
                                 "hostIPC", "shareProcessNamespace", "enableServiceLinks",
                                 "setHostnameAsFQDN", "hostUsers"})
_CONTAINER_STRINGS: Final = frozenset({"name", "image", "workingDir", "terminationMessagePath",
                                       "terminationMessagePolicy", "imagePullPolicy",
                                       "restartPolicy", "stopSignal", "targetContainerName"})
_CONTAINER_STRING_LISTS: Final = frozenset({"command", "args"})
_CONTAINER_LISTS: Final = frozenset({"ports", "envFrom", "env", "resizePolicy",
                                     "restartPolicyRules", "volumeMounts", "volumeDevices"})
_CONTAINER_MAPS: Final = frozenset({"resources", "livenessProbe", "readinessProbe",
                                    "startupProbe", "lifecycle", "securityContext"})


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "slice"
    return "map"


def _check_type(field: str, value: Any, kind: str) -> None:
    if value is None:
        return
    ok = {"list": isinstance(value, list), "map": isinstance(value, dict),
          "string": isinstance(value, str), "int": _is_int(value),
          "bool": isinstance(value, bool)}[kind]
    if not ok:
        raise TemplateError(f"{field}: expected {kind}, got {_json_type(value)} "
                            f"{go_value(value)}")


def _check_quantities(field: str, values: Any) -> None:
    _check_type(field, values, "map")
    for key, q in (values or {}).items():
        if isinstance(q, bool) or quantity_value(q) is None:
            raise TemplateError(f"{field}[{key}]: quantities must match the regular "
                                f"expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def _check_container(field: str, container: Any, allowed: frozenset[str]) -> None:
    if not isinstance(container, dict):
        raise TemplateError(f"{field}: expected map, got {_json_type(container)}")
    for key, value in container.items():
        sub = f"{field}.{key}"
        if key not in allowed:
            raise TemplateError(f'unknown field "{sub}"')
        if key in _CONTAINER_STRINGS:
            _check_type(sub, value, "string")
        elif key in _CONTAINER_STRING_LISTS:
            _check_type(sub, value, "list")
            for i, item in enumerate(value or []):
                _check_type(f"{sub}[{i}]", item, "string")
        elif key in _CONTAINER_LISTS:
            _check_type(sub, value, "list")
        elif key in _CONTAINER_MAPS:
            _check_type(sub, value, "map")
        elif key in ("stdin", "stdinOnce", "tty"):
            _check_type(sub, value, "bool")
    resources = container.get("resources") or {}
    for key in resources:
        if key not in _RESOURCE_FIELDS:
            raise TemplateError(f'unknown field "{field}.resources.{key}"')
    for key in ("limits", "requests"):
        _check_quantities(f"{field}.resources.{key}", resources.get(key))


def _check_pod_spec(spec: Mapping[str, Any]) -> None:
    """Strict decoding of a ``v1.PodSpec``: unknown fields and wrong JSON types fail.

    Checks the PodSpec's own fields and the containers' (the parts Kueue reads); nested
    objects such as volumes and probes are checked for their JSON type only.
    """
    for key, value in spec.items():
        if key not in _POD_SPEC_FIELDS:
            raise TemplateError(f'unknown field "{key}"')
        if key in _LIST_FIELDS:
            _check_type(key, value, "list")
        elif key in _MAP_FIELDS:
            _check_type(key, value, "map")
        elif key in _STRING_FIELDS:
            _check_type(key, value, "string")
        elif key in _INT_FIELDS:
            _check_type(key, value, "int")
        elif key in _BOOL_FIELDS:
            _check_type(key, value, "bool")
    for key, allowed in (("containers", _CONTAINER_FIELDS),
                         ("initContainers", _CONTAINER_FIELDS),
                         ("ephemeralContainers", _EPHEMERAL_CONTAINER_FIELDS)):
        for i, container in enumerate(spec.get(key) or []):
            _check_container(f"{key}[{i}]", container, allowed)
    for key in ("nodeSelector",):
        for k, v in (spec.get(key) or {}).items():
            _check_type(f"{key}[{k}]", v, "string")
    for i, toleration in enumerate(spec.get("tolerations") or []):
        _check_type(f"tolerations[{i}]", toleration, "map")
    _check_quantities("overhead", spec.get("overhead"))


def _round_up_milli(q: Any) -> Any:
    """A quantity rounded up (away from zero) to milli precision, as ``RoundUp(-3)``.

    Already milli-precise values are kept as written; the comparison with the stored
    Workload is by value.
    """
    value = quantity_value(q)
    if value is None:
        return q
    milli = value * 1000
    if milli == milli.to_integral_value():
        return q
    rounded = milli.to_integral_value(rounding=decimal.ROUND_UP)
    return f"{int(rounded)}m"


def _round_list(rl: Any) -> dict[str, Any] | None:
    if not isinstance(rl, Mapping) or not rl:
        return None
    return {k: _round_up_milli(v) for k, v in rl.items()}


# Docker reference grammar (github.com/distribution/reference), enough to find the tag.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE_RE: Final = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
_ANCHORED_IDENTIFIER_RE: Final = re.compile(r"[a-f0-9]{64}")
_DIGEST_LENGTHS: Final = {"sha256": 64, "sha384": 96, "sha512": 128}


def image_tag(image: str) -> str:
    """The tag of an image reference: ``latest`` without tag or digest, ``""`` when the
    reference does not parse (upstream's ``getImageTag``)."""
    if _ANCHORED_IDENTIFIER_RE.fullmatch(image):
        return ""  # a bare 64-hex identifier is not a repository name
    m = _REFERENCE_RE.fullmatch(image)
    if m is None or len(m.group("name")) > 255:
        return ""
    name = m.group("name")
    first, _, rest = name.partition("/")
    remote = rest if rest and ("." in first or ":" in first or first == "localhost"
                               or first.lower() != first) else name
    if remote.lower() != remote:
        return ""
    digest = m.group("digest")
    if digest:
        algorithm, _, hex_part = digest.partition(":")
        if _DIGEST_LENGTHS.get(algorithm) != len(hex_part) or hex_part.lower() != hex_part:
            return ""
    tag = m.group("tag") or ""
    if not tag and not digest:
        return "latest"
    return tag


def _copy_containers(containers: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for src in containers:
        dst: dict[str, Any] = {"name": src.get("name") or ""}
        for key in ("image", "command", "args"):
            if src.get(key):
                dst[key] = copy.deepcopy(src[key])
        resources = src.get("resources") or {}
        res: dict[str, Any] = {}
        for key in ("limits", "requests"):
            rounded = _round_list(resources.get(key))
            if rounded is not None:
                res[key] = rounded
        dst["resources"] = res
        dst["terminationMessagePath"] = src.get("terminationMessagePath") or "/dev/termination-log"
        dst["terminationMessagePolicy"] = src.get("terminationMessagePolicy") or "File"
        policy = src.get("imagePullPolicy") or ""
        if not policy:
            policy = "Always" if image_tag(str(src.get("image") or "")) == "latest" \
                else "IfNotPresent"
        dst["imagePullPolicy"] = policy
        if src.get("securityContext") is not None:
            dst["securityContext"] = copy.deepcopy(src["securityContext"])
        out.append(dst)
    return out


def _string_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def get_pod_template_spec(obj: Mapping[str, Any], path: str) -> Object:
    """The pod template Kueue sees for the PodSet at ``path`` (upstream's
    ``GetPodTemplateSpec``).

    ``obj`` is the component template (``template`` in the path). The content must be a
    map with a ``spec`` that decodes strictly as a ``v1.PodSpec``. The result keeps only
    what Kueue compares and uses, with the API server's defaults filled in (restart and
    DNS policy, scheduler, preemption policy, termination message, image pull policy),
    so it equals itself after a round trip through a stored Workload.

    Raises :class:`PathError` or :class:`TemplateError` with upstream's messages.
    """
    candidate = get_raw_template(obj, path)
    spec = candidate.get("spec")
    if not isinstance(spec, dict):
        raise TemplateError(f"content at {path} does not contain a spec")
    try:
        _check_pod_spec(spec)
    except TemplateError as err:
        raise TemplateError(f"content at {path}.spec not parseable as a v1.PodSpec: "
                            f"{err}") from None

    meta: dict[str, Any] = {}
    src_meta = candidate.get("metadata")
    if isinstance(src_meta, Mapping):
        for key in ("labels", "annotations"):
            strings = _string_map(src_meta.get(key))
            if strings:
                meta[key] = strings

    dst: dict[str, Any] = {}
    init = spec.get("initContainers") or []
    if init:
        dst["initContainers"] = _copy_containers(init)
    dst["containers"] = _copy_containers(spec.get("containers") or [])
    dst["restartPolicy"] = spec.get("restartPolicy") or "Always"
    # Upstream's quirk: the default only when absent, and a set value is not copied.
    if spec.get("terminationGracePeriodSeconds") is None:
        dst["terminationGracePeriodSeconds"] = 30
    dst["dnsPolicy"] = spec.get("dnsPolicy") or "ClusterFirst"
    if spec.get("nodeSelector"):
        dst["nodeSelector"] = copy.deepcopy(spec["nodeSelector"])
    if spec.get("nodeName"):
        dst["nodeName"] = spec["nodeName"]
    security = spec.get("securityContext")
    dst["securityContext"] = copy.deepcopy(security) if security is not None else {}
    if spec.get("affinity") is not None:
        dst["affinity"] = copy.deepcopy(spec["affinity"])
    dst["schedulerName"] = spec.get("schedulerName") or "default-scheduler"
    if spec.get("tolerations"):
        dst["tolerations"] = copy.deepcopy(spec["tolerations"])
    if spec.get("priorityClassName"):
        dst["priorityClassName"] = spec["priorityClassName"]
    # Not priority: Kueue computes it from priorityClassName.
    dst["preemptionPolicy"] = spec.get("preemptionPolicy") or "PreemptLowerPriority"
    overhead = _round_list(spec.get("overhead"))
    if overhead is not None:
        dst["overhead"] = overhead
    if spec.get("topologySpreadConstraints"):
        dst["topologySpreadConstraints"] = copy.deepcopy(spec["topologySpreadConstraints"])
    return {"metadata": meta, "spec": dst}


# --- Kueue's admission data ------------------------------------------------------------------


def set_pod_set_infos(aw: Object, infos: Sequence[Mapping[str, Any]]) -> None:
    """Store one AppWrapperPodSetInfo per effective PodSet, in order, in
    ``spec.components[c].podSetInfos`` (upstream's ``SetPodSetInfos``).

    A component's list is replaced only when its length differs. Raises
    :class:`PodSetCountError` ("expecting N podsets, got M") when ``infos`` has another
    length than the PodSets, after assigning what fits.
    """
    pod_sets = effective_pod_sets(aw)
    components = _components(aw)
    index = 0
    for c, component in enumerate(components):
        n = len(pod_sets[c])
        current = component.get("podSetInfos")
        if not isinstance(current, list) or len(current) != n:
            component["podSetInfos"] = [{} for _ in range(n)]
        for j in range(n):
            index += 1
            if index > len(infos):
                continue
            component["podSetInfos"][j] = copy.deepcopy(dict(infos[index - 1]))
    if index != len(infos):
        raise PodSetCountError(f"expecting {index} podsets, got {len(infos)}")


def clear_pod_set_infos(aw: Object) -> bool:
    """Drop every component's ``podSetInfos``; always True, as upstream (the caller
    always writes the object back)."""
    for component in _components(aw):
        if isinstance(component, dict):
            component.pop("podSetInfos", None)
    return True


# --- injection at creation time --------------------------------------------------------------


def _stringify(value: Any) -> str:
    # Upstream's toMap: non-string values printed with %v.
    return value if isinstance(value, str) else go_value(value)


def _to_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): _stringify(v) for k, v in value.items()}


def _merge_into(target: dict[str, Any], key: str, wanted: Mapping[str, str]) -> None:
    """Merge ``wanted`` into the string map ``target[key]``; a key already set to another
    value is an :class:`InjectionError` naming ``key``, as upstream's merge."""
    existing = _to_map(target.get(key))
    conflict = _conflict(existing, wanted)
    if conflict:
        raise InjectionError(f"conflict updating {key}: {conflict}")
    target[key] = _merge_keep_first(existing, wanted)


def _conflict(existing: Mapping[str, str] | None, wanted: Mapping[str, str]) -> str | None:
    for key, value in (existing or {}).items():
        if key in wanted and wanted[key] != value:
            return f"conflict for key={key}, value1={value}, value2={wanted[key]}"
    return None


def _merge_keep_first(a: Mapping[str, str] | None, b: Mapping[str, str]) -> dict[str, str]:
    out = dict(a or {})
    for key, value in b.items():
        out.setdefault(key, value)
    return out


def _string_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def inject_pod_set_infos(aw: Mapping[str, Any], component_index: int) -> Object:
    """The object to create for component ``component_index`` (upstream's
    ``createComponent`` up to the owner reference).

    A deep copy of the template, in the AppWrapper's namespace, with the label
    ``workload.codeflare.dev/appwrapper: <aw name>`` on the object (an existing value is
    kept) and, at each effective PodSet's template, the component's ``podSetInfos[j]``:

    - annotations merged (a different value for an existing key is a conflict);
    - labels: the info's, plus the AppWrapper label, merged (conflicts are errors);
    - nodeSelector merged (conflicts are errors);
    - tolerations appended (no de-duplication);
    - scheduling gates appended unless one of that name exists.

    Raises :class:`InjectionError` (conflicts, namespace mismatch, bad shapes) or
    :class:`PathError` (a PodSet path that does not lead to a map). No owner reference
    is set and the AppWrapper is not changed.
    """
    components = _components(aw)
    if not 0 <= component_index < len(components) or not isinstance(
            components[component_index], Mapping):
        raise InjectionError(f"component {component_index} does not exist")
    component = components[component_index]
    template = component.get("template")
    if not isinstance(template, Mapping):
        raise InjectionError("component template is not an object")
    obj: Object = copy.deepcopy(dict(template))
    aw_name = name_of(aw)
    aw_namespace = namespace_of(aw)

    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise InjectionError("component template metadata is not an object")
    namespace = meta.get("namespace") or ""
    if not namespace:
        meta["namespace"] = aw_namespace
    elif namespace != aw_namespace:
        raise InjectionError(f'component namespace "{namespace}" is different from '
                             f'appwrapper namespace "{aw_namespace}"')
    aw_labels = {APPWRAPPER_LABEL: aw_name}
    meta["labels"] = _merge_keep_first(_to_map(meta.get("labels")), aw_labels)

    statuses = _component_statuses(aw)
    pod_sets: Sequence[Mapping[str, Any]]
    if len(statuses) == len(components) and isinstance(statuses[component_index], Mapping):
        pod_sets = [p for p in statuses[component_index].get("podSets") or []
                    if isinstance(p, Mapping)]
    else:
        pod_sets = get_component_pod_sets(component)
    infos = component.get("podSetInfos")
    infos = infos if isinstance(infos, list) else []

    for j, pod_set in enumerate(pod_sets):
        info = infos[j] if j < len(infos) and isinstance(infos[j], Mapping) else {}
        path = str(pod_set.get("path") or "")
        target = get_raw_template(obj, path)
        if target.get("metadata") is None:
            target["metadata"] = {}
        pod_meta = target["metadata"]
        if not isinstance(pod_meta, dict):
            raise InjectionError(f"content at {path}.metadata is not an object")
        spec = target.get("spec")
        if not isinstance(spec, dict):
            raise InjectionError(f"content at {path} does not contain a spec")

        annotations = _string_dict(info.get("annotations"))
        if annotations:
            _merge_into(pod_meta, "annotations", annotations)
        # The AppWrapper label always goes on, so labels merge even without infos.
        _merge_into(pod_meta, "labels",
                    _merge_keep_first(_string_dict(info.get("labels")), aw_labels))
        node_selector = _string_dict(info.get("nodeSelector"))
        if node_selector:
            _merge_into(spec, "nodeSelector", node_selector)

        tolerations = [t for t in info.get("tolerations") or [] if isinstance(t, Mapping)]
        if tolerations:
            current = spec.get("tolerations")
            if current is None:
                current = []
            if not isinstance(current, list):
                raise InjectionError(f"content at {path}.spec.tolerations is not a list")
            spec["tolerations"] = [*current, *(copy.deepcopy(dict(t)) for t in tolerations)]

        gates = [g for g in info.get("schedulingGates") or [] if isinstance(g, Mapping)]
        if gates:
            current = spec.get("schedulingGates")
            if current is None:
                current = []
            if not isinstance(current, list):
                raise InjectionError(f"content at {path}.spec.schedulingGates is not a list")
            merged = list(current)
            for gate in gates:
                name = gate.get("name")
                if not any(isinstance(g, Mapping) and isinstance(g.get("name"), str)
                           and g.get("name") == name for g in merged):
                    merged.append({"name": name})
            spec["schedulingGates"] = merged
    return obj


# --- labels ----------------------------------------------------------------------------------

_LABEL_INVALID_RE: Final = re.compile(r"[^-_.\w]", re.ASCII)


def sanitize_label(label: str) -> str:
    """Upstream's ``SanitizeLabel``: at most 63 characters (truncated first), every
    character outside ``[-_.A-Za-z0-9]`` replaced by ``_``, then ``-_.`` trimmed."""
    raw = label.encode()
    if len(raw) > 63:
        # Go slices bytes; a cut inside a multi-byte character leaves invalid bytes,
        # which the regexp then replaces with one '_' each.
        kept = raw[:63].decode("utf-8", errors="ignore")
        label = kept + "\ufffd" * (63 - len(kept.encode()))
    return _LABEL_INVALID_RE.sub("_", label).strip("-_.")


def is_nested_appwrapper(template: Mapping[str, Any]) -> bool:
    """Whether a component template is itself an AppWrapper (forbidden)."""
    return template_gvk(template) == APPWRAPPER_GVK
