"""The change a user makes to Kueue's Configuration so that our manager runs beside it.

Kueue keeps its Configuration as a YAML document inside the ``kueue-manager-config``
ConfigMap (key ``controller_manager_config.yaml``); a kustomize or strategic-merge patch
cannot edit one field of that string, so the change is made here, on the document:

- every integration we run is added to ``integrations.externalFrameworks`` (Kueue then
  leaves those kinds to us and treats them as Kueue-managed owners);
- Kueue's built-in integration for a kind we take over is removed from
  ``integrations.frameworks`` (what each integration declares it replaces,
  :attr:`jobframework.plugins.Integration.replaces_builtin`):
  ``workload.codeflare.dev/appwrapper`` when our ``appwrapper`` runs, ``batch/job`` when
  our ``batchjob`` does. Otherwise both Kueue and we would default, validate and
  reconcile the same objects.

:func:`configuration_patch` is the fragment to merge by hand (``config/default/
kueue-config-patch.yaml``); :func:`patch_configuration` / :func:`patch_configmap` apply
it to a document or ConfigMap (``python -m integrations.deploy kueue-config``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from jobframework.config import API_VERSION, CONFIGMAP_KEY, DEFAULT_JOB_FRAMEWORK_NAME
from jobframework.plugins import load_integrations
from jobframework.runtime.objects import Object

__all__ = [
    "KueueConfigPatchError",
    "configuration_patch",
    "external_frameworks",
    "patch_configmap",
    "patch_configuration",
    "replaced_builtins",
]

class KueueConfigPatchError(ValueError):
    """The Configuration cannot be changed as asked; the message says why."""


def external_frameworks(integrations: Sequence[str]) -> list[str]:
    """The ``integrations.externalFrameworks`` entries of the installed ``integrations``,
    in order."""
    return [i.framework_name for i in load_integrations(integrations)]


def replaced_builtins(integrations: Sequence[str]) -> list[str]:
    """The built-in frameworks Kueue must not run beside ``integrations``."""
    return [i.replaces_builtin for i in load_integrations(integrations)
            if i.replaces_builtin is not None]


def configuration_patch(integrations: Sequence[str]) -> Object:
    """The fragment of a Kueue Configuration to merge: ``integrations.externalFrameworks``
    (see :func:`replaced_builtins` for the entries to drop from ``frameworks``)."""
    return {"apiVersion": API_VERSION, "kind": "Configuration",
            "integrations": {"externalFrameworks": external_frameworks(integrations)}}


def patch_configuration(document: Mapping[str, Any], integrations: Sequence[str]
                        ) -> dict[str, Any]:
    """A copy of the Configuration ``document`` (as loaded from YAML) with ``integrations``
    added to ``externalFrameworks`` (entries already there kept, in place) and the
    built-ins they replace removed from ``frameworks``.

    Raises :class:`KueueConfigPatchError` when removing them would leave ``frameworks``
    empty: Kueue reads an empty (or missing) list as ``[batch/job]``, so ``batch/job``
    cannot be switched off that way.
    """
    out = copy.deepcopy(dict(document))
    section = out.get("integrations")
    section = dict(section) if isinstance(section, Mapping) else {}
    external = list(section.get("externalFrameworks") or [])
    for name in external_frameworks(integrations):
        if name not in external:
            external.append(name)
    section["externalFrameworks"] = external
    replaced = replaced_builtins(integrations)
    frameworks = section.get("frameworks")
    current = list(frameworks) if frameworks else [DEFAULT_JOB_FRAMEWORK_NAME]
    kept = [f for f in current if f not in replaced]
    if kept != current:
        if not kept:
            raise KueueConfigPatchError(
                "integrations.frameworks would be empty, which Kueue reads as "
                f"[{DEFAULT_JOB_FRAMEWORK_NAME}]: keep at least one other built-in framework "
                f"enabled to switch off {', '.join(sorted(set(current) & set(replaced)))}")
        section["frameworks"] = kept
    out["integrations"] = section
    return out


def patch_configmap(configmap: Mapping[str, Any], integrations: Sequence[str], *,
                    key: str = CONFIGMAP_KEY) -> Object:
    """A copy of Kueue's ConfigMap with its Configuration (under ``key``) patched by
    :func:`patch_configuration`; server-set metadata is dropped so the result can be
    applied. Comments in the embedded document are not kept."""
    data = configmap.get("data") or {}
    if key not in data:
        raise KueueConfigPatchError(f"the ConfigMap has no {key!r} key (keys: "
                                    f"{', '.join(sorted(data)) or 'none'})")
    document = yaml.safe_load(data[key]) or {}
    if not isinstance(document, Mapping):
        raise KueueConfigPatchError(f"{key!r} does not hold a YAML mapping")
    patched = patch_configuration(document, integrations)
    meta = configmap.get("metadata") or {}
    out: Object = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels",
                                                          "annotations") if k in meta},
        "data": {**data, key: yaml.safe_dump(patched, sort_keys=False)},
    }
    annotations = out["metadata"].get("annotations")
    if isinstance(annotations, dict):
        # kubectl's client-side apply record would carry the old document.
        annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
        if not annotations:
            del out["metadata"]["annotations"]
    return out
