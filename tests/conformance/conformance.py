#!/usr/bin/env python3
"""Conformance table: which of the pinned Kueue's Go unit test cases our Python tests port.

Usage::

    python tests/conformance/conformance.py [--kueue-dir DIR] [--unaccounted] [--ported]
    python tests/conformance/conformance.py --write      # rewrites docs/conformance.md

``DIR`` defaults to the Kueue module pinned in ``tests/cluster/kueue/go.mod``, which
``go mod download`` fetches into Go's module cache if it is not there yet. The exit status
is 1 when a marker or id names no Go case, or ``not_ported.toml`` is stale or contradicts a
port; 2 when the generator cannot run.

Go side
    Every ``func TestXxx(t *testing.T)`` of the ``*_test.go`` files in
    ``pkg/controller/jobframework`` and ``pkg/controller/jobs/job``. A table-driven test
    contributes one case per entry of each table it runs sub-tests over: the string keys of a
    ``map[string]…{…}`` literal, or the ``name:`` fields of a ``[]…{…}`` literal, that a
    ``for … range`` loop containing ``t.Run(`` iterates; a ``t.Run("literal", …)`` adds the
    literal as a case. A test with none of these is one case (its name alone).

Python side (the convention)
    A test ports Go case ``T/C`` (or table-less test ``T``) when pytest collects it under
    ``tests/unit`` with the project's default options and either a ``kueue_case`` marker on
    it (or on its ``pytest.param``) names ``"T/C"``, or its parametrize id is ``T/C``. Names
    are compared with blank runs as one blank and an en dash as a hyphen. Comments,
    docstrings and strings count for nothing; a test pytest would skip or xfail credits
    nothing. Collection runs in a subprocess with the plugin ``conformance_collect.py``.

Not ported
    ``tests/conformance/not_ported.toml`` lists the cases deliberately not ported, each
    with its reason (``[[case]]`` tables with ``test``, ``name`` or ``names`` -- both omitted
    for the whole test -- and ``reason``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GO_PACKAGES = ("pkg/controller/jobframework", "pkg/controller/jobs/job")
DEFAULT_TEST_ROOTS = ("tests/unit",)
NOT_PORTED_FILE = Path(__file__).resolve().parent / "not_ported.toml"
GO_MOD = REPO / "tests" / "cluster" / "kueue" / "go.mod"
KUEUE_MODULE = "sigs.k8s.io/kueue"

# ---------------------------------------------------------------------------------------------
# Go side
# ---------------------------------------------------------------------------------------------

_GO_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<line_comment>//[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<raw>`[^`]*`)
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<rune>'(?:[^'\\\n]|\\.)+')
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>[0-9][0-9A-Za-z_.]*)
    | (?P<punct>:=|\.\.\.|&&|\|\||<-|[-+*/%&|^<>=!]=?|[{}()\[\],;:.~])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # "string", "ident", "number", "rune", "punct"
    text: str  # the decoded value for strings, the source text otherwise
    line: int


def _decode_go_string(lit: str) -> str:
    if lit.startswith("`"):
        return lit[1:-1]
    # Go's interpreted string escapes are a superset-compatible subset of Python's for the
    # texts test names use (\", \\, \n, \t, \xNN, \uNNNN).
    body = lit[1:-1]
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:  # pragma: no cover - defensive
        return body


def tokenize_go(src: str) -> list[Tok]:
    """Split Go source into tokens (comments and blanks dropped, strings decoded)."""
    toks: list[Tok] = []
    pos, line = 0, 1
    while pos < len(src):
        m = _GO_TOKEN.match(src, pos)
        if m is None:  # a character we do not model: skip it
            pos += 1
            continue
        kind = m.lastgroup or ""
        text = m.group()
        if kind in ("string", "raw"):
            toks.append(Tok("string", _decode_go_string(text), line))
        elif kind not in ("ws", "line_comment", "block_comment"):
            toks.append(Tok(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return toks


@dataclass(frozen=True)
class GoCase:
    file: str  # relative to the module root, e.g. pkg/controller/jobframework/utils_test.go
    test: str
    name: str | None  # None: the test has no table (one case)
    line: int

    @property
    def id(self) -> str:
        return self.test if self.name is None else f"{self.test}/{self.name}"


def _match(toks: Sequence[Tok], i: int) -> int:
    """Index of the bracket closing the one at ``toks[i]``."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    opener = toks[i].text
    closer = pairs[opener]
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind != "punct":
            continue
        if t.text == opener:
            depth += 1
        elif t.text == closer:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {opener!r} at line {toks[i].line}")


