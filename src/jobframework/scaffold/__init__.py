"""A new integration package for your own Job-like kind, written from templates.

:func:`scaffold` (and ``python -m jobframework.scaffold``) writes an installable Python
project for a kind ``<Kind>`` of ``<group>/<version>``::

    <output>/
      pyproject.toml                  the distribution, its entry point, ruff and mypy
      README.md
      src/<package>/
        __init__.py                   the plugin contract (jobframework.plugins)
        api.py                        the kind, its pod sets, its spec model, load_crds()
        crds/<plural>.yaml            the CRD (spec.suspend, a template per pod set, status)
        job.py                        the GenericJob adapter
        controller.py                 the kind's own controller: one batch/v1 Job per pod set
        webhook.py                    the kind's validation rules
        setup.py                      CALLBACKS, register, setup, probe_object
        rbac.py                       RBAC
        py.typed
      tests/
        test_<kind>.py                lifecycle under the Kueue stand-in
        test_plugin.py                the plugin contract

The generated package works as written: its tests pass, ``ruff check`` and ``mypy
--strict`` are clean, and once installed ``python -m integrations run --integrations
<name>`` and ``python -m integrations.deploy render --integrations <name>`` load it. The
places to adapt are marked :data:`TODO_MARKER`. See ``docs/scaffold.md``.

The templates are package data (``templates/``, :class:`string.Template` syntax); parts
that repeat per pod set are rendered here.
"""

from __future__ import annotations

import importlib.metadata
import keyword
import re
import string
import sys
import textwrap
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Final

import attrs
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from ..constants import MAX_POD_SETS
from ..k8svalidation import is_dns1123_label, is_dns1123_subdomain

__all__ = [
    "LINE_LENGTH",
    "MAX_GROUP_LENGTH",
    "MAX_KIND_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_POD_SET_NAME_LENGTH",
    "TODO_MARKER",
    "PodSetOption",
    "ScaffoldError",
    "ScaffoldOptions",
    "parse_pod_sets",
    "plural_of",
    "render",
    "resolve",
    "scaffold",
    "write",
]

#: The comment that marks each place of the generated code to adapt to your kind.
TODO_MARKER: Final = "TODO(scaffold)"
#: The longest Kind: its plural, its label prefixes and the generated lines stay in bounds.
MAX_KIND_LENGTH: Final = 40
#: The longest pod set name: a child Job is named ``<object>-<pod set>``, a DNS label of
#: at most 63 characters, which leaves the object's name at least 32.
MAX_POD_SET_NAME_LENGTH: Final = 30
#: The longest group (a DNS subdomain; kept short enough for the generated code's lines).
MAX_GROUP_LENGTH: Final = 63
#: The longest short name, package name and distribution name.
MAX_NAME_LENGTH: Final = 40

_VERSION = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
# PEP 508 names.
_DISTRIBUTION = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
# Groups the API server protects (they need an api-approved.kubernetes.io annotation).
_PROTECTED_GROUPS = ("k8s.io", "kubernetes.io")
# Names the generated modules define or import: a class derived from the Kind must not
# take one of them.
_RESERVED_NAMES = frozenset({
    "BaseModel", "BaseWebhook", "ConfigDict", "ControllerBuilder", "ErrorList", "Field",
    "FinishedResult", "GenericJob", "GenericReconciler", "IntegrationCallbacks",
    "IntegrationManager", "LabelSelector", "Manager", "NoopWebhook", "ParentReconciler",
    "Path", "PodSet", "PodSetInfo", "PropagationPolicy", "QueueLookup", "ReconcilerOptions",
    "Request", "Result", "WebhookBuilder", "WebhookServer",
})


class ScaffoldError(ValueError):
    """An invalid scaffold option; :attr:`option` names it (the keyword of
    :func:`scaffold`: ``group``, ``pod_sets``, ...) and :attr:`detail` says why."""

    def __init__(self, option: str, detail: str) -> None:
        super().__init__(f"{option}: {detail}")
        #: The keyword of :func:`scaffold` (``--`` and dashes make the CLI's flag).
        self.option = option
        self.detail = detail

    @property
    def flag(self) -> str:
        """The command-line flag of :attr:`option` (``--pod-sets``)."""
        return "--" + self.option.replace("_", "-")


