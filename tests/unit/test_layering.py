"""The import structure of ``src/``: layers depend downward only, and no module imports itself
back through a circle.

Layers, lowest first: ``jobframework.runtime`` (inside it: the shared core types, then
``client``, ``cache``, ``workqueue``, then reconcile/source/handler/predicate, controller,
builder, manager and the rest), ``jobframework.webhook``, the rest of ``jobframework``, then
``integrations``. The graph is read from the source with :mod:`ast` (nothing is imported),
so an import counts whether it runs at module level, only under ``if TYPE_CHECKING:``, or
inside a function: a circle closed by a deferred import is still a circle.

To see the graph by hand: ``python tests/unit/test_layering.py`` prints every import edge.
"""

from __future__ import annotations

import ast
import enum
import pathlib
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

import attrs
import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"

#: Circles through these modules are not failures: a temporary exemption while a circle is
#: refactored away (a package name covers its submodules). Empty: no circle anywhere in
#: ``src/`` is allowed.
CIRCLE_EXEMPT: tuple[str, ...] = ()

#: Layer rank of each top-level area; a module may import only from its rank or below.
LAYERS: tuple[str, ...] = ("runtime", "webhook", "jobframework", "integrations")

#: Rank inside ``jobframework.runtime`` by the first component after ``runtime``;
#: anything not listed (reconcile, source, controller, manager, ...) is on top.
RUNTIME_LAYERS: Mapping[str, int] = {
    "objects": 0, "errors": 0, "clock": 0, "selectors": 0, "gofmt": 0, "wirejson": 0,
    "client": 1,
    "cache": 2,
    "workqueue": 3,
}
RUNTIME_TOP = 4


class Kind(enum.StrEnum):
    """Where an import statement sits."""

    MODULE = "module-level"
    TYPE_CHECKING = "TYPE_CHECKING"
    LOCAL = "function-local"


@attrs.frozen
class Edge:
    """``src`` imports (something from) ``dst``."""

    src: str
    dst: str
    kind: Kind
    path: str  # relative to the parent of the root read, e.g. ``src/jobframework/podset.py``
    line: int

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}  ({self.path}:{self.line}, {self.kind})"


