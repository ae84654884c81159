"""Hostile-but-JSON objects of every kind our webhooks serve, for the bad-input tests.

Each kind starts from valid objects (:func:`seeds`: the integration's shipped samples, or a
minimal Job for ``batch/v1``) that a mutation strategy then breaks: fields deleted, values
of the wrong type, out-of-range numbers, over-long or invalid names and label values,
duplicated list items, unknown fields, empty lists, deep nesting, unicode.

What is generated follows what can reach a webhook through a real API server:

- custom resources are decoded as JSON, so any JSON may reach the *mutating* webhook (the
  CRD schema is checked after mutation, before the validating webhook);
- a built-in kind (``batch/v1`` Job) is decoded into its Go type first: a value of the
  wrong type or an int32 out of range is refused with a 400 before any webhook is called,
  so Job mutations keep each value's JSON type, stay in int32 range and touch only the
  fields listed in :data:`JOB_PATHS` (a free-form string elsewhere, e.g. a resource
  quantity, is also refused by the decoder);
- ``metadata`` is always decoded into ``ObjectMeta``: names, labels and annotations get
  hostile *strings*, never other types.

:data:`SEMANTIC_CASES` are hand-written objects that pass the CRD schema and the API
server's own validation but break a webhook rule, each with the field path the denial
must name: the interesting ones when the webhook is bypassed.

The unit test (``test_bad_input.py``) and the cluster test
(``test_bad_input_cluster.py``) import this module.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from integrations import appwrapper, batchjob, daemonjob, jobflow
from integrations.appwrapper.api import MAX_POD_SETS
from jobframework import constants as c
from jobframework.runtime.objects import GVK, Object

#: A JSON path: keys of objects and indexes of arrays, from the root.
JsonPath = tuple[str | int, ...]

#: Every kind our webhooks serve, by the short name the tests use.
KINDS: Final = ("jobflow", "jobtemplate", "daemonjob", "appwrapper", "batchjob")
GVKS: Final[Mapping[str, GVK]] = {
    "jobflow": jobflow.JOBFLOW_GVK,
    "jobtemplate": jobflow.JOBTEMPLATE_GVK,
    "daemonjob": daemonjob.DAEMONJOB_GVK,
    "appwrapper": appwrapper.APPWRAPPER_GVK,
    "batchjob": batchjob.JOB_GVK,
}
#: The LocalQueue the seeds name.
QUEUE: Final = "user-queue"

#: A field path in a message: ``metadata.name``, ``spec.flows[2].dependencies[1]``,
#: ``metadata.labels[kueue.x-k8s.io/queue-name]``; also inside a Go decoder's error
#: (``Go struct field JobSpec.spec.parallelism``). A bare top-level name counts only in
#: apimachinery's ``<path>: <detail>`` form (``spec: Invalid value: ...``).
FIELD_PATH: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?:metadata|spec|status)"
    r"(?:(?:\.[A-Za-z0-9_-]+|\[[^\]\s]*\])+|(?=: ))")


def field_paths(message: str) -> list[str]:
    """The field paths :data:`FIELD_PATH` finds in ``message``."""
    return [m.group(0) for m in FIELD_PATH.finditer(message)]


def format_path(path: JsonPath) -> str:
    """``("spec", "flows", 2, "name")`` → ``spec.flows[2].name``; keys that are no
    identifier in brackets (``metadata.labels[kueue.x-k8s.io/queue-name]``)."""
    out = ""
    for part in path:
        if isinstance(part, int) or not _IDENTIFIER.match(part):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


_IDENTIFIER: Final = re.compile(r"^[A-Za-z0-9_-]+$")


# --- seeds ----------------------------------------------------------------------------------


def _sample(documents: Mapping[str, list[Object]], file: str, kind: str) -> Object:
    obj = next(d for d in documents[file] if d.get("kind") == kind)
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("namespace", None)
    return obj


def _queued(obj: Object) -> Object:
    obj["metadata"].setdefault("labels", {})[c.QUEUE_LABEL] = QUEUE
    return obj


def _batch_job() -> Object:
    job = batchjob.probe_object("default")
    job["metadata"] = {"name": "job-sample", "labels": {c.QUEUE_LABEL: QUEUE}}
    job["spec"].update(parallelism=2, completions=4)
    job["spec"]["template"]["spec"]["containers"][0].update(
        image="busybox:1.36", command=["sh", "-c", "true"],
        resources={"requests": {"cpu": "100m"}})
    return job


def seeds(kind: str) -> list[Object]:
    """Valid objects of ``kind`` (no namespace; queued in :data:`QUEUE` where Kueue
    manages the kind) that our webhooks accept; new copies on every call."""
    return copy.deepcopy(list(_seeds(kind)))


@functools.cache
def _seeds(kind: str) -> tuple[Object, ...]:
    return tuple(_load_seeds(kind))


def _load_seeds(kind: str) -> list[Object]:
    if kind == "jobflow":
        docs = jobflow.load_samples()
        return [_queued(_sample(docs, f, "JobFlow")) for f in
                ("example.yaml", "example-with-jobTemplate.yaml", "example-shareVolume.yaml")]
    if kind == "jobtemplate":
        return [_sample(jobflow.load_samples(), "jobtemplate-example.yaml", "JobTemplate")]
    if kind == "daemonjob":
        docs = daemonjob.load_samples()
        return [_queued(_sample(docs, f, "DaemonJob"))
                for f in ("example.yaml", "flavor-example.yaml")]
    if kind == "appwrapper":
        docs = appwrapper.load_samples()
        return [_sample(docs, f, "AppWrapper") for f in ("pod.yaml", "batch-job.yaml")]
    if kind == "batchjob":
        return [_batch_job()]
    raise ValueError(f"unknown kind {kind!r}")


# --- hostile values -----------------------------------------------------------------------

#: Strings that break names, label values, enums and parsers.
HOSTILE_STRINGS: Final = (
    "", " ", "-", "-leading-dash", "trailing-dash-", "Upper-Case", "under_score",
    "with space", "dot..dot", "a/b/c", "../..", "x" * 64, "x" * 254, "y" * 2000,
    "ünïcødé", "名前", "😀", "\u202eevil", "tab\there", "new\nline", "nul\u0000byte",
    "0", "-1", "1e3", "9" * 30, "true", "null", "[]", "{}", '{"a":', "${HOME}",
    "kueue.x-k8s.io/multikueue", "api.practice.com/jobflow-controller",
)
#: Integers at and past the edges of Go's int32 and int64, and negatives.
EDGE_INTS: Final = (0, -1, -2**31, 2**31 - 1, 2**31, -2**63, 2**63 - 1, 10**15)


def hostile_strings() -> st.SearchStrategy[str]:
    """:data:`HOSTILE_STRINGS` or arbitrary unicode text (no lone surrogates: JSON
    text is UTF-8)."""
    return st.one_of(st.sampled_from(HOSTILE_STRINGS),
                     st.text(st.characters(codec="utf-8"), max_size=80))


def int32s() -> st.SearchStrategy[int]:
    """Integers a Go ``int32`` field accepts, negatives and the edges included."""
    return st.one_of(st.sampled_from((0, -1, -2**31, 2**31 - 1, 1, 10**6)),
                     st.integers(-2**31, 2**31 - 1))


def deep_nesting(max_depth: int = 120) -> st.SearchStrategy[Any]:
    """An object or array nested ``max_depth`` deep at most."""
    def nest(depth: int, as_list: bool) -> Any:
        value: Any = "bottom"
        for _ in range(depth):
            value = [value] if as_list else {"nested": value}
        return value
    return st.builds(nest, st.integers(2, max_depth), st.booleans())


def json_scalars() -> st.SearchStrategy[Any]:
    """Any JSON scalar, hostile strings and edge integers included."""
    return st.one_of(st.none(), st.booleans(), st.sampled_from(EDGE_INTS),
                     st.integers(-2**63, 2**63 - 1),
                     st.floats(allow_nan=False, allow_infinity=False), hostile_strings())


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value: scalars, small arrays and objects, deep nesting."""
    keys = st.one_of(st.sampled_from(("name", "spec", "template", "containers", "x")),
                     hostile_strings())
    return st.one_of(
        json_scalars(), deep_nesting(),
        st.recursive(json_scalars(), lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
            max_leaves=8))