@attrs.frozen
class PodSetOption:
    """One pod set of the generated kind: its name and its pods when ``replicas`` is not
    given."""

    name: str
    replicas: int = 1


@attrs.frozen(kw_only=True)
class ScaffoldOptions:
    """Every option of :func:`scaffold`, checked and with its defaults filled in
    (:func:`resolve`)."""

    group: str
    version: str
    kind: str
    #: The integration's short name (entry point name): the Kind in lower case by default.
    name: str
    #: The Python package: ``<name>_integration`` by default (dashes as underscores).
    package: str
    #: The distribution: the package with dashes by default.
    distribution: str
    #: The resource name: the Kind in lower case, made plural.
    plural: str
    pod_sets: tuple[PodSetOption, ...]
    #: The pod set that may be admitted partially, or None.
    partial_admission: str | None = None

    @property
    def api_version(self) -> str:
        """``<group>/<version>``."""
        return f"{self.group}/{self.version}"

    @property
    def singular(self) -> str:
        """The Kind in lower case."""
        return self.kind.lower()

    @property
    def framework_name(self) -> str:
        """``Kind.version.group``, Kueue's ``externalFrameworks`` entry."""
        return f"{self.kind}.{self.version}.{self.group}"

    @property
    def job_class(self) -> str:
        """The GenericJob class: ``<Kind>Job`` (``<Kind>Adapter`` when the Kind ends in
        ``Job``)."""
        return self.kind + ("Adapter" if self.kind.endswith("Job") else "Job")

    def pod_set_field(self, name: str) -> str:
        """The ``spec`` field of pod set ``name`` (camelCase: ``worker-group`` is
        ``workerGroup``)."""
        return to_camel(_attribute(name))


def _attribute(pod_set: str) -> str:
    return pod_set.replace("-", "_")


