"""The reconciler factories are typed: a misspelt option is a type error, not a run-time
surprise (the users' first-afternoon report)."""

from __future__ import annotations

from pathlib import Path

import attrs
from mypy import api as mypy_api

from jobframework.reconciler import ReconcilerOptionOverrides, ReconcilerOptions

SAMPLE = """\
from jobframework.interface import GenericJob
from jobframework.reconciler import (EventRecorderLike, ReconcilerOptions,
                                     new_generic_reconciler_factory, new_reconciler)
from jobframework.runtime.client import Client


def build(client: Client, recorder: EventRecorderLike, job: type[GenericJob]) -> None:
    factory = new_generic_reconciler_factory(job)
    factory(client, None, recorder, ReconcilerOptions(), wait_for_pods_ready=True)
    factory(client, None, recorder, wait_for_pod_ready=True)
    new_reconciler(client, recorder, manage_jobs_without_queue_name="yes")
"""


def test_overrides_list_exactly_the_options_fields() -> None:
    assert set(ReconcilerOptionOverrides.__annotations__) == {
        f.name for f in attrs.fields(ReconcilerOptions)}


def test_mypy_catches_a_misspelt_or_mistyped_option(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    out, err, status = mypy_api.run([
        "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
        "--follow-imports", "silent", str(sample)])
    lines = [line for line in out.splitlines() if "error:" in line]
    assert status == 1, (out, err)
    assert len(lines) == 2, out
    assert 'Unexpected keyword argument "wait_for_pod_ready"' in lines[0]
    assert "sample.py:10:" in lines[0]
    assert "manage_jobs_without_queue_name" in lines[1] and "sample.py:11:" in lines[1]