def same_type_values(current: Any) -> st.SearchStrategy[Any]:
    """A hostile value of ``current``'s JSON type (what a typed decoder lets through)."""
    if isinstance(current, bool):
        return st.booleans()
    if isinstance(current, int):
        return int32s()
    if isinstance(current, str):
        return hostile_strings()
    if isinstance(current, list):
        return st.just([])
    if isinstance(current, dict):
        return st.just({})
    return st.none()


# --- mutations ------------------------------------------------------------------------------


@attrs.frozen
class Mutation:
    """One edit of an object: ``delete`` the value at ``path``, ``set`` it to ``value``
    (creating missing parent objects), or ``duplicate`` the array item at ``path`` (it is
    appended again)."""

    op: str
    path: JsonPath
    value: Any = None

    def __str__(self) -> str:
        where = format_path(self.path)
        if self.op == "set":
            shown = repr(self.value)
            return f"set {where} = {shown[:80]}{'...' if len(shown) > 80 else ''}"
        return f"{self.op} {where}"

    def apply(self, obj: Object) -> bool:
        """Edit ``obj`` in place; False (nothing changed) when the path does not fit it."""
        *parents, last = self.path
        node: Any = obj
        for i, part in enumerate(parents):
            if isinstance(node, dict) and isinstance(part, str):
                if part not in node and self.op == "set":
                    # A missing parent is created as an object, or an array for an index.
                    nxt = self.path[i + 1]
                    node[part] = [] if isinstance(nxt, int) else {}
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                return False
        if isinstance(node, dict) and isinstance(last, str):
            if self.op == "delete":
                return node.pop(last, _MISSING) is not _MISSING
            if self.op == "set":
                node[last] = copy.deepcopy(self.value)
                return True
            return False
        if isinstance(node, list) and isinstance(last, int):
            if self.op == "set" and last == len(node):
                node.append(copy.deepcopy(self.value))
                return True
            if last >= len(node):
                return False
            if self.op == "delete":
                del node[last]
            elif self.op == "set":
                node[last] = copy.deepcopy(self.value)
            else:
                node.append(copy.deepcopy(node[last]))
            return True
        return False