def plural_of(kind: str) -> str:
    """The resource name of ``kind``: lower case, made plural by the English rules Kubernetes
    tools use (``SparkApp``: ``sparkapps``, ``Batch``: ``batches``, ``Policy``:
    ``policies``)."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def parse_pod_sets(text: str) -> tuple[PodSetOption, ...]:
    """``driver:1,executor:3`` (a name alone is one pod) as pod set options; raises
    :class:`ScaffoldError` naming ``pod_sets``."""
    out: list[PodSetOption] = []
    for item in text.split(","):
        name, sep, count = item.strip().partition(":")
        name = name.strip()
        if not name:
            raise ScaffoldError("pod_sets", f"{text!r}: expected NAME[:COUNT],... "
                                "(e.g. driver:1,executor:3)")
        if not sep:
            out.append(PodSetOption(name))
            continue
        try:
            replicas = int(count.strip())
        except ValueError:
            raise ScaffoldError("pod_sets", f"pod set {name!r}: count {count.strip()!r} is "
                                "not a whole number") from None
        out.append(PodSetOption(name, replicas))
    return tuple(out)


def _check(option: str, value: str, errors: list[str]) -> None:
    if errors:
        raise ScaffoldError(option, f"{value!r}: " + "; ".join(errors))


def _check_group(group: str) -> None:
    errors = is_dns1123_subdomain(group)
    if not errors and "." not in group:
        errors = ["must be a domain with at least one dot (e.g. analytics.example.com)"]
    if not errors and len(group) > MAX_GROUP_LENGTH:
        errors = [f"must be no more than {MAX_GROUP_LENGTH} characters"]
    if not errors and any(group == g or group.endswith("." + g) for g in _PROTECTED_GROUPS):
        errors = ["groups under k8s.io and kubernetes.io are reserved for Kubernetes' own APIs"]
    _check("group", group, errors)


def _check_kind(kind: str, plural: str) -> None:
    errors: list[str] = []
    if not _KIND.fullmatch(kind) or kind.isupper():
        errors.append("must be CamelCase: a capital letter, then letters and digits, not all "
                      "capitals (e.g. SparkApp)")
    elif len(kind) > MAX_KIND_LENGTH:
        errors.append(f"must be no more than {MAX_KIND_LENGTH} characters")
    _check("kind", kind, errors)
    _check("plural", plural, is_dns1123_label(plural))


def _check_pod_sets(pod_sets: tuple[PodSetOption, ...], partial: str | None) -> None:
    if not pod_sets:
        raise ScaffoldError("pod_sets", "at least one pod set is needed")
    if len(pod_sets) > MAX_POD_SETS:
        raise ScaffoldError("pod_sets", f"{len(pod_sets)} pod sets: a Kueue Workload holds at "
                            f"most {MAX_POD_SETS}")
    seen: dict[str, str] = {}
    for ps in pod_sets:
        errors = is_dns1123_label(ps.name)
        if not errors and len(ps.name) > MAX_POD_SET_NAME_LENGTH:
            errors = [f"must be no more than {MAX_POD_SET_NAME_LENGTH} characters (child Jobs "
                      "are named <object>-<pod set>, at most 63)"]
        attribute = _attribute(ps.name)
        if not errors and not ps.name[0].isalpha():
            errors = ["must start with a letter (it names a field of the spec)"]
        if not errors and (keyword.iskeyword(attribute) or attribute == "suspend"
                           or attribute.startswith("model_") or hasattr(BaseModel, attribute)):
            errors = ["is a reserved word of the generated spec model"]
        if not errors and to_camel(attribute) in seen:
            errors = [f"makes the same spec field as pod set {seen[to_camel(attribute)]!r}"]
        if not errors and ps.replicas < 1:
            errors = [f"count {ps.replicas} must be at least 1"]
        if errors:
            raise ScaffoldError("pod_sets", f"pod set {ps.name!r}: " + "; ".join(errors))
        seen[to_camel(attribute)] = ps.name
    if partial is None:
        return
    counts = {ps.name: ps.replicas for ps in pod_sets}
    if partial not in counts:
        raise ScaffoldError("partial_admission", f"{partial!r} is not a pod set; the pod sets "
                            f"are {', '.join(counts)}")
    if counts[partial] < 2:
        raise ScaffoldError("partial_admission", f"pod set {partial!r} has {counts[partial]} "
                            "pod; admitting it partially needs a count of at least 2 (set it "
                            f"with --pod-sets {partial}:N)")


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _check_names(options: ScaffoldOptions) -> None:
    name = options.name
    errors = is_dns1123_label(name)
    if not errors and len(name) > MAX_NAME_LENGTH:
        errors = [f"must be no more than {MAX_NAME_LENGTH} characters"]
    _check("name", name, errors)
    package = options.package
    errors = []
    if not _PACKAGE.fullmatch(package) or keyword.iskeyword(package):
        errors.append("must be a Python package name: lower-case letters, digits and "
                      "underscores, not starting with a digit")
    elif len(package) > MAX_NAME_LENGTH:
        errors.append(f"must be no more than {MAX_NAME_LENGTH} characters")
    elif package in ("jobframework", "integrations", "tests") \
            or package in sys.stdlib_module_names:
        errors.append("is taken (by the standard library, kueue-jobframework or the tests)")
    _check("package", package, errors)
    distribution = options.distribution
    errors = []
    if not _DISTRIBUTION.fullmatch(distribution):
        errors.append("must be a distribution name: letters, digits, '-', '_' and '.', "
                      "starting and ending with a letter or digit")
    elif len(distribution) > MAX_NAME_LENGTH:
        errors.append(f"must be no more than {MAX_NAME_LENGTH} characters")
    elif _normalized(distribution) == "kueue-jobframework":
        errors.append("is kueue-jobframework's own")
    _check("distribution", distribution, errors)
    taken = _installed_elsewhere(name, distribution)
    if taken is not None:
        raise ScaffoldError("name", f"{name!r} is already the name of an integration of the "
                            f"installed distribution {taken}; choose another")


def _installed_elsewhere(name: str, distribution: str) -> str | None:
    """The installed distribution other than ``distribution`` that declares an integration
    called ``name``, if any (read from the metadata, nothing imported)."""
    from ..plugins import ENTRY_POINT_GROUP

    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        dist = ep.dist.metadata["Name"] if ep.dist is not None else None
        if dist is None or _normalized(str(dist)) != _normalized(distribution):
            return str(dist or ep.value)
    return None


def resolve(
    *,
    group: str,
    version: str,
    kind: str,
    name: str | None = None,
    package: str | None = None,
    distribution: str | None = None,
    plural: str | None = None,
    pod_sets: Mapping[str, int] | str | None = None,
    partial_admission: str | None = None,
) -> ScaffoldOptions:
    """Check the options of :func:`scaffold` and fill in the defaults; raises
    :class:`ScaffoldError` naming the first bad option."""
    _check_group(group)
    _check("version", version, [] if _VERSION.fullmatch(version) else [
        "must be v<N>, v<N>alpha<M> or v<N>beta<M> (e.g. v1, v1alpha1)"])
    plural = plural if plural is not None else plural_of(kind)
    _check_kind(kind, plural)
    for derived in ("Job", "Adapter", "PodSet", "PodSetStatus", "Reconciler", "Setup",
                    "Spec", "Status", "Validator", "Webhook"):
        if kind + derived in _RESERVED_NAMES:
            raise ScaffoldError("kind", f"{kind!r}: the generated class {kind + derived} "
                                "would shadow a name the generated code uses")
    if pod_sets is None:
        parsed: tuple[PodSetOption, ...] = (PodSetOption("main"),)
    elif isinstance(pod_sets, str):
        parsed = parse_pod_sets(pod_sets)
    else:
        parsed = tuple(PodSetOption(n, c) for n, c in pod_sets.items())
    _check_pod_sets(parsed, partial_admission)
    name = name if name is not None else kind.lower()
    package = package if package is not None else f"{name.replace('-', '_')}_integration"
    options = ScaffoldOptions(
        group=group, version=version, kind=kind, name=name, package=package,
        distribution=distribution if distribution is not None else package.replace("_", "-"),
        plural=plural, pod_sets=parsed, partial_admission=partial_admission)
    _check_names(options)
    return options


# --- rendering --------------------------------------------------------------------------

#: Output path (with ``{package}``, ``{plural}``, ``{singular}``) -> template.
_FILES: Final[tuple[tuple[str, str], ...]] = (
    ("pyproject.toml", "project/pyproject.toml.tmpl"),
    ("README.md", "project/README.md.tmpl"),
    ("src/{package}/__init__.py", "package/__init__.py.tmpl"),
    ("src/{package}/api.py", "package/api.py.tmpl"),
    ("src/{package}/crds/{plural}.yaml", "package/crd.yaml.tmpl"),
    ("src/{package}/job.py", "package/job.py.tmpl"),
    ("src/{package}/controller.py", "package/controller.py.tmpl"),
    ("src/{package}/webhook.py", "package/webhook.py.tmpl"),
    ("src/{package}/setup.py", "package/setup.py.tmpl"),
    ("src/{package}/rbac.py", "package/rbac.py.tmpl"),
    ("tests/test_{singular}.py", "tests/test_job.py.tmpl"),
    ("tests/test_plugin.py", "tests/test_plugin.py.tmpl"),
)


def _template(path: str) -> string.Template:
    text = resources.files(__name__).joinpath("templates", path).read_text(encoding="utf-8")
    return string.Template(text)


def _jobframework_requirement() -> str:
    try:
        version = importlib.metadata.version("kueue-jobframework")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a tree
        return "kueue-jobframework"
    return f"kueue-jobframework>={version}"


def _crd_pod_set(options: ScaffoldOptions, ps: PodSetOption) -> str:
    pad = " " * 16
    lines = [
        f"{options.pod_set_field(ps.name)}:",
        "  description: >-",
        f"    Pod set {ps.name}: replicas pods from template.",
        "  type: object",
        "  required: [template]",
        "  properties:",
        "    replicas:",
        "      description: The pods to run at once (the Workload pod set's count).",
        "      type: integer",
        "      format: int32",
        "      minimum: 1",
        f"      default: {ps.replicas}",
    ]
    if ps.name == options.partial_admission:
        lines += [
            "    minReplicas:",
            "      description: >-",
            "        The fewest pods this pod set can start with: Kueue may admit it",
            "        partially, with a count from minReplicas to replicas.",
            "      type: integer",
            "      format: int32",
            "      minimum: 1",
        ]
    lines += [
        "    template:",
        "      description: The pods' PodTemplateSpec.",
        "      type: object",
        "      x-kubernetes-preserve-unknown-fields: true",
    ]
    return "\n".join(pad + line for line in lines)


def _summary(options: ScaffoldOptions) -> str:
    """The README's paragraph on what the kind is."""
    parts = []
    for ps in options.pod_sets:
        text = f"a pod set `{ps.name}` ({ps.replicas} pod{'s' if ps.replicas > 1 else ''}"
        if ps.name == options.partial_admission:
            text += ", which Kueue may admit partially, down to its `minReplicas`"
        parts.append(text + ")")
    pod_sets = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    kind = options.kind
    return textwrap.fill(
        f"A {kind} has {pod_sets}. Kueue admits it as one Workload with one pod set each; "
        f"once admitted, its controller runs each pod set as one batch/v1 Job on the admitted "
        f"flavor's nodes, and reports the {kind} `Finished` (`Succeeded` or `Failed`) when "
        "the Jobs end.", width=90, break_long_words=False, break_on_hyphens=False)


