"""Replays outcomes recorded from a real kube-apiserver through the engines.

``data/kube_apiserver_golden.json`` was recorded from a local kube-apiserver (v1.36) by
``record_golden.py`` (run it again to re-record), sending the requests the engines model:

* ``validation``: creates of random (often broken) objects of random CRD schemas; each
  case has the HTTP code and either the stored object (defaults applied, unknown fields
  pruned) or the 422 causes;
* ``ssa``: random sequences of server-side applies (main resource and status, forced or
  not, by three managers) and updates (PUT by two updaters) on one object of a CRD with
  keyed, set, atomic lists and atomic/granular maps; each step has the code and either
  the error message or the resulting object and managedFields (times dropped).

Cause order inside a 422 follows Go map iteration, so causes compare as sets.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.testing._apply import apply, update_managed_fields
from jobframework.testing._schema import StructuralSchema

GOLDEN = json.loads((Path(__file__).parent / "data" / "kube_apiserver_golden.json").read_text())
T = "2024-01-01T00:00:00Z"


def _sorted(causes: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(c, sort_keys=True) for c in causes)


@pytest.mark.parametrize("case", GOLDEN["validation"],
                         ids=[f"v{i}" for i in range(len(GOLDEN["validation"]))])
def test_validation_matches_kube_apiserver(case: dict[str, Any]) -> None:
    schema = StructuralSchema(case["schema"])
    obj = schema.normalize(case["object"])
    causes = schema.validate(obj)
    if case["code"] in (200, 201):
        assert causes == []
        assert {k: v for k, v in obj.items() if k != "metadata"} == case["stored"]
    else:
        assert case["code"] == 422
        assert _sorted(causes) == _sorted(case["causes"])
        kind = case["object"]["kind"]
        err = errors.new_invalid(kind, case["object"]["metadata"]["name"], causes,
                                 group="gold.io")
        if len(causes) == 1:
            assert err.message == case["message"]


def _clean(obj: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = copy.deepcopy(obj)
    entries = out["metadata"].pop("managedFields", [])
    cleaned = sorted(({k: v for k, v in e.items() if k != "time"} for e in entries),
                     key=lambda e: json.dumps(e, sort_keys=True))
    return out, cleaned


SSA_SCHEMA = StructuralSchema(GOLDEN["ssa"]["schema"])


@pytest.mark.parametrize("steps", GOLDEN["ssa"]["sequences"],
                         ids=[f"s{i}" for i in range(len(GOLDEN["ssa"]["sequences"]))])
def test_apply_sequences_match_kube_apiserver(steps: list[dict[str, Any]]) -> None:
    schema = SSA_SCHEMA
    live: dict[str, Any] | None = None
    for number, step in enumerate(steps):
        sub = step["subresource"]
        reset = None if sub else ["status"]
        result: dict[str, Any] | None = None
        error: tuple[int, str] | None = None
        parts: list[str] = []
        try:
            if step["op"] == "apply":
                result = apply(live, schema.prune(step["config"]), manager=step["manager"],
                               force=step["force"], now=T, schema=schema, subresource=sub,
                               reset_fields=reset)
                result = schema.normalize(result, prune_nulls=False)
            else:
                assert live is not None
                new = copy.deepcopy(live)
                new["status" if sub else "spec"] = step["body"]
                result = update_managed_fields(
                    live, schema.normalize(new), manager=step["manager"], now=T,
                    subresource=sub, schema=schema, reset_fields=reset)
            causes = schema.validate(result, subresource=sub)
            if causes:
                raise errors.new_invalid("Wl", "w", causes, group="ssa.io")
        except errors.ApiError as exc:
            error = (exc.code, exc.message)
            parts = [f"{c['field']}: {c['message']}" for c in getattr(exc, "causes", [])]
        where = f"step {number}: {step['op']} by {step['manager']}"
        if step["code"] != 200:
            assert error is not None, where
            assert error[0] == step["code"], where
            if len(parts) > 1:
                # Several causes come in Go map order: the same ones, in any order.
                head, _, body = step["message"].partition(" is invalid: [")
                assert error[1].startswith(head + " is invalid: ["), where
                assert all(part in body for part in parts), where
                assert len(body) == sum(map(len, parts)) + 2 * (len(parts) - 1) + 1, where
            else:
                assert error[1] == step["message"], where
            continue
        assert error is None, where
        assert result is not None
        obj, managed = _clean(result)
        assert obj == step["object"], where
        assert managed == step["managedFields"], where
        live = result