_MISSING: Final = object()


@attrs.frozen
class BadInput:
    """A broken object and how it was broken."""

    kind: str
    obj: Object
    mutations: tuple[Mutation, ...]
    #: The seed broken (an index into :func:`seeds`).
    seed: int = 0

    def describe(self) -> str:
        """The kind and the mutations, for failure messages."""
        return f"{self.kind}: " + "; ".join(str(m) for m in self.mutations)


def walk(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    """Every ``(path, value)`` under ``value``, ``value`` itself first."""
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from walk(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from walk(child, (*path, i))


def _lookup(obj: Any, path: JsonPath) -> Any:
    node = obj
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return _MISSING
    return node


#: Label keys and annotation keys the webhooks read (targets of metadata mutations).
LABEL_KEYS: Final = (c.QUEUE_LABEL, c.WORKLOAD_PRIORITY_CLASS_LABEL, c.PREBUILT_WORKLOAD_LABEL,
                     c.MAX_EXEC_TIME_SECONDS_LABEL, appwrapper.USER_LABEL,
                     appwrapper.USERID_LABEL)
ANNOTATION_KEYS: Final = (c.JOB_MIN_PARALLELISM_ANNOTATION,
                          c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
                          daemonjob.NODES_ANNOTATION, c.PREBUILT_WORKLOAD_ANNOTATION)

_TERMS: Final = ("spec", "template", "spec", "affinity", "nodeAffinity",
                 "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
_AFFINITY_PATHS: Final = (
    *(_TERMS[:i] for i in range(4, len(_TERMS) + 1)),
    (*_TERMS, 0), (*_TERMS, 0, "matchExpressions"), (*_TERMS, 0, "matchExpressions", 0),
    (*_TERMS, 0, "matchExpressions", 0, "values"), (*_TERMS, 0, "matchFields"))

#: Fields of a custom resource worth hitting even where a seed lacks them.
HOT_PATHS: Final[Mapping[str, tuple[JsonPath, ...]]] = {
    "jobflow": (("spec",), ("spec", "flows"), ("spec", "flows", 0), ("spec", "flows", 0, "name"),
                ("spec", "flows", 1, "dependencies"), ("spec", "flows", 1, "dependencies", 0),
                ("spec", "flows", 0, "jobTemplate"), ("spec", "flows", 0, "jobTemplateRef"),
                ("spec", "flows", 0, "jobTemplate", "parallelism"),
                ("spec", "flows", 0, "jobTemplate", "template", "spec"),
                ("spec", "flows", 0, "jobTemplate", "template", "spec", "containers"),
                ("spec", "flows", 0, "jobTemplate", "template", "spec", "containers", 0),
                ("spec", "flows", 0, "jobTemplate", "template", "metadata"),
                ("spec", "flows", 0, "shareVolumeMounts"), ("spec", "shareVolumes"),
                ("spec", "globalParams"), ("spec", "globalParams", "labels"),
                ("spec", "suspend"), ("spec", "managedBy")),
    "jobtemplate": (("spec",), ("spec", "jobTemplate"), ("spec", "jobTemplate", "parallelism"),
                    ("spec", "jobTemplate", "template"),
                    ("spec", "jobTemplate", "template", "spec", "containers")),
    "daemonjob": (("spec",), ("spec", "template"), ("spec", "template", "spec"),
                  ("spec", "template", "spec", "containers"),
                  ("spec", "template", "spec", "restartPolicy"),
                  ("spec", "template", "spec", "containers", 0),
                  ("spec", "template", "spec", "containers", 0, "resources"),
                  ("spec", "template", "spec", "nodeSelector"),
                  ("spec", "template", "spec", "tolerations"),
                  ("spec", "template", "spec", "tolerations", 0),
                  *_AFFINITY_PATHS, ("spec", "excludeNodeList"),
                  ("spec", "failurePolicy"), ("spec", "parallelism"), ("spec", "completions"),
                  ("spec", "globalParams", "nodeName"), ("spec", "selector"),
                  ("spec", "suspend"), ("spec", "managedBy")),
    "appwrapper": (("spec",), ("spec", "components"), ("spec", "components", 0),
                   ("spec", "components", 0, "template"),
                   ("spec", "components", 0, "template", "kind"),
                   ("spec", "components", 0, "template", "apiVersion"),
                   ("spec", "components", 0, "template", "spec"),
                   ("spec", "components", 0, "template", "spec", "containers"),
                   ("spec", "components", 0, "template", "spec", "containers", 0),
                   ("spec", "components", 0, "template", "spec", "template"),
                   ("spec", "components", 0, "template", "spec", "parallelism"),
                   ("spec", "components", 0, "template", "metadata"),
                   ("spec", "components", 0, "podSets"),
                   ("spec", "components", 0, "podSets", 0, "path"),
                   ("spec", "components", 0, "podSets", 0, "replicas"),
                   ("spec", "components", 0, "podSetInfos"),
                   ("spec", "suspend"), ("spec", "managedBy")),
}

#: The Job fields mutated (each keeps its JSON type; see the module docstring), with the
#: value a missing one is given a type from.
JOB_PATHS: Final[Mapping[JsonPath, Any]] = {
    ("spec", "parallelism"): 1, ("spec", "completions"): 1, ("spec", "backoffLimit"): 1,
    ("spec", "activeDeadlineSeconds"): 1, ("spec", "suspend"): True,
    ("spec", "completionMode"): "Indexed", ("spec", "managedBy"): "x",
    ("spec", "template", "metadata", "labels"): {},
    ("spec", "template", "spec", "containers"): [],
    ("spec", "template", "spec", "containers", 0, "name"): "c",
    ("spec", "template", "spec", "containers", 0, "image"): "i",
    ("spec", "template", "spec", "restartPolicy"): "Never",
    ("spec", "template", "spec", "priorityClassName"): "p",
    ("spec", "template", "spec", "schedulingGates"): [],
}
#: Job pod-template annotations Kueue reads (topology-aware scheduling).
JOB_TEMPLATE_ANNOTATIONS: Final = (c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
                                   c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
                                   c.PODSET_SLICE_SIZE_ANNOTATION,
                                   c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)


@st.composite
def metadata_mutations(draw: st.DrawFn, obj: Object, *, rename: bool) -> Mutation:
    """A hostile name (``rename``), label or annotation: always a string, as the
    ``ObjectMeta`` decoder demands.

    ``apiVersion``, ``kind``, the namespace and the server-set metadata (resourceVersion,
    uid, managedFields...) are never touched: changing them makes another request, refused
    for no field of this object (unknown kind, namespace not found, conflict).
    """
    labels = sorted((obj.get("metadata") or {}).get("labels") or {})
    annotations = sorted((obj.get("metadata") or {}).get("annotations") or {})
    choices = ["label", "annotation", "delete-label"]
    if rename:
        choices.append("name")
    what = draw(st.sampled_from(choices))
    if what == "name":
        return Mutation("set", ("metadata", "name"), draw(hostile_strings()))
    if what == "delete-label" and labels:
        return Mutation("delete", ("metadata", "labels", draw(st.sampled_from(labels))))
    if what == "annotation":
        key = draw(st.one_of(st.sampled_from((*ANNOTATION_KEYS, *annotations) or ("a",)),
                             hostile_strings()))
        return Mutation("set", ("metadata", "annotations", key), draw(hostile_strings()))
    key = draw(st.one_of(st.sampled_from((*LABEL_KEYS, *labels)), hostile_strings()))
    return Mutation("set", ("metadata", "labels", key), draw(hostile_strings()))


@st.composite
def json_mutations(draw: st.DrawFn, obj: Object, kind: str) -> Mutation:
    """A mutation of a custom resource's body: any JSON anywhere below ``spec``."""
    existing = [p for p, _ in walk(obj.get("spec"), ("spec",))]
    path = draw(st.one_of(st.sampled_from(existing), st.sampled_from(HOT_PATHS[kind])))
    op = draw(st.sampled_from(("delete", "set", "set", "set", "duplicate", "unknown")))
    current = _lookup(obj, path)
    if op == "duplicate":
        if isinstance(current, list) and current:
            return Mutation("duplicate", (*path, draw(st.integers(0, len(current) - 1))))
        op = "set"
    if op == "unknown":
        if isinstance(current, dict):
            key = draw(st.sampled_from(("bogusField", "Name", "spec", "ünknown", "")))
            return Mutation("set", (*path, key), draw(json_values()))
        op = "set"
    if op == "delete" and current is not _MISSING:
        return Mutation("delete", path)
    empty = [] if isinstance(current, list) else {}
    return Mutation("set", path, draw(st.one_of(st.just(empty), json_values())))


@st.composite
def job_mutations(draw: st.DrawFn, obj: Object) -> Mutation:
    """A mutation of a batch/v1 Job that its Go decoder lets through (see the module
    docstring)."""
    what = draw(st.sampled_from(("field", "field", "template-annotation", "duplicate")))
    if what == "template-annotation":
        key = draw(st.sampled_from(JOB_TEMPLATE_ANNOTATIONS))
        return Mutation("set", ("spec", "template", "metadata", "annotations", key),
                        draw(hostile_strings()))
    containers = ("spec", "template", "spec", "containers")
    if what == "duplicate" and _lookup(obj, containers):
        return Mutation("duplicate", (*containers, 0))
    path = draw(st.sampled_from(sorted(JOB_PATHS, key=format_path)))
    current = _lookup(obj, path)
    if current is not _MISSING and draw(st.booleans()):
        return Mutation("delete", path)
    typed = JOB_PATHS[path] if current is _MISSING else current
    return Mutation("set", path, draw(same_type_values(typed)))


@st.composite
def bad_inputs(draw: st.DrawFn, kind: str, *, rename: bool = True,
               max_mutations: int = 3) -> BadInput:
    """A seed of ``kind`` broken by 1 to ``max_mutations`` mutations.

    ``rename=False`` leaves ``metadata.name`` alone (an UPDATE must name the stored object).
    """
    index = draw(st.integers(0, len(seeds(kind)) - 1))
    obj = copy.deepcopy(seeds(kind)[index])
    applied: list[Mutation] = []
    for _ in range(draw(st.integers(1, max_mutations))):
        section = draw(st.sampled_from(("metadata", "body", "body", "body")))
        if section == "metadata":
            mutation = draw(metadata_mutations(obj, rename=rename))
        elif kind == "batchjob":
            mutation = draw(job_mutations(obj))
        else:
            mutation = draw(json_mutations(obj, kind))
        if mutation.apply(obj):
            applied.append(mutation)
    if not applied:  # every mutation missed: one that always applies
        mutation = Mutation("set", ("metadata", "labels", c.QUEUE_LABEL), "Not_A_Queue")
        mutation.apply(obj)
        applied.append(mutation)
    return BadInput(kind, obj, tuple(applied), index)


def draw_examples(kind: str, n: int, *, rename: bool = True) -> list[BadInput]:
    """``n`` :func:`bad_inputs` of ``kind``, the same on every run: hypothesis used as a
    generator where each example costs a real write (nothing is shrunk; a failure names
    the example by :meth:`BadInput.describe`)."""
    found: list[BadInput] = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(bad_inputs(kind, rename=rename))
    def collect(bad: BadInput) -> None:
        found.append(bad)

    collect()
    return found


# --- semantic cases -------------------------------------------------------------------------


@attrs.frozen
class SemanticCase:
    """A seed edited so that it passes the CRD schema and the API server's own checks but
    breaks a webhook rule; the denial names ``field``."""

    kind: str
    name: str
    edit: Callable[[Object], None]
    field: str
    #: The seed edited (an index into :func:`seeds`).
    seed: int = 0
    #: Only on CREATE (a rule the webhook checks on create alone).
    create_only: bool = False
    #: Text (compared case-insensitively) that a controller's condition or Warning event
    #: about the object should contain when the webhook is bypassed: the offending value or
    #: the field's name. Empty: the last name in :attr:`field`.
    hint: str = ""

    @property
    def expected_hint(self) -> str:
        """:attr:`hint`, or the last name in :attr:`field`."""
        if self.hint:
            return self.hint
        last = re.split(r"[.\[]", self.field)[-1]
        return last.rstrip("]")

    def build(self) -> Object:
        """The edited seed (a new object)."""
        obj = copy.deepcopy(seeds(self.kind)[self.seed])
        self.edit(obj)
        return obj

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def _set(path: JsonPath, value: Any) -> Callable[[Object], None]:
    def edit(obj: Object) -> None:
        assert Mutation("set", path, value).apply(obj), path
    return edit


def _delete(path: JsonPath) -> Callable[[Object], None]:
    def edit(obj: Object) -> None:
        assert Mutation("delete", path).apply(obj), path
    return edit


def _edits(*edits: Callable[[Object], None]) -> Callable[[Object], None]:
    def edit(obj: Object) -> None:
        for e in edits:
            e(obj)
    return edit


def _many_components(obj: Object) -> None:
    component = obj["spec"]["components"][0]
    obj["spec"]["components"] = [copy.deepcopy(component)
                                 for _ in range(MAX_POD_SETS + 1)]
    for i, comp in enumerate(obj["spec"]["components"]):
        comp["template"]["metadata"]["name"] = f"pod-{i}"


_FLOWS: Final = ("spec", "flows")
_DJ_POD: Final = ("spec", "template", "spec")
_AW_TEMPLATE: Final = ("spec", "components", 0, "template")
_QUEUE_PATH: Final = f"metadata.labels[{c.QUEUE_LABEL}]"


def _kueue_cases(kind: str) -> list[SemanticCase]:
    """Kueue's own rules, the same for every kind it manages. Kueue's base webhook checks
    them on create only (its update rules are about changes); its Job webhook runs the
    create rules on update too."""
    create_only = kind != "batchjob"
    max_exec = f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]"
    return [
        SemanticCase(kind, "queue-name-not-a-name",
                     _set(("metadata", "labels", c.QUEUE_LABEL), "Not_A_Queue"), _QUEUE_PATH,
                     create_only=create_only, hint="Not_A_Queue"),
        SemanticCase(kind, "max-exec-time-not-a-number",
                     _set(("metadata", "labels", c.MAX_EXEC_TIME_SECONDS_LABEL), "soon"),
                     max_exec, create_only=create_only, hint="soon"),
        SemanticCase(kind, "max-exec-time-zero",
                     _set(("metadata", "labels", c.MAX_EXEC_TIME_SECONDS_LABEL), "0"),
                     max_exec, create_only=create_only),
    ]


_FLOW_POD: Final = (*_FLOWS, 0, "jobTemplate", "template", "spec")

SEMANTIC_CASES: Final[Mapping[str, tuple[SemanticCase, ...]]] = {
    "jobflow": (
        SemanticCase("jobflow", "dependency-cycle",
                     _set((*_FLOWS, 0, "dependencies"), ["job5"]), "spec.flows[0].dependencies",
                     hint="cycle"),
        SemanticCase("jobflow", "unknown-dependency",
                     _set((*_FLOWS, 1, "dependencies"), ["nope"]),
                     "spec.flows[1].dependencies[0]", hint="nope"),
        SemanticCase("jobflow", "duplicate-flow-name", _set((*_FLOWS, 3, "name"), "job1"),
                     "spec.flows[3].name", hint="duplicate"),
        SemanticCase("jobflow", "flow-name-not-a-label", _set((*_FLOWS, 3, "name"), "Job_4"),
                     "spec.flows[3].name", hint="Job_4"),
        SemanticCase("jobflow", "child-job-name-too-long",
                     _set((*_FLOWS, 3, "name"), "s" * 60), "spec.flows[3].name", hint="s" * 60),
        SemanticCase("jobflow", "template-and-ref",
                     _set((*_FLOWS, 0, "jobTemplateRef"), "tpl"), "spec.flows[0].jobTemplateRef"),
        SemanticCase("jobflow", "no-template", _delete((*_FLOWS, 0, "jobTemplate")),
                     "spec.flows[0]", hint="jobTemplate"),
        SemanticCase("jobflow", "no-containers", _set((*_FLOW_POD, "containers"), []),
                     "spec.flows[0].jobTemplate.template.spec.containers"),
        SemanticCase("jobflow", "template-ref-not-a-name",
                     _set((*_FLOWS, 0, "jobTemplateRef"), "Not_A_Template"),
                     "spec.flows[0].jobTemplateRef", seed=1, hint="Not_A_Template"),
        SemanticCase("jobflow", "no-flows", _set(_FLOWS, []), "spec.flows"),
        SemanticCase("jobflow", "unknown-share-volume",
                     _set((*_FLOWS, 0, "shareVolumeMounts"), [{"name": "nope",
                                                               "mountPath": "/x"}]),
                     "spec.flows[0].shareVolumeMounts[0].name", hint="nope"),
        SemanticCase("jobflow", "reserved-global-label",
                     _set(("spec", "globalParams", "labels", jobflow.JOBFLOW_NAME_LABEL), "x"),
                     f"spec.globalParams.labels[{jobflow.JOBFLOW_NAME_LABEL}]",
                     hint=jobflow.JOBFLOW_NAME_LABEL),
        SemanticCase("jobflow", "managed-by-not-a-path",
                     _set(("spec", "managedBy"), "not-a-path"), "spec.managedBy",
                     hint="not-a-path"),
        # The pod template is kept as sent by the CRD: wrong JSON types inside it.
        SemanticCase("jobflow", "pod-spec-not-an-object", _set(_FLOW_POD, "pods"),
                     "spec.flows[0].jobTemplate.template.spec", hint="template.spec"),
        SemanticCase("jobflow", "env-not-objects",
                     _set((*_FLOW_POD, "containers", 0, "env"), [True]),
                     "spec.flows[0].jobTemplate.template.spec.containers[0].env[0]", hint="env"),
        SemanticCase("jobflow", "request-not-a-quantity",
                     _set((*_FLOW_POD, "containers", 0, "resources"),
                          {"requests": {"cpu": "lots"}}),
                     "spec.flows[0].jobTemplate.template.spec.containers[0].resources."
                     "requests[cpu]", hint="lots"),
        *_kueue_cases("jobflow"),
    ),
    "jobtemplate": (
        SemanticCase("jobtemplate", "no-containers",
                     _set(("spec", "jobTemplate", "template", "spec", "containers"), []),
                     "spec.jobTemplate.template.spec.containers"),
        SemanticCase("jobtemplate", "no-pod-template",
                     _delete(("spec", "jobTemplate", "template")),
                     "spec.jobTemplate.template.spec.containers"),
        SemanticCase("jobtemplate", "containers-not-an-array",
                     _set(("spec", "jobTemplate", "template", "spec", "containers"), "main"),
                     "spec.jobTemplate.template.spec.containers"),
    ),
    "daemonjob": (
        SemanticCase("daemonjob", "name-too-long-for-a-label",
                     _set(("metadata", "name"), "d" * 64), "metadata.name",
                     hint="metadata.name"),
        SemanticCase("daemonjob", "no-containers", _set((*_DJ_POD, "containers"), []),
                     "spec.template.spec.containers"),
        SemanticCase("daemonjob", "restart-policy-always",
                     _set((*_DJ_POD, "restartPolicy"), "Always"),
                     "spec.template.spec.restartPolicy", hint="Always"),
        SemanticCase("daemonjob", "exclude-list-empty-entry",
                     _set(("spec", "excludeNodeList"), "node1,,node2"), "spec.excludeNodeList"),
        SemanticCase("daemonjob", "exclude-list-not-a-node",
                     _set(("spec", "excludeNodeList"), "Node 1"), "spec.excludeNodeList",
                     hint="Node 1"),
        SemanticCase("daemonjob", "global-node-name",
                     _set(("spec", "globalParams", "nodeName"), "n1"),
                     "spec.globalParams.nodeName"),
        SemanticCase("daemonjob", "reserved-global-label",
                     _set(("spec", "globalParams", "labels", daemonjob.DAEMONJOB_NAME_LABEL),
                          "x"),
                     f"spec.globalParams.labels[{daemonjob.DAEMONJOB_NAME_LABEL}]",
                     hint=daemonjob.DAEMONJOB_NAME_LABEL),
        SemanticCase("daemonjob", "selector-set",
                     _set(("spec", "selector"), {"matchLabels": {"a": "b"}}), "spec.selector"),
        SemanticCase("daemonjob", "managed-by-not-a-path",
                     _set(("spec", "managedBy"), "not-a-path"), "spec.managedBy",
                     hint="not-a-path"),
        SemanticCase("daemonjob", "multikueue-without-nodes",
                     _set(("spec", "managedBy"), c.MULTIKUEUE_CONTROLLER_NAME),
                     f"metadata.annotations[{daemonjob.NODES_ANNOTATION}]",
                     hint=daemonjob.NODES_ANNOTATION),
        SemanticCase("daemonjob", "affinity-selects-nothing",
                     _set((*_DJ_POD, "affinity"), {"nodeAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{}]}}}),
                     "spec.template.spec.affinity.nodeAffinity."
                     "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
                     hint="affinity"),
        SemanticCase("daemonjob", "no-eligible-node",
                     _edits(_delete(("spec", "excludeNodeList")),
                            _set((*_DJ_POD, "nodeSelector"), {"no-such-label": "x"})),
                     "spec", create_only=True, hint="nodeSelector"),
        # The pod template is kept as sent by the CRD: wrong JSON types inside it.
        SemanticCase("daemonjob", "containers-not-an-array",
                     _set((*_DJ_POD, "containers"), 576), "spec.template.spec.containers"),
        SemanticCase("daemonjob", "tolerations-not-objects",
                     _set((*_DJ_POD, "tolerations"), ["NoSchedule"]),
                     "spec.template.spec.tolerations[0]", hint="tolerations"),
        SemanticCase("daemonjob", "node-selector-values-not-strings",
                     _set((*_DJ_POD, "nodeSelector"), {"zone": 1}),
                     "spec.template.spec.nodeSelector[zone]", hint="nodeSelector"),
        SemanticCase("daemonjob", "affinity-terms-not-an-array",
                     _set((*_DJ_POD, "affinity"), {"nodeAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": 3}}}),
                     "spec.template.spec.affinity.nodeAffinity."
                     "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                     hint="affinity"),
        *_kueue_cases("daemonjob"),
    ),
    "appwrapper": (
        SemanticCase("appwrapper", "nested-appwrapper",
                     _edits(_set((*_AW_TEMPLATE, "apiVersion"), appwrapper.API_VERSION),
                            _set((*_AW_TEMPLATE, "kind"), "AppWrapper")),
                     "spec.components[0].template", create_only=True, hint="AppWrapper"),
        SemanticCase("appwrapper", "template-in-other-namespace",
                     _set((*_AW_TEMPLATE, "metadata", "namespace"), "elsewhere"),
                     "spec.components[0].template.metadata.namespace", create_only=True,
                     hint="metadata.namespace"),
        SemanticCase("appwrapper", "pod-set-path-not-a-template",
                     _set(("spec", "components", 0, "podSets", 0, "path"), "template.spec.nope"),
                     "spec.components[0].podSets[0].path", create_only=True,
                     hint="template.spec.nope"),
        SemanticCase("appwrapper", "pod-set-path-empty",
                     _set(("spec", "components", 0, "podSets", 0, "path"), ""),
                     "spec.components[0].podSets[0].path", create_only=True),
        SemanticCase("appwrapper", "too-many-pod-sets", _many_components, "spec.components",
                     create_only=True, hint=str(MAX_POD_SETS)),
        SemanticCase("appwrapper", "no-components", _set(("spec", "components"), []),
                     "spec.components", create_only=True),
        # A kind the cluster does not serve is accepted, as upstream (GitOps applies the
        # CRD later); a known kind in a version whose pod sets are not inferred is not.
        SemanticCase("appwrapper", "known-kind-unknown-version",
                     _edits(_set((*_AW_TEMPLATE, "apiVersion"), "ray.io/v1alpha1"),
                            _set((*_AW_TEMPLATE, "kind"), "RayCluster")),
                     "spec.components[0].template.apiVersion", create_only=True,
                     hint="v1alpha1"),
        *_kueue_cases("appwrapper"),
    ),
    "batchjob": (
        SemanticCase("batchjob", "min-parallelism-not-a-number",
                     _set(("metadata", "annotations", c.JOB_MIN_PARALLELISM_ANNOTATION), "two"),
                     f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]", hint="two"),
        SemanticCase("batchjob", "min-parallelism-too-big",
                     _set(("metadata", "annotations", c.JOB_MIN_PARALLELISM_ANNOTATION), "9"),
                     f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]"),
        SemanticCase("batchjob", "completions-equal-parallelism-not-a-bool",
                     _set(("metadata", "annotations",
                           c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION), "maybe"),
                     f"metadata.annotations[{c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}]",
                     hint="maybe"),
        *_kueue_cases("batchjob"),
    ),
}


def semantic_cases(kinds: Sequence[str] = KINDS) -> list[SemanticCase]:
    """Every :data:`SEMANTIC_CASES` entry of ``kinds``, in a stable order."""
    return [case for kind in kinds for case in SEMANTIC_CASES[kind]]