def _sample_spec(options: ScaffoldOptions) -> str:
    lines = []
    for ps in options.pod_sets:
        lines += [f"  {options.pod_set_field(ps.name)}:", f"    replicas: {ps.replicas}"]
        if ps.name == options.partial_admission:
            lines.append("    minReplicas: 1")
        lines += ["    template:", "      spec:", "        containers:",
                  "        - {name: main, image: busybox:1.36, command: [sleep, \"10\"],",
                  "           resources: {requests: {cpu: 100m}}}"]
    return "\n".join(lines)


def _partial_tests(options: ScaffoldOptions) -> str:
    partial = options.partial_admission
    if partial is None:
        return ""
    return _template("tests/partial_admission.py.tmpl").substitute(
        partial_pod_set=partial, partial_key=options.pod_set_field(partial),
        partial_field=_attribute(partial))


def _literal(brackets: str, items: list[str]) -> str:
    """A Python dict or list display of ``items``: on one line when short, else one item a
    line (the line it starts has a name and a type before it)."""
    one_line = brackets[0] + ", ".join(items) + brackets[1]
    if len(one_line) <= 48:
        return one_line
    return brackets[0] + "\n" + "".join(f"    {item},\n" for item in items) + brackets[1]


def _context(options: ScaffoldOptions) -> dict[str, str]:
    kind = options.kind
    pod_sets = options.pod_sets
    classes = sorted(kind + suffix for suffix in (
        options.job_class[len(kind):], "PodSet", "PodSetStatus", "Reconciler", "Setup",
        "Spec", "Status", "Validator", "Webhook"))
    expected = [(ps.name, ps.replicas, 1 if ps.name == options.partial_admission else None)
                for ps in pod_sets]
    return {
        "group": options.group,
        "version": options.version,
        "kind": kind,
        "singular": options.singular,
        "plural": options.plural,
        "name": options.name,
        "package": options.package,
        "distribution": options.distribution,
        "api_version": options.api_version,
        "framework_name": options.framework_name,
        "job_class": options.job_class,
        "path_group": options.group.replace(".", "-"),
        "jobframework_requirement": _jobframework_requirement(),
        "pod_set_fields": _literal("{}", [
            f'"{ps.name}": "{options.pod_set_field(ps.name)}"' for ps in pod_sets]),
        "default_replicas": _literal("{}", [f'"{ps.name}": {ps.replicas}' for ps in pod_sets]),
        "partial_pod_set": (f'"{options.partial_admission}"'
                            if options.partial_admission is not None else "None"),
        "spec_fields": "\n".join(
            f"    {_attribute(ps.name)}: {kind}PodSet" for ps in pod_sets),
        "crd_required": ", ".join(options.pod_set_field(ps.name) for ps in pod_sets),
        "crd_pod_sets": "\n".join(_crd_pod_set(options, ps) for ps in pod_sets),
        "all_classes": "\n".join(f'    "{c}",' for c in classes),
        "expected_pod_sets": _literal("[]", [
            f'("{n}", {c}, {m})' for n, c, m in expected]),
        "summary": _summary(options),
        "sample_spec": _sample_spec(options),
        "partial_tests": _partial_tests(options),
    }


