"""The docs' code blocks run, so they cannot rot.

Every fenced ``python`` block of ``docs/*.md`` and ``README.md`` is executed. The blocks of
one page run in order in one shared namespace, as a doctest session does (a later block
uses what an earlier one defined), in one event loop per page, with top-level ``await``.
Non-python fences (yaml, sh, console, text) are not run.

An HTML comment on the line directly before a fence changes how its block is checked:

* ``<!-- docs-test: compile-only (REASON) -->``: the block cannot run in a unit test (it
  needs a real cluster, say); it is compiled, and its top-level ``import`` statements are
  executed, so a renamed or deleted name still fails. The reason is mandatory.
* ``<!-- docs-test: pytest -->``: the block is a whole pytest test file; it is written to
  a temporary file and run by pytest in a subprocess, then its definitions (not its tests)
  are loaded into the page's namespace for the blocks after it.
* ``<!-- docs-test: continued -->``: the block continues the previous one (more methods of
  the same class, say); the two are run as one piece of code.

Code is compiled with the Markdown file as its file name and its lines at their Markdown
line numbers, so a traceback points at the page's line.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import enum
import importlib
import inspect
import pathlib
import re
import subprocess
import sys
import traceback
import types
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [*sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
         "README.md"]

#: Longest a block may run (they run on the in-memory server, in well under a second).
BLOCK_TIMEOUT = 120.0

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->$")
_COMPILE_ONLY = re.compile(r"^compile-only\s*\((?P<reason>.*\S.*)\)$")


class DocsMarkupError(ValueError):
    """A malformed fence or ``docs-test`` marker."""


class DocsBlockError(AssertionError):
    """A block failed; the message names the page and the block's first line."""


@dataclasses.dataclass
class Block:
    """One fenced code block."""

    page: str
    #: 1-based line of the opening fence.
    line: int
    lang: str
    #: ``run``, ``compile-only``, ``pytest`` or ``continued``.
    mode: str
    reason: str
    #: The code lines, dedented by the fence's indentation, keyed by 1-based line number.
    lines: dict[int, str]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with its ``docs-test`` marker."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        lang = (m.group("info").strip().split() or [""])[0].lower()
        start = i
        i += 1
        body: dict[int, str] = {}
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            raw = lines[i]
            body[i + 1] = raw[len(indent):] if raw.startswith(indent) else raw.lstrip()
            i += 1
        else:
            raise DocsMarkupError(f"{page}:{start + 1}: the fence is never closed")
        i += 1
        mode, reason = "run", ""
        marker = _MARKER.match(lines[start - 1].strip()) if start > 0 else None
        if marker is not None:
            spec = marker.group("body")
            compile_only = _COMPILE_ONLY.match(spec)
            if compile_only is not None:
                mode, reason = "compile-only", compile_only.group("reason").strip()
            elif spec in ("pytest", "continued"):
                mode = spec
            else:
                raise DocsMarkupError(
                    f"{page}:{start}: unknown docs-test marker {spec!r} (use compile-only "
                    "(REASON), pytest or continued)")
            if lang != "python":
                raise DocsMarkupError(f"{page}:{start}: a docs-test marker on a {lang!r} block")
        blocks.append(Block(page, start + 1, lang, mode, reason, body))
    return blocks


def python_groups(blocks: list[Block]) -> list[list[Block]]:
    """The python blocks, a ``continued`` block joined to the one before it."""
    groups: list[list[Block]] = []
    for block in blocks:
        if block.lang != "python":
            continue
        if block.mode == "continued":
            if not groups or groups[-1][0].mode != "run":
                raise DocsMarkupError(
                    f"{block.where}: a continued block must follow a python block that runs")
            groups[-1].append(block)
        else:
            groups.append([block])
    return groups


def _source(group: list[Block]) -> str:
    """The group's code at its Markdown line numbers (every other line blank)."""
    last = max(max(b.lines, default=b.line) for b in group)
    out = [""] * last
    for block in group:
        for number, text in block.lines.items():
            out[number - 1] = text
    return "\n".join(out) + "\n"


def _compile(source: str | ast.Module, filename: str) -> types.CodeType:
    return compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                   dont_inherit=True)


async def _run_code(code: types.CodeType, namespace: dict[str, Any]) -> None:
    result = eval(code, namespace)  # the docs' own code
    if inspect.iscoroutine(result):
        await result