def _is(tok: Tok, text: str) -> bool:
    return tok.kind in ("punct", "ident") and tok.text == text


def _skip_type(toks: Sequence[Tok], i: int) -> int:
    """Index just past the element type starting at ``toks[i]`` (struct{…}, *T, pkg.T, …)."""
    while i < len(toks) and _is(toks[i], "*"):
        i += 1
    if i < len(toks) and _is(toks[i], "struct") and _is(toks[i + 1], "{"):
        return _match(toks, i + 1) + 1
    if i < len(toks) and toks[i].kind == "ident":
        i += 1
        while i + 1 < len(toks) and _is(toks[i], ".") and toks[i + 1].kind == "ident":
            i += 2
        if i < len(toks) and _is(toks[i], "["):  # generic instantiation
            i = _match(toks, i) + 1
    return i


def _string_expr(toks: Sequence[Tok], i: int) -> tuple[str, int] | None:
    """``"a" + "b" …`` starting at ``toks[i]``: its value and the index after it."""
    if toks[i].kind != "string":
        return None
    value = toks[i].text
    i += 1
    while i + 1 < len(toks) and _is(toks[i], "+") and toks[i + 1].kind == "string":
        value += toks[i + 1].text
        i += 2
    return value, i


def _elements(toks: Sequence[Tok], open_i: int, close_i: int) -> Iterator[int]:
    """Start indexes of the top-level elements of the composite literal ``{…}``."""
    i = open_i + 1
    while i < close_i:
        yield i
        while i < close_i and not _is(toks[i], ","):
            i = _match(toks, i) + 1 if toks[i].kind == "punct" and toks[i].text in "{([" \
                else i + 1
        i += 1


def _map_keys(toks: Sequence[Tok], open_i: int, close_i: int) -> list[tuple[str, int]]:
    keys: list[tuple[str, int]] = []
    for e in _elements(toks, open_i, close_i):
        got = _string_expr(toks, e)
        if got is None:
            return []
        value, after = got
        if not (_is(toks[after], ":") and _is(toks[after + 1], "{")):
            return []
        keys.append((value, toks[e].line))
    return keys


_NAME_FIELDS = ("name", "testName", "desc", "description")


def _slice_names(toks: Sequence[Tok], open_i: int, close_i: int) -> list[tuple[str, int]]:
    names: list[tuple[str, int]] = []
    for e in _elements(toks, open_i, close_i):
        j = e
        while j < close_i and not _is(toks[j], "{"):  # &T{ / T{ / {
            j += 1
        if j >= close_i:
            return []
        end = _match(toks, j)
        for f in _elements(toks, j, end):
            if toks[f].kind == "ident" and toks[f].text in _NAME_FIELDS \
                    and _is(toks[f + 1], ":"):
                got = _string_expr(toks, f + 2)
                if got is not None:
                    names.append((got[0], toks[f].line))
                break
    return names


def _loops_with_subtests(toks: Sequence[Tok], start: int, end: int) -> tuple[set[str], list[int]]:
    """Variables ranged over by a ``for`` whose body calls ``t.Run(``, and the token indexes
    of ``range`` clauses whose operand is a literal (``range map[string]…{…}``)."""
    ranged: set[str] = set()
    literal_ranges: list[int] = []
    i = start
    while i < end:
        if _is(toks[i], "for"):
            j = i + 1
            while j < end and not _is(toks[j], "range") and not _is(toks[j], "{"):
                j += 1
            if j < end and _is(toks[j], "range"):
                operand = j + 1
                k = _skip_type_or_literal(toks, operand)
                if k < end and _is(toks[k], "{"):
                    body_end = _match(toks, k)
                    if _calls_t_run(toks, k, body_end):
                        if toks[operand].kind == "ident" and k == operand + 1:
                            ranged.add(toks[operand].text)
                        elif k > operand + 1:
                            literal_ranges.append(operand)
        i += 1
    return ranged, literal_ranges