#: The generated code's line length (its ruff configuration's).
LINE_LENGTH: Final = 100


def _reflow(text: str, width: int = LINE_LENGTH) -> str:
    """Python source with each comment or docstring line longer than ``width`` wrapped.

    Only prose grows with the names substituted into it; code lines are kept short in the
    templates themselves. Lines within bounds are left exactly as written.
    """
    out: list[str] = []
    in_docstring = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        prose = in_docstring or stripped.startswith(('"""', "#"))
        if line.count('"""') % 2:
            in_docstring = not in_docstring
        if len(line) <= width or not prose:
            out.append(line)
            continue
        indent = line[: len(line) - len(stripped)]
        prefix = ""
        if stripped.startswith("#"):
            prefix = stripped[: len(stripped) - len(stripped.lstrip("#:"))] + " "
            stripped = stripped[len(prefix):].lstrip()
        follow = indent + (prefix or ("  " if stripped.startswith("- ") else ""))
        out.extend(textwrap.wrap(stripped, width=width, initial_indent=indent + prefix,
                                 subsequent_indent=follow, break_long_words=False,
                                 break_on_hyphens=False))
    return "\n".join(out)


def render(options: ScaffoldOptions) -> dict[str, str]:
    """The generated project: path relative to the output folder -> text."""
    context = _context(options)
    out: dict[str, str] = {}
    for path, template in _FILES:
        target = path.format(package=options.package, plural=options.plural,
                             singular=options.singular)
        text = _template(template).substitute(context)
        out[target] = _reflow(text) if target.endswith(".py") else text
    out[f"src/{options.package}/py.typed"] = ""
    return out


