#!/usr/bin/env python3
"""Conformance table: which of the pinned Kueue's Go unit test cases our Python tests port.

Usage::

    python tests/conformance/conformance.py [--kueue-dir DIR] [--markdown] [--unaccounted]

``DIR`` defaults to the Kueue module pinned in ``tests/cluster/kueue/go.mod``, in the Go
module cache (``go env GOMODCACHE``).

Go side
    Every ``func TestXxx(t *testing.T)`` of the ``*_test.go`` files in
    ``pkg/controller/jobframework`` and ``pkg/controller/jobs/job``. A table-driven test
    contributes one case per entry of each table it runs sub-tests over: the string keys of a
    ``map[string]…{…}`` literal, or the ``name:`` fields of a ``[]…{…}`` literal, that a
    ``for … range`` loop containing ``t.Run(`` iterates; a ``t.Run("literal", …)`` adds the
    literal as a case. A test with none of these is one case (its name alone).

Python side (the convention)
    A Python test ports Go case ``C`` of Go test ``T`` when the text ``T/C`` -- or
    ``T/"C"`` -- appears in its pytest id, its name, a string, a comment or a docstring
    under ``tests/unit``. After ``T/"C"`` more quoted names may follow, separated by commas,
    ``and`` or ``or`` (``T/"a", "b" and "c"`` names three cases). Line breaks, comment
    markers and runs of blanks inside the text count as one blank, so a name may wrap
    across comment or docstring lines; an en dash in a Go case name may be written as a
    hyphen. A Go test without a table is ported when its name
    ``T`` appears as a word (not followed by ``/``). Where several case names fit an
    unquoted mention, the longest one is credited.

Not ported
    ``tests/conformance/not_ported.toml`` lists the cases deliberately not ported, each
    with its reason (``[[case]]`` tables with ``test``, ``name`` or ``names`` -- both omitted
    for the whole test -- and ``reason``).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import io
import os
import re
import subprocess
import sys
import tokenize
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


def default_kueue_dir() -> Path:
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(KUEUE_MODULE)}\s+(v\S+)",
                  GO_MOD.read_text(encoding="utf-8"), re.MULTILINE)
    if m is None:
        raise SystemExit(f"{GO_MOD}: no {KUEUE_MODULE} requirement")
    version = m.group(1)
    try:
        modcache = subprocess.run(["go", "env", "GOMODCACHE"], check=True, text=True,
                                  capture_output=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        modcache = ""
    if not modcache:
        gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
        modcache = str(Path(gopath.split(os.pathsep)[0]) / "pkg" / "mod")
    return Path(modcache) / f"{KUEUE_MODULE}@{version}"


# ---------------------------------------------------------------------------------------------
# Python side
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    """A piece of text in our tests that may name Go cases, and where it is."""
    text: str
    where: str  # "tests/unit/x.py::test_y" or "tests/unit/x.py:12"


_BLANKS = re.compile(r"\s+")


def _norm(text: str) -> str:
    """Blank runs -> one blank; an en dash (a few Go case names use one) -> a hyphen."""
    return _BLANKS.sub(" ", text.replace("\u2013", "-")).strip()


def python_mentions(src: str, path: str) -> list[Mention]:
    """The names, strings, comments and docstrings of a Python module as mentions.

    Adjacent string literals are joined (as Python does); consecutive comment lines are
    joined with a blank; every mention is whitespace-normalised.
    """
    defs = _def_spans(src)
    out: list[Mention] = []
    comment: list[str] = []
    comment_line = 0
    strings: list[str] = []
    string_line = 0
    last_comment_row = -2

    def where(line: int) -> str:
        name = _enclosing(defs, line)
        return f"{path}::{name}" if name else f"{path}:{line}"

    def flush_comment() -> None:
        if comment:
            out.append(Mention(_norm(" ".join(comment)), where(comment_line)))
            comment.clear()

    def flush_strings() -> None:
        if strings:
            out.append(Mention(_norm("".join(strings)), where(string_line)))
            strings.clear()

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError):
        return [Mention(_norm(src), path)]
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            flush_strings()
            if tok.start[0] != last_comment_row + 1:
                flush_comment()
                comment_line = tok.start[0]
            comment.append(tok.string.lstrip("#"))
            last_comment_row = tok.start[0]
            continue
        if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        flush_comment()
        if tok.type == tokenize.STRING:
            if not strings:
                string_line = tok.start[0]
            strings.append(_string_value(tok.string))
            continue
        flush_strings()
        if tok.type == tokenize.NAME and tok.string.startswith(("test_", "Test")):
            out.append(Mention(tok.string, where(tok.start[0])))
    flush_comment()
    flush_strings()
    return out


def _string_value(lit: str) -> str:
    try:
        value = ast.literal_eval(lit)
    except (ValueError, SyntaxError):  # f-strings: keep the literal text between the quotes
        m = re.match(r"(?is)^[a-z]*('''|\"\"\"|'|\")(.*)\1$", lit, re.DOTALL)
        return m.group(2) if m else lit
    return value if isinstance(value, str) else ""


def _def_spans(src: str) -> list[tuple[int, int, str]]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    spans: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((start, node.end_lineno or node.lineno, node.name))
    return spans


def _enclosing(spans: Iterable[tuple[int, int, str]], line: int) -> str | None:
    best: tuple[int, int, str] | None = None
    for s in spans:
        if s[0] <= line <= s[1] and (best is None or s[1] - s[0] < best[1] - best[0]):
            best = s
    return best[2] if best else None


def collected_mentions(roots: Sequence[str]) -> list[Mention]:
    """The pytest ids under ``roots`` (``pytest --collect-only``) as mentions."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *roots], cwd=REPO, text=True, capture_output=True)
    if proc.returncode not in (0, 5):
        raise SystemExit(f"pytest --collect-only failed ({proc.returncode}):\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return [Mention(_norm(line), line.strip()) for line in proc.stdout.splitlines()
            if "::" in line]