def _skip_type_or_literal(toks: Sequence[Tok], i: int) -> int:
    """Index after a range operand: an identifier (possibly ``a.b``) or a composite literal."""
    if _is(toks[i], "map") or _is(toks[i], "["):
        j = _literal_open(toks, i)
        if j is not None:
            return _match(toks, j) + 1
    j = i
    if toks[j].kind == "ident":
        j += 1
        while j + 1 < len(toks) and _is(toks[j], ".") and toks[j + 1].kind == "ident":
            j += 2
    return j


def _literal_open(toks: Sequence[Tok], i: int) -> int | None:
    """For ``map[K]V{`` or ``[]V{`` starting at ``toks[i]``: the index of the literal's ``{``."""
    if _is(toks[i], "map") and _is(toks[i + 1], "["):
        j = _skip_type(toks, _match(toks, i + 1) + 1)
    elif _is(toks[i], "[") and _is(toks[i + 1], "]"):
        j = _skip_type(toks, i + 2)
    else:
        return None
    return j if j < len(toks) and _is(toks[j], "{") else None


def _calls_t_run(toks: Sequence[Tok], start: int, end: int) -> bool:
    return any(_is(toks[k], "t") and _is(toks[k + 1], ".") and _is(toks[k + 2], "Run")
               for k in range(start, end - 2))


def parse_go_tests(src: str, file: str) -> list[GoCase]:
    """The test cases of one Go test file (see the module docstring for the rules)."""
    toks = tokenize_go(src)
    cases: list[GoCase] = []
    i = 0
    while i < len(toks) - 2:
        if not (_is(toks[i], "func") and toks[i + 1].kind == "ident"
                and toks[i + 1].text.startswith("Test") and _is(toks[i + 2], "(")):
            i += 1
            continue
        test, line = toks[i + 1].text, toks[i + 1].line
        params_end = _match(toks, i + 2)
        if not any(_is(t, "testing") for t in toks[i + 2:params_end]) \
                or not any(_is(t, "T") for t in toks[i + 2:params_end]):
            i = params_end + 1
            continue
        body = params_end + 1
        while not _is(toks[body], "{"):
            body += 1
        body_end = _match(toks, body)
        names = _test_case_names(toks, body + 1, body_end)
        seen: dict[str, int] = {}
        for name, name_line in names:
            n = seen.get(name, 0)
            seen[name] = n + 1
            # Go renames a repeated sub-test name "x" to "x#01", "x#02", …
            cases.append(GoCase(file, test, name if n == 0 else f"{name}#{n:02d}", name_line))
        if not names:
            cases.append(GoCase(file, test, None, line))
        i = body_end + 1
    return cases


def _test_case_names(toks: Sequence[Tok], start: int, end: int) -> list[tuple[str, int]]:
    ranged, literal_ranges = _loops_with_subtests(toks, start, end)
    names: list[tuple[str, int]] = []
    i = start
    while i < end:
        # t.Run("literal", …)
        if _is(toks[i], "t") and _is(toks[i + 1], ".") and _is(toks[i + 2], "Run") \
                and _is(toks[i + 3], "("):
            got = _string_expr(toks, i + 4)
            if got is not None and _is(toks[got[1]], ","):
                names.append((got[0], toks[i + 4].line))
            i += 4
            continue
        # V := map[string]…{…} / V := []…{…} / var V = … / range <literal>
        table_var: str | None = None
        lit_at: int | None = None
        if toks[i].kind == "ident" and i + 2 < end and (
                _is(toks[i + 1], ":=") or _is(toks[i + 1], "=")):
            table_var, lit_at = toks[i].text, i + 2
        elif i in literal_ranges:
            lit_at = i
        if lit_at is not None and (table_var is None or table_var in ranged):
            open_i = _literal_open(toks, lit_at)
            if open_i is not None:
                close_i = _match(toks, open_i)
                if _is(toks[lit_at], "map"):
                    names.extend(_map_keys(toks, open_i, close_i))
                else:
                    names.extend(_slice_names(toks, open_i, close_i))
                i = close_i + 1
                continue
        i += 1
    return names


def go_test_files(kueue_dir: Path) -> list[Path]:
    files: list[Path] = []
    for pkg in GO_PACKAGES:
        files.extend(sorted((kueue_dir / pkg).glob("*_test.go")))
    return files


def go_cases(kueue_dir: Path) -> list[GoCase]:
    cases: list[GoCase] = []
    for path in go_test_files(kueue_dir):
        rel = path.relative_to(kueue_dir).as_posix()
        cases.extend(parse_go_tests(path.read_text(encoding="utf-8"), rel))
    return cases


