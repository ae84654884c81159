"""pytest plugin for ``conformance.py``: records what every collected test ports.

``conformance.py`` runs ``pytest --collect-only -p conformance_collect`` with this folder on
``PYTHONPATH`` and ``KUEUE_CONFORMANCE_DUMP`` set to a file; after collection (and after
the default ``-m`` deselection, so only what ``nox -s tests`` runs is there) this plugin
writes, for each item, its node id, the arguments of its ``kueue_case`` markers, its
parametrize id and whether pytest would skip it (or xfail it). Without the variable it
does nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks

DUMP_ENV = "KUEUE_CONFORMANCE_DUMP"
MARKER = "kueue_case"


def _skipped(item: pytest.Item) -> bool:
    # The skip / skipif / xfail markers evaluated as pytest does before running the test:
    # such a test asserts nothing that could fail, so it ports nothing.
    return evaluate_skip_marks(item) is not None or evaluate_xfail_marks(item) is not None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Write the collected items' conformance claims to ``$KUEUE_CONFORMANCE_DUMP``."""
    path = os.environ.get(DUMP_ENV)
    if not path:
        return
    items = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        items.append({
            "nodeid": item.nodeid,
            "cases": [str(arg) for mark in item.iter_markers(MARKER) for arg in mark.args],
            "param_id": callspec.id if callspec is not None else None,
            "skipped": _skipped(item),
        })
    Path(path).write_text(json.dumps(items), encoding="utf-8")