def source_mentions(roots: Sequence[str]) -> list[Mention]:
    out: list[Mention] = []
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            out.extend(python_mentions(path.read_text(encoding="utf-8"), rel))
    return out


_QUOTED_TAIL = re.compile(r'\s*(?:,\s*(?:and\s+|or\s+)?|and\s+|or\s+)"([^"]*)"')


def match_cases(cases: Sequence[GoCase], mentions: Iterable[Mention]) -> dict[str, list[str]]:
    """Go case id -> where our tests port it."""
    by_test: dict[str, list[str]] = {}
    plain: set[str] = set()
    for c in cases:
        if c.name is None:
            plain.add(c.test)
        else:
            by_test.setdefault(c.test, []).append(_norm(c.name))
    for names in by_test.values():
        names.sort(key=len, reverse=True)  # longest first: the longest fitting name wins
    found: dict[str, list[str]] = {}

    def credit(test: str, name: str, where: str) -> None:
        found.setdefault(f"{test}/{name}", []).append(where)

    tests = sorted(set(by_test) | plain, key=len, reverse=True)
    head = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, tests))
                      + r")(?![A-Za-z0-9_])")
    for m in mentions:
        text = m.text
        for h in head.finditer(text):
            test, after = h.group(1), h.end()
            if after < len(text) and text[after] == "/":
                names = by_test.get(test, [])
                rest = text[after + 1:]
                if rest.startswith('"'):
                    q = re.match(r'"([^"]*)"', rest)
                    while q is not None:
                        if _norm(q.group(1)) in names:
                            credit(test, _norm(q.group(1)), m.where)
                        q = _QUOTED_TAIL.match(rest, q.end())
                    continue
                for name in names:
                    if rest.startswith(name) and (len(rest) == len(name)
                                                  or not _is_word_char(rest[len(name)])):
                        credit(test, name, m.where)
                        break
            elif test in plain:
                found.setdefault(test, []).append(m.where)
    return found


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


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
    ported: dict[str, list[str]]
    reasons: dict[str, str]
    stale: list[str]
    conflicts: list[str]  # both ported and listed as not ported

    @property
    def total(self) -> Row:
        t = Row("total")
        for r in self.rows:
            t.cases += r.cases
            t.ported += r.ported
            t.not_ported += r.not_ported
            t.unaccounted.extend(r.unaccounted)
        return t