def scaffold(
    *,
    group: str,
    version: str,
    kind: str,
    output: str | Path,
    name: str | None = None,
    package: str | None = None,
    distribution: str | None = None,
    plural: str | None = None,
    pod_sets: Mapping[str, int] | str | None = None,
    partial_admission: str | None = None,
    force: bool = False,
) -> list[Path]:
    """Write a new integration package for ``kind`` (``group``/``version``) into
    ``output``; returns the files written.

    Args:
        group: the API group, a DNS subdomain with a dot (``analytics.example.com``).
        version: the API version (``v1``, ``v1alpha1``, ``v2beta3``).
        kind: the Kind, CamelCase (``SparkApp``).
        output: the project folder (created; it may exist, but files of the project in it
            are overwritten only with ``force``).
        name: the integration's short name, its entry point's name (default: the Kind in
            lower case).
        package: the Python package (default: ``<name>_integration``).
        distribution: the distribution's name (default: the package with dashes).
        plural: the resource name (default: the Kind in lower case, made plural).
        pod_sets: pod set name -> pods, in the Workload's order, or their text form
            ``driver:1,executor:3`` (default: one pod set ``main`` of 1 pod).
        partial_admission: the pod set that may be admitted with fewer pods (down to its
            ``minReplicas``), or None.
        force: overwrite the project's files that exist.

    Raises:
        ScaffoldError: an option is invalid, or a file exists without ``force``.
    """
    options = resolve(group=group, version=version, kind=kind, name=name, package=package,
                      distribution=distribution, plural=plural, pod_sets=pod_sets,
                      partial_admission=partial_admission)
    return write(options, output, force=force)


def write(options: ScaffoldOptions, output: str | Path, *, force: bool = False) -> list[Path]:
    """Write the project :func:`render` makes of ``options`` into ``output``; returns the
    files written. Raises :class:`ScaffoldError` (``output``) when a file exists without
    ``force``."""
    root = Path(output)
    if root.exists() and not root.is_dir():
        raise ScaffoldError("output", f"{str(root)!r} exists and is not a folder")
    files = render(options)
    existing = sorted(p for p in files if (root / p).exists())
    if existing and not force:
        shown = ", ".join(existing[:3]) + (f" and {len(existing) - 3} more"
                                           if len(existing) > 3 else "")
        raise ScaffoldError("output", f"{str(root)!r} already holds {shown}; pass force=True "
                            "(--force) to overwrite")
    written: list[Path] = []
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
