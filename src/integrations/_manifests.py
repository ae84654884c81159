"""Reading the YAML manifests an integration ships in its package (``crds/``,
``samples/``), shared by the reference integrations."""

from __future__ import annotations

from importlib import resources

import yaml

from jobframework.runtime.objects import Object


def load_yaml_folder(package: str, folder: str) -> dict[str, list[Object]]:
    """File name → its YAML documents (empty documents skipped), for every ``*.yaml`` in
    ``folder`` of ``package``, in file-name order; fresh objects on every call."""
    out: dict[str, list[Object]] = {}
    root = resources.files(package).joinpath(folder)
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            docs = yaml.safe_load_all(entry.read_text(encoding="utf-8"))
            out[entry.name] = [d for d in docs if isinstance(d, dict)]
    return out