def build_report(cases: Sequence[GoCase], mentions: Iterable[Mention],
                 not_ported: Sequence[NotPorted]) -> Report:
    normalised = [GoCase(c.file, c.test, None if c.name is None else _norm(c.name), c.line)
                  for c in cases]
    ported = match_cases(normalised, mentions)
    reasons, stale = not_ported_index(normalised, not_ported)
    rows: dict[str, Row] = {}
    conflicts: list[str] = []
    for c in normalised:
        row = rows.setdefault(c.file, Row(c.file))
        row.cases += 1
        if c.id in ported:
            row.ported += 1
            if c.id in reasons:
                conflicts.append(c.id)
        elif c.id in reasons:
            row.not_ported += 1
        else:
            row.unaccounted.append(c.id)
    return Report(list(rows.values()), ported, reasons, stale, conflicts)


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
    if report.conflicts:
        lines.append("ported but also listed as not ported: " + ", ".join(report.conflicts))
    if report.stale:
        lines.append("not_ported.toml names unknown cases: " + ", ".join(report.stale))
    if show_unaccounted:
        for r in report.rows:
            for cid in r.unaccounted:
                lines.append(f"unaccounted: {r.file}: {cid}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def format_markdown(report: Report, kueue_version: str, date: str, command: str) -> str:
    t = report.total
    out = [
        "# Kueue conformance: ported Go unit tests",
        "",
        f"Generated on {date} by `{command}` against Kueue {kueue_version} "
        f"(`{' and '.join(GO_PACKAGES)}`).",
        "",
        "A Go case counts as *ported* when a test under `tests/unit` names it as "
        "`<GoTest>/<case name>` (or `<GoTest>/\"<case name>\"`) in its pytest id, name, a "
        "string, comment or docstring; a Go test without a table counts as one case, ported "
        "when its name is mentioned. *Not ported* cases are listed with their reason in "
        "`tests/conformance/not_ported.toml`. See the docstring of "
        "`tests/conformance/conformance.py` for the exact rules.",
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
    if report.reasons:
        out += ["## Not ported", "", "| Go case | reason |", "|---|---|"]
        for cid, reason in sorted(report.reasons.items()):
            if cid not in report.ported:
                out.append(f"| `{_md(cid)}` | {_md(reason)} |")
        out.append("")
    if t.unaccounted:
        out += ["## Unaccounted", ""] + [f"- `{_md(cid)}`" for cid in t.unaccounted] + [""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kueue-dir", type=Path, help="root of the Kueue Go module")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown table")
    parser.add_argument("--unaccounted", action="store_true",
                        help="list the unaccounted cases")
    parser.add_argument("--date", default=dt.date.today().isoformat(),
                        help="date printed in the Markdown header")
    parser.add_argument("--tests", nargs="*", default=list(DEFAULT_TEST_ROOTS),
                        help="Python test roots, relative to the repository")
    parser.add_argument("--no-collect", action="store_true",
                        help="do not collect pytest ids (source text only)")
    args = parser.parse_args(argv)
    kueue_dir: Path = args.kueue_dir or default_kueue_dir()
    if not kueue_dir.is_dir():
        raise SystemExit(f"{kueue_dir}: not a directory")
    cases = go_cases(kueue_dir)
    mentions = source_mentions(args.tests)
    if not args.no_collect:
        mentions += collected_mentions(args.tests)
    report = build_report(cases, mentions, load_not_ported(NOT_PORTED_FILE))
    if args.markdown:
        version = kueue_dir.name.partition("@")[2] or str(kueue_dir)
        command = "python tests/conformance/conformance.py --markdown"
        if args.date != dt.date.today().isoformat():
            command += f" --date {args.date}"
        print(format_markdown(report, version, args.date, command))
    else:
        print(format_text(report, args.unaccounted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