def _describe(group: list[Block], filename: str, exc: BaseException) -> str:
    head = group[0]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    at = f", line {frames[-1].lineno}" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename == filename and exc.lineno:
        at = f", line {exc.lineno}"
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the harness's own frames
    detail = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    return (f"{head.where}: python block failed{at} ({head.mode}): "
            f"{type(exc).__name__}: {exc}\n{detail}")


async def _run_group(group: list[Block], filename: str, namespace: dict[str, Any],
                     tmp_path: pathlib.Path) -> None:
    head = group[0]
    source = _source(group)
    code = _compile(source, filename)
    if head.mode == "compile-only":
        tree = ast.parse(source, filename)
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                await _run_code(_compile(ast.Module([node], []), filename), namespace)
        return
    if head.mode == "pytest":
        test_file = tmp_path / f"test_{pathlib.Path(head.page).stem}_{head.line}.py"
        test_file.write_text("".join(line + "\n" for line in head.lines.values()))
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file.name],
            cwd=tmp_path, capture_output=True, text=True, timeout=BLOCK_TIMEOUT * 2)
        if out.returncode != 0:
            raise AssertionError(f"pytest failed on the block:\n{out.stdout}{out.stderr}")
    async with asyncio.timeout(BLOCK_TIMEOUT):
        await _run_code(code, namespace)


async def run_page_text(page: str, text: str, tmp_path: pathlib.Path) -> int:
    """Run every python block of a page in one namespace; returns the number of blocks
    checked. Raises :class:`DocsBlockError` naming the page and line of the first
    failing block."""
    groups = python_groups(parse_blocks(page, text))
    filename = str(ROOT / page)
    module_name = "docs_" + re.sub(r"\W", "_", page)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    namespace = module.__dict__
    try:
        for group in groups:
            try:
                await _run_group(group, filename, namespace, tmp_path)
            except Exception as exc:
                raise DocsBlockError(_describe(group, filename, exc)) from exc
    finally:
        sys.modules.pop(module_name, None)
    return sum(len(g) for g in groups)


def run_page(page: str, tmp_path: pathlib.Path, text: str | None = None) -> int:
    """:func:`run_page_text` in a fresh event loop."""
    if text is None:
        text = (ROOT / page).read_text()
    return asyncio.run(run_page_text(page, text, tmp_path))


# --- the docs ---------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_page_code_blocks_run(page: str, tmp_path: pathlib.Path) -> None:
    try:
        run_page(page, tmp_path)
    except DocsBlockError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_markers_are_rare_and_explained() -> None:
    marked = [b for page in PAGES for b in parse_blocks(page, (ROOT / page).read_text())
              if b.mode == "compile-only"]
    assert all(len(b.reason) > 15 for b in marked), [b.where for b in marked]
    runnable = [b for page in PAGES for b in parse_blocks(page, (ROOT / page).read_text())
                if b.lang == "python"]
    assert len(marked) * 5 < len(runnable), [b.where for b in marked]


# --- the harness itself -------------------------------------------------------------------

FAKE = '''# A page

```python
x = 1
```

Some prose.

```yaml
not: python
```

```python
import asyncio
await asyncio.sleep(0)
assert x == 2, "x is not 2"
```
'''


def test_harness_reports_the_page_and_line_of_a_failing_block(tmp_path: pathlib.Path) -> None:
    with pytest.raises(DocsBlockError) as info:
        run_page("docs/fake.md", tmp_path, FAKE)
    message = str(info.value)
    assert message.startswith(
        "docs/fake.md:13: python block failed, line 16 (run): AssertionError: x is not 2"), message
    assert 'File "' + str(ROOT / "docs/fake.md") + '", line 16' in message, message


def test_harness_shares_one_namespace_and_awaits(tmp_path: pathlib.Path) -> None:
    assert run_page("docs/fake.md", tmp_path, FAKE.replace("x == 2", "x == 1")) == 2


def test_harness_compile_only_blocks_still_import(tmp_path: pathlib.Path) -> None:
    page = ("<!-- docs-test: compile-only (needs a real cluster to talk to) -->\n"
            "```python\nfrom jobframework.constants import QUEUE_LABEL\n"
            "connect_to_a_cluster()\n```\n")
    assert run_page("docs/fake.md", tmp_path, page) == 1
    with pytest.raises(DocsBlockError, match=r"^docs/fake.md:2: .* line 3 .*ImportError"):
        run_page("docs/fake.md", tmp_path, page.replace("QUEUE_LABEL", "NO_SUCH_NAME"))
    with pytest.raises(DocsBlockError, match=r"^docs/fake.md:2: .*SyntaxError"):
        run_page("docs/fake.md", tmp_path, page.replace("connect_to_a_cluster()", "def ("))


