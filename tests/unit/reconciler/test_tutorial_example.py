"""The tutorial's SleepJob example (docs/examples/sleepjob.py) runs as documented."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

from jobframework.naming import get_workload_name_for_owner_with_gvk
from jobframework.runtime.objects import GVK

EXAMPLE = pathlib.Path(__file__).parents[3] / "docs" / "examples" / "sleepjob.py"


def load_example() -> object:
    spec = importlib.util.spec_from_file_location("sleepjob_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_sleepjob_example() -> None:
    module = load_example()
    trace = await module.demo()  # type: ignore[attr-defined]
    assert trace[0].startswith("workload sleepjob-nap-") and trace[0].endswith(
        "in queue user-queue")
    assert trace[1] == "started on {'instance-type': 'on-demand'}"
    # The name is Kueue's: lower-case kind, job name, 5 hex chars of the owner hash.
    name = trace[0].split()[1]
    assert len(name) == len("sleepjob-nap-") + 5
    assert get_workload_name_for_owner_with_gvk("nap", "uid", GVK("example.com", "v1",
                                                                  "SleepJob")).startswith(
        "sleepjob-nap-")
