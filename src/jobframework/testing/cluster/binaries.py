"""Where the Go pins live, how to build them, and where their sources are cached.

The pins are the Go modules under ``tests/cluster/`` of a checkout of this
repository; ``tests/cluster/build.sh`` builds them into
``${KUEUE_JF_CACHE:-~/.cache/kueue-jobframework}/bin/<pin-hash>/``.
Kueue's CRDs and webhook manifest and kwok's node stages are read from the
same module versions in Go's module cache (``go env GOMODCACHE``); nothing is
copied into the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kueue",
)


class BuildError(RuntimeError):
    """The Go toolchain or the build script failed."""


def cache_root() -> Path:
    env = os.environ.get("KUEUE_JF_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kueue-jobframework"


def _is_pins_dir(path: Path) -> bool:
    return (path / "build.sh").is_file() and (path / "kueue" / "go.mod").is_file()


def pins_dir() -> Path:
    """``tests/cluster`` of the checkout (``KUEUE_JF_PINS`` overrides)."""
    env = os.environ.get("KUEUE_JF_PINS")
    if env:
        path = Path(env).resolve()
        if not _is_pins_dir(path):
            raise BuildError(f"KUEUE_JF_PINS={env} does not contain build.sh and kueue/go.mod")
        return path
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for parent in (start, *start.parents):
            candidate = parent / "tests" / "cluster"
            if _is_pins_dir(candidate):
                return candidate
    raise BuildError(
        "cannot find tests/cluster/build.sh; run from a checkout of kueue-jobframework "
        "or set KUEUE_JF_PINS=/path/to/checkout/tests/cluster"
    )


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the Go toolchain (go) is not on PATH; it is needed to build the cluster")
    return go


def _script(*args: str) -> str:
    script = pins_dir() / "build.sh"
    proc = subprocess.run(
        ["bash", str(script), *args], check=False, stdout=subprocess.PIPE, text=True
    )
    if proc.returncode != 0 and args != ("--check",):
        raise BuildError(f"{script} {' '.join(args)} failed with exit code {proc.returncode}")
    return proc.stdout.strip()


def bin_dir() -> Path:
    """The directory the current pins build into (may not exist yet)."""
    return Path(_script("--print-dir").splitlines()[-1])


def is_built() -> bool:
    return (bin_dir() / ".complete").is_file()


def build() -> Path:
    """Build if needed (progress on stderr) and return the bin directory."""
    _go()
    script = pins_dir() / "build.sh"
    proc = subprocess.run(["bash", str(script)], check=False, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{script} failed with exit code {proc.returncode}; see its output above")
    out = Path(proc.stdout.strip().splitlines()[-1])
    missing = [c for c in COMPONENTS if not (out / c).is_file()]
    if missing:
        raise BuildError(f"build finished but {out} lacks {missing}")
    return out


@dataclass(frozen=True)
class ModuleSource:
    path: str
    version: str
    dir: Path


def module_source(pin_module: str, module: str) -> ModuleSource:
    """The extracted source of ``module`` as pinned by ``tests/cluster/<pin_module>``.

    ``go mod download`` restores it if the module cache was cleaned (it is a no-op
    when the module is present).
    """
    cwd = pins_dir() / pin_module
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"}
    proc = subprocess.run(
        [_go(), "mod", "download", "-json", module],
        cwd=cwd,
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise BuildError(f"go mod download {module} in {cwd}: {proc.stderr or proc.stdout}")
    info = json.loads(proc.stdout)
    if info.get("Error"):
        raise BuildError(f"go mod download {module}: {info['Error']}")
    return ModuleSource(str(info["Path"]), str(info["Version"]), Path(info["Dir"]))