class ConformanceError(Exception):
    """The generator cannot run (no Go toolchain, no Kueue sources, collection failed)."""


def default_kueue_dir() -> Path:
    """The source of the Kueue module pinned in ``tests/cluster/kueue/go.mod``.

    ``go mod download`` fetches it into Go's module cache when it is not there yet (the
    local control plane's build fetches the same module) and is a no-op otherwise.
    """
    go = shutil.which("go")
    if go is None:
        raise ConformanceError(
            "the Go toolchain (go) is not on PATH: the conformance table is computed from "
            f"the Go sources of {KUEUE_MODULE} as pinned in {GO_MOD.relative_to(REPO)}, which "
            "`go mod download` fetches; install Go (the local control plane needs it too)")
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"}
    proc = subprocess.run([go, "mod", "download", "-json", KUEUE_MODULE], cwd=GO_MOD.parent,
                          env=env, text=True, capture_output=True)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
        raise ConformanceError(
            f"go mod download {KUEUE_MODULE} (in {GO_MOD.parent.relative_to(REPO)}) failed: "
            f"{info.get('Error') or proc.stderr.strip() or proc.stdout.strip()}")
    return Path(info["Dir"])


# ---------------------------------------------------------------------------------------------
# Python side
# ---------------------------------------------------------------------------------------------

#: The collection plugin (``conformance_collect.py``, beside this file; it reads the
#: ``kueue_case`` markers registered in pyproject.toml) and where it writes what it collected.
PLUGIN = "conformance_collect"
DUMP_ENV = "KUEUE_CONFORMANCE_DUMP"


@dataclass(frozen=True)
class CollectedTest:
    """A test pytest collects, with what it claims to port."""
    nodeid: str
    cases: tuple[str, ...] = ()  # the arguments of its kueue_case markers
    param_id: str | None = None  # its parametrize id, if parametrized
    skipped: bool = False  # pytest would skip it, or it is marked xfail


_BLANKS = re.compile(r"\s+")


def _norm(text: str) -> str:
    """Blank runs -> one blank; an en dash (a few Go case names use one) -> a hyphen."""
    return _BLANKS.sub(" ", text.replace("\u2013", "-")).strip()


def _unescape_id(param_id: str) -> str:
    """pytest writes non-ASCII characters of an id as ``\\uXXXX``: read them back."""
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), param_id)


