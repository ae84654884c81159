"""The tutorial's use of ``until`` type-checks under ``mypy --strict``: its check returns
the list of Workloads (something true once there is one), not a bool.

The block is taken from ``docs/tutorial.md`` as written and checked inside a coroutine
(mypy rejects a top-level ``await``), with the names the tutorial's earlier blocks define
given their types.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api as mypy_api

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = """\
import asyncio

from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import Object
from jobframework.testing import InMemoryClient


async def section(client: InMemoryClient, mgr: Manager, task: asyncio.Task[None]) -> None:
"""


def tutorial_block(marker: str) -> str:
    """The one ``python`` block of the tutorial containing ``marker``."""
    text = (ROOT / "docs" / "tutorial.md").read_text()
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M) if marker in b]
    assert len(blocks) == 1, blocks
    return blocks[0]


RESULT_TYPED = """\
from jobframework.testing.running import until


async def names() -> list[str]:
    return ["a"]


async def main() -> None:
    found = await until(names, "names")
    found.upper()
"""


def test_the_tutorials_until_example_type_checks(tmp_path: Path) -> None:
    block = tutorial_block("await until(")
    assert "async def workloads() -> list[Object]:" in block
    (tmp_path / "tutorial.py").write_text(PRELUDE + textwrap.indent(block, "    "))
    # The result is typed as the check's: a list here, so using it as a str is an error.
    (tmp_path / "result_typed.py").write_text(RESULT_TYPED)
    out, err, _ = mypy_api.run([
        "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
        "--follow-imports", "silent", str(tmp_path / "tutorial.py"),
        str(tmp_path / "result_typed.py")])
    errors = [line for line in out.splitlines() if "error:" in line]
    assert err == ""
    assert [e for e in errors if "tutorial.py" in e] == []
    [wrong] = [e for e in errors if "result_typed.py" in e]
    assert "result_typed.py:10:" in wrong and '"list[str]" has no attribute "upper"' in wrong