def test_harness_joins_continued_blocks(tmp_path: pathlib.Path) -> None:
    page = ("```python\nclass A:\n    def f(self) -> int:\n        return 1\n```\n\nMore.\n\n"
            "<!-- docs-test: continued -->\n```python\n    def g(self) -> int:\n"
            "        return self.f() + 1\n```\n\n```python\nassert A().g() == 3\n```\n")
    with pytest.raises(DocsBlockError, match=r"^docs/fake.md:15: .*line 16"):
        run_page("docs/fake.md", tmp_path, page)
    assert run_page("docs/fake.md", tmp_path, page.replace("== 3", "== 2")) == 3


def test_harness_runs_pytest_blocks(tmp_path: pathlib.Path) -> None:
    page = ("<!-- docs-test: pytest -->\n```python\ndef helper() -> int:\n    return 2\n\n\n"
            "def test_it() -> None:\n    assert helper() == 2\n```\n\n"
            "```python\nassert helper() == 2\n```\n")
    assert run_page("docs/fake.md", tmp_path, page) == 2
    with pytest.raises(DocsBlockError, match=r"(?s)^docs/fake.md:2: .*1 failed"):
        run_page("docs/fake.md", tmp_path, page.replace("helper() == 2\n```\n\n", "0\n```\n\n"))


def test_harness_refuses_bad_markers() -> None:
    with pytest.raises(DocsMarkupError, match="unknown docs-test marker"):
        parse_blocks("p.md", "<!-- docs-test: skip -->\n```python\nx\n```\n")
    with pytest.raises(DocsMarkupError, match="unknown docs-test marker"):
        parse_blocks("p.md", "<!-- docs-test: compile-only -->\n```python\nx\n```\n")
    with pytest.raises(DocsMarkupError, match="never closed"):
        parse_blocks("p.md", "```python\nx\n")


def test_harness_times_out_a_hung_block(tmp_path: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "BLOCK_TIMEOUT", 0.05)
    page = "```python\nimport asyncio\nawait asyncio.Event().wait()\n```\n"
    with pytest.raises(DocsBlockError, match=r"^docs/fake.md:1: .*TimeoutError"):
        run_page("docs/fake.md", tmp_path, page)


# --- constants and the Go names ------------------------------------------------------------


def _public_constants() -> dict[str, Any]:
    constants = importlib.import_module("jobframework.constants")
    return {name: value for name, value in vars(constants).items()
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", name)}


def test_every_constant_is_documented_with_its_value() -> None:
    text = (ROOT / "docs" / "jobframework-api.md").read_text()
    section = text.split("## `jobframework.constants`", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([A-Z][A-Z0-9_]*)` \| `([^`]*)` \|", section, re.MULTILINE)}
    missing = [n for n in _public_constants() if f"`{n}`" not in section]
    assert missing == [], "undocumented constants in docs/jobframework-api.md"
    for name, value in _public_constants().items():
        if isinstance(value, str | int) and not isinstance(value, bool | enum.Enum):
            assert name in rows, f"{name}: document it as | `{name}` | `<value>` |"
            assert ast.literal_eval(rows[name]) == value, name


def _resolve(root: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def test_go_to_python_names_resolve() -> None:
    from tests.unit.jobframework.test_public_surface import PORTED, STOP_REASONS

    jobframework = importlib.import_module("jobframework")
    text = (ROOT / "docs" / "go-to-python.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `([\w.]+)` \| `([\w.]+)` \|$", text, re.MULTILINE)
    assert sorted(go for go, _, _ in rows) == sorted([*PORTED, *STOP_REASONS])
    for go, name, module in rows:
        exported = _resolve(jobframework, name)
        assert _resolve(importlib.import_module(module), name) is exported, (go, module)
        if go in PORTED:
            assert name == PORTED[go], go
        else:
            assert name == f"StopReason.{STOP_REASONS[go]}", go


def test_go_to_python_is_linked() -> None:
    for page in ("README.md", "docs/jobframework-api.md", "docs/tutorial.md"):
        assert "go-to-python.md" in (ROOT / page).read_text(), page