def collected_tests(roots: Sequence[str]) -> list[CollectedTest]:
    """The tests ``pytest --collect-only`` collects under ``roots`` (with the project's
    default options: what ``nox -s tests`` runs), with their markers and ids."""
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "collected.json"
        here = str(Path(__file__).resolve().parent)
        env = {**os.environ, DUMP_ENV: str(dump),
               "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "-p", PLUGIN, *roots], cwd=REPO, env=env, text=True, capture_output=True)
        if proc.returncode not in (0, 5) or not dump.exists():
            raise ConformanceError(f"pytest --collect-only failed ({proc.returncode}):\n"
                                   f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        data = json.loads(dump.read_text(encoding="utf-8"))
    return [CollectedTest(d["nodeid"], tuple(d["cases"]), d["param_id"], d["skipped"])
            for d in data]


@dataclass
class Credits:
    """What the collected tests port."""
    ported: dict[str, list[str]] = field(default_factory=dict)  # Go case id -> node ids
    unknown: list[str] = field(default_factory=list)  # "node id: name" naming no Go case
    on_skipped: dict[str, list[str]] = field(default_factory=dict)  # not counted


def credit_tests(cases: Sequence[GoCase], tests: Iterable[CollectedTest]) -> Credits:
    """Go case id -> the collected tests that assert it.

    A test credits the Go case ids its ``kueue_case`` markers name, and its parametrize id
    when that id is a Go case id. Names are compared whitespace-normalised. A marker
    argument, or a parametrize id that starts with a Go test's name and a slash, naming no
    Go case is reported as unknown; a test pytest would skip (or xfail) credits nothing.
    """
    ids = {_norm(c.id): c.id for c in cases}
    go_tests = {c.test for c in cases}
    out = Credits()
    for t in tests:
        names: list[str] = []
        for arg in t.cases:
            if _norm(arg) in ids:
                names.append(ids[_norm(arg)])
            else:
                out.unknown.append(f"{t.nodeid}: kueue_case({arg!r})")
        if t.param_id is not None:
            pid = _norm(_unescape_id(t.param_id))
            if pid in ids:
                names.append(ids[pid])
            elif pid.partition("/")[0] in go_tests and "/" in pid:
                out.unknown.append(f"{t.nodeid}: parametrize id {t.param_id!r}")
        target = out.on_skipped if t.skipped else out.ported
        for name in dict.fromkeys(names):
            target.setdefault(name, []).append(t.nodeid)
    return out


# ---------------------------------------------------------------------------------------------
# Not ported
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotPorted:
    test: str
    names: tuple[str, ...]  # empty: the whole test
    reason: str


def load_not_ported(path: Path) -> list[NotPorted]:
    data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    out: list[NotPorted] = []
    for entry in data.get("case", []):
        names = entry.get("names") or ([entry["name"]] if "name" in entry else [])
        out.append(NotPorted(entry["test"], tuple(_norm(n) for n in names), entry["reason"]))
    return out


def not_ported_index(cases: Sequence[GoCase], entries: Sequence[NotPorted]
                     ) -> tuple[dict[str, str], list[str]]:
    """Go case id -> reason, and the entries naming no known case (stale)."""
    ids = {c.id for c in cases}
    by_test: dict[str, list[GoCase]] = {}
    for c in cases:
        by_test.setdefault(c.test, []).append(c)
    reasons: dict[str, str] = {}
    stale: list[str] = []
    for e in entries:
        if not e.names:
            if e.test not in by_test:
                stale.append(e.test)
            for c in by_test.get(e.test, []):
                reasons[c.id] = e.reason
            continue
        for n in e.names:
            cid = f"{e.test}/{n}"
            if cid in ids:
                reasons[cid] = e.reason
            else:
                stale.append(cid)
    return reasons, stale


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    file: str
    cases: int = 0
    ported: int = 0
    not_ported: int = 0
    unaccounted: list[str] = field(default_factory=list)


@dataclass
class Report:
    rows: list[Row]
    ported: dict[str, list[str]]  # Go case id -> node ids of the tests asserting it
    reasons: dict[str, str]
    stale: list[str]
    conflicts: list[str]  # both ported and listed as not ported
    unknown: list[str] = field(default_factory=list)  # markers / ids naming no Go case
    on_skipped: dict[str, list[str]] = field(default_factory=dict)  # credits not counted
    files: dict[str, dict[str, int]] = field(default_factory=dict)  # Go file -> py file -> n

    @property
    def total(self) -> Row:
        t = Row("total")
        for r in self.rows:
            t.cases += r.cases
            t.ported += r.ported
            t.not_ported += r.not_ported
            t.unaccounted.extend(r.unaccounted)
        return t

    @property
    def problems(self) -> list[str]:
        """What makes the table untrustworthy; the docs check requires none."""
        out = [f"names no Go case: {u}" for u in self.unknown]
        out += [f"not_ported.toml names an unknown case: {s}" for s in self.stale]
        out += [f"ported but also listed in not_ported.toml: {c}" for c in self.conflicts]
        return out


def build_report(cases: Sequence[GoCase], tests: Iterable[CollectedTest],
                 not_ported: Sequence[NotPorted]) -> Report:
    normalised = [GoCase(c.file, c.test, None if c.name is None else _norm(c.name), c.line)
                  for c in cases]
    credits = credit_tests(normalised, tests)
    reasons, stale = not_ported_index(normalised, not_ported)
    rows: dict[str, Row] = {}
    files: dict[str, dict[str, int]] = {}
    conflicts: list[str] = []
    for c in normalised:
        row = rows.setdefault(c.file, Row(c.file))
        row.cases += 1
        if c.id in credits.ported:
            row.ported += 1
            per_file = files.setdefault(c.file, {})
            for py in dict.fromkeys(n.split("::")[0] for n in credits.ported[c.id]):
                per_file[py] = per_file.get(py, 0) + 1
            if c.id in reasons:
                conflicts.append(c.id)
        elif c.id in reasons:
            row.not_ported += 1
        else:
            row.unaccounted.append(c.id)
    return Report(list(rows.values()), credits.ported, reasons, stale, conflicts,
                  credits.unknown, credits.on_skipped, files)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def format_text(report: Report, show_unaccounted: bool) -> str:
    width = max(len(r.file) for r in [*report.rows, report.total])
    lines = [f"{'Go test file':<{width}}  {'cases':>5}  {'ported':>6}  {'not ported':>10}  "
             f"{'unaccounted':>11}"]
    for r in [*report.rows, report.total]:
        lines.append(f"{r.file:<{width}}  {r.cases:>5}  {r.ported:>6}  {r.not_ported:>10}  "
                     f"{len(r.unaccounted):>11}")
    t = report.total
    lines.append(f"ported: {t.ported}/{t.cases} = {_pct(t.ported, t.cases)}; "
                 f"accounted for (ported or listed): {_pct(t.ported + t.not_ported, t.cases)}")
    lines.extend(report.problems)
    for cid, nodes in sorted(report.on_skipped.items()):
        if cid not in report.ported:
            lines.append(f"not counted, only skipped or xfail tests name it: {cid} "
                         f"({', '.join(nodes)})")
    if show_unaccounted:
        for r in report.rows:
            for cid in r.unaccounted:
                lines.append(f"unaccounted: {r.file}: {cid}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


COMMAND = "python tests/conformance/conformance.py --write"


def format_markdown(report: Report, kueue_version: str) -> str:
    """docs/conformance.md: the whole page, prose included (nothing in it is hand-written)."""
    t = report.total
    out = [
        "# Kueue conformance: which of Kueue's Go unit tests we port",
        "",
        f"`integrations.batchjob` is Kueue's batch/v1 Job integration written on our "
        f"`jobframework`, so Kueue {kueue_version}'s own unit tests of "
        f"`{GO_PACKAGES[0]}` and `{GO_PACKAGES[1]}` can be run against ours. This page "
        f"says, per Go test file, how many of their cases a Python test ports, and why the "
        f"others are not. It is generated by `{COMMAND}` and nothing in it is edited by "
        f"hand: `tests/unit/test_conformance_script.py` fails when it differs from what the "
        f"generator writes, so the numbers are those of the tests in this checkout.",
        "",
        "## How a case is counted",
        "",
        "On the Go side, every `func TestXxx(t *testing.T)` of the `*_test.go` files of "
        "those two packages is read. A table-driven test contributes one case per entry of "
        "each table it runs sub-tests over (the keys of a `map[string]…` literal, or the "
        "`name:` fields of a slice literal, that a loop calling `t.Run` ranges over); a "
        "`t.Run(\"literal\", …)` is a case of its own; a test without either is one case, "
        "named by the test alone. A case's id is `<GoTest>/<case name>`, as `go test -run` "
        "writes it.",
        "",
        "On the Python side, a case is *ported* when a test that pytest collects under "
        "`tests/unit` (with the project's default options: what `nox -s tests` runs) "
        "asserts it and names it in one of two ways:",
        "",
        "- a marker, `@pytest.mark.kueue_case(\"<GoTest>/<case name>\", …)`, on the test "
        "or on one of its `pytest.param(…, marks=…)`; it may name several cases;",
        "- a parametrize id that is the case's id: "
        "`pytest.param(…, id=\"<GoTest>/<case name>\")`.",
        "",
        "Case names are compared with runs of blanks as one blank (an en dash may be written "
        "as a hyphen). A mention in a comment, docstring or string counts for nothing, and "
        "neither does a test pytest would skip or that is marked `xfail`. A marker, or an "
        "id starting with a Go test's name and a slash, that names no Go case fails the "
        "check, as does a case both ported and listed as not ported. *Not ported* cases "
        "are listed with their reason in `tests/conformance/not_ported.toml`; a case that "
        "is neither is *unaccounted*.",
        "",
        "For example, a test of the workload name of a flavor variant names the Go case "
        "it ports:",
        "",
        "```python",
        "import pytest",
        "",
        "from jobframework.naming import get_workload_name_for_variant",
        "from jobframework.runtime.objects import GVK",
        "",
        "",
        "@pytest.mark.kueue_case(\"TestGetWorkloadNameForVariant/simple flavor\")",
        "def test_variant_simple() -> None:",
        "    job = GVK(\"batch\", \"v1\", \"Job\")",
        "    got = get_workload_name_for_variant(\"job-my-job-12345\", \"uid-123\", job, \"spot\")",
        "    assert got == \"job-my-job-variant-spot-6320b\"",
        "",
        "",
        "test_variant_simple()",
        "```",
        "",
        "## Running it",
        "",
        "```sh",
        "python tests/conformance/conformance.py                 # the table, as text",
        "python tests/conformance/conformance.py --unaccounted   # and the cases nothing ports",
        "python tests/conformance/conformance.py --ported        # and which test ports each case",
        f"{COMMAND:<56}# rewrite this page",
        "```",
        "",
        f"The Go sources are those of the Kueue module pinned in "
        f"`{GO_MOD.relative_to(REPO).as_posix()}`, in Go's module cache: the generator runs "
        f"`go mod download {KUEUE_MODULE}` there first, which fetches the module when the "
        f"cache lacks it and does nothing otherwise (the local control plane's build fetches "
        f"the same module). It needs the Go toolchain, as the local control plane does; "
        f"without it the generator, and the unit test that checks this page, fail and say "
        f"so. The Python side is `pytest --collect-only` of `tests/unit` with the plugin "
        f"`tests/conformance/conformance_collect.py`, which records every collected test's "
        f"`kueue_case` markers and parametrize id.",
        "",
        "## The table",
        "",
        "| Go test file | cases | ported | not ported | unaccounted |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in report.rows:
        out.append(f"| `{r.file}` | {r.cases} | {r.ported} | {r.not_ported} | "
                   f"{len(r.unaccounted)} |")
    out.append(f"| **total** | **{t.cases}** | **{t.ported}** | **{t.not_ported}** | "
               f"**{len(t.unaccounted)}** |")
    out += ["", f"Ported: {t.ported} of {t.cases} cases ({_pct(t.ported, t.cases)}); "
            f"ported or listed as not ported: {_pct(t.ported + t.not_ported, t.cases)}.", ""]
    if report.files:
        out += ["## Where the ported cases are tested", "",
                "| Go test file | Python test files (cases ported there) |", "|---|---|"]
        for r in report.rows:
            per_file = report.files.get(r.file)
            if per_file:
                where = ", ".join(f"`{py}` ({n})" for py, n in sorted(per_file.items()))
                out.append(f"| `{r.file}` | {where} |")
        out.append("")
    if report.reasons:
        out += ["## Not ported", "", "| Go case | reason |", "|---|---|"]
        for cid, reason in sorted(report.reasons.items()):
            if cid not in report.ported:
                out.append(f"| `{_md(cid)}` | {_md(reason)} |")
        out.append("")
    if t.unaccounted:
        out += ["## Unaccounted", ""] + [f"- `{_md(cid)}`" for cid in t.unaccounted] + [""]
    return "\n".join(out)


DOC = REPO / "docs" / "conformance.md"


def generate(kueue_dir: Path | None = None,
             roots: Sequence[str] = DEFAULT_TEST_ROOTS) -> tuple[Report, str]:
    """The report, and the Kueue version it was computed against."""
    kueue_dir = kueue_dir or default_kueue_dir()
    if not kueue_dir.is_dir():
        raise ConformanceError(f"{kueue_dir}: not a directory")
    cases = go_cases(kueue_dir)
    if not cases:
        raise ConformanceError(f"{kueue_dir}: no Go test cases in {', '.join(GO_PACKAGES)}")
    report = build_report(cases, collected_tests(roots), load_not_ported(NOT_PORTED_FILE))
    return report, kueue_dir.name.partition("@")[2] or str(kueue_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kueue-dir", type=Path, help="root of the Kueue Go module")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown page")
    parser.add_argument("--write", action="store_true",
                        help=f"write the Markdown page to {DOC.relative_to(REPO)}")
    parser.add_argument("--unaccounted", action="store_true",
                        help="list the unaccounted cases")
    parser.add_argument("--ported", action="store_true",
                        help="list each ported case with the tests that assert it")
    parser.add_argument("--tests", nargs="*", default=list(DEFAULT_TEST_ROOTS),
                        help="Python test roots, relative to the repository")
    args = parser.parse_args(argv)
    try:
        report, version = generate(args.kueue_dir, args.tests)
    except ConformanceError as e:
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    if args.write:
        DOC.write_text(format_markdown(report, version), encoding="utf-8")
        print(f"wrote {DOC.relative_to(REPO)}")
    elif args.markdown:
        print(format_markdown(report, version), end="")
    else:
        print(format_text(report, args.unaccounted))
        if args.ported:
            for cid, nodes in sorted(report.ported.items()):
                print(f"ported: {cid}: {', '.join(nodes)}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