def modules(root: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """Every module under ``root``: dotted name -> (file, is a package ``__init__``)."""
    out: dict[str, tuple[pathlib.Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if any(not p.isidentifier() for p in parts):
            continue  # e.g. *.egg-info
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        if parts:
            out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(
    body: Iterable[ast.AST], kind: Kind
) -> Iterator[tuple[ast.Import | ast.ImportFrom, Kind]]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, kind
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _import_nodes(ast.iter_child_nodes(node), Kind.LOCAL)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            inner = Kind.TYPE_CHECKING if kind is Kind.MODULE else kind
            yield from _import_nodes(node.body, inner)
            yield from _import_nodes(node.orelse, kind)
        else:
            yield from _import_nodes(ast.iter_child_nodes(node), kind)


def import_graph(root: pathlib.Path) -> list[Edge]:
    """Every import between modules under ``root`` (imports of outside modules are left out).

    ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
    ``pkg``; ``import a.b.c`` is an edge to the longest of ``a.b.c``, ``a.b``, ``a`` that
    exists. Relative imports are resolved against the importing module.
    """
    mods = modules(root)

    def known(name: str) -> str | None:
        parts = name.split(".")
        while parts:
            if ".".join(parts) in mods:
                return ".".join(parts)
            parts.pop()
        return None

    edges: list[Edge] = []
    for mod, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, kind in _import_nodes(tree.body, Kind.MODULE):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    full = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    full = node.module or ""
                for alias in node.names:
                    sub = f"{full}.{alias.name}"
                    targets.append(sub if sub in mods else known(full))
            for dst in dict.fromkeys(targets):
                if dst is not None and dst != mod:
                    edges.append(Edge(mod, dst, kind, path.relative_to(root.parent).as_posix(),
                                      node.lineno))
    return edges


def circles(edges: Iterable[Edge], skip: Iterable[str] = ()) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), ``skip`` left out."""
    skipped = tuple(skip)

    def kept(m: str) -> bool:
        return not any(m == s or m.startswith(s + ".") for s in skipped)

    adj: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        if kept(e.src) and kept(e.dst):
            adj[e.src].add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(adj[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(adj):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def layer(mod: str) -> int | None:
    """Rank of ``mod`` in :data:`LAYERS`; None outside ``jobframework`` and ``integrations``."""
    parts = mod.split(".")
    if parts[0] == "integrations":
        return LAYERS.index("integrations")
    if parts[0] != "jobframework":
        return None
    if len(parts) > 1 and parts[1] in ("runtime", "webhook"):
        return LAYERS.index(parts[1])
    return LAYERS.index("jobframework")


def runtime_layer(mod: str) -> int | None:
    """Rank inside ``jobframework.runtime`` (:data:`RUNTIME_LAYERS`); None outside it."""
    parts = mod.split(".")
    if parts[:2] != ["jobframework", "runtime"]:
        return None
    return RUNTIME_LAYERS.get(parts[2], RUNTIME_TOP) if len(parts) > 2 else RUNTIME_TOP


def upward(edges: Iterable[Edge]) -> list[Edge]:
    """Edges from a lower layer into a higher one (also between runtime's own layers)."""
    out = []
    for e in edges:
        src, dst = layer(e.src), layer(e.dst)
        if src is not None and dst is not None and src < dst:
            out.append(e)
            continue
        rsrc, rdst = runtime_layer(e.src), runtime_layer(e.dst)
        if rsrc is not None and rdst is not None and rsrc < rdst:
            out.append(e)
    return out


def _describe(comp: list[str], edges: Iterable[Edge]) -> str:
    members = set(comp)
    lines = [f"circle of {len(comp)}: {', '.join(comp)}"]
    lines += [f"    {e}" for e in edges if e.src in members and e.dst in members]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return import_graph(SRC)


# --- the reader itself ------------------------------------------------------------------------


def _write(root: pathlib.Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_reader_sees_every_kind_of_import(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import A\n",
        "pkg/a.py": """\
            from __future__ import annotations
            import typing
            from typing import TYPE_CHECKING
            from . import b
            if TYPE_CHECKING:
                from .c import C
            if typing.TYPE_CHECKING:
                import pkg.sub.d
            else:
                import os
            class A:
                def f(self) -> None:
                    from .sub import e
            """,
        "pkg/b.py": "",
        "pkg/c.py": "from pkg.a import A\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from ..b import *\n",
        "pkg/sub/e.py": "",
    })
    got = {(e.src, e.dst, e.kind) for e in import_graph(tmp_path)}
    assert got == {
        ("pkg", "pkg.a", Kind.MODULE),
        ("pkg.a", "pkg.b", Kind.MODULE),
        ("pkg.a", "pkg.c", Kind.TYPE_CHECKING),
        ("pkg.a", "pkg.sub.d", Kind.TYPE_CHECKING),
        ("pkg.a", "pkg.sub.e", Kind.LOCAL),
        ("pkg.c", "pkg.a", Kind.MODULE),
        ("pkg.sub.d", "pkg.b", Kind.MODULE),
    }
    assert circles(import_graph(tmp_path)) == [["pkg.a", "pkg.c"]]
    assert circles(import_graph(tmp_path), skip=["pkg.c"]) == []


def test_layer_ranks() -> None:
    assert layer("jobframework.runtime.cache._store") == 0
    assert layer("jobframework.webhook.server") == 1
    assert layer("jobframework") == layer("jobframework.api.workload") == 2
    assert layer("integrations.batchjob.job") == 3
    assert runtime_layer("jobframework.runtime.client.rest") == 1
    assert runtime_layer("jobframework.runtime.controller") == RUNTIME_TOP
    assert runtime_layer("jobframework.webhook") is None


# --- the project ------------------------------------------------------------------------------


def test_the_source_tree_is_read(graph: list[Edge]) -> None:
    # A reader that found nothing would let every check below pass.
    assert len(modules(SRC)) > 100
    assert {e.kind for e in graph} == set(Kind)
    for exempt in CIRCLE_EXEMPT:
        assert exempt in modules(SRC), f"{exempt} is gone: drop it from CIRCLE_EXEMPT"


def test_no_import_circles(graph: list[Edge]) -> None:
    found = circles(graph, skip=CIRCLE_EXEMPT)
    assert not found, "import circles:\n" + "\n".join(_describe(c, graph) for c in found)


def test_layers_depend_downward_only(graph: list[Edge]) -> None:
    bad = upward(graph)
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(
        f"    {e}" for e in bad)


if __name__ == "__main__":
    for edge in import_graph(SRC):
        print(edge)
