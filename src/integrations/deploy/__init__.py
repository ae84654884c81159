"""In-cluster deployment of the manager: manifests and RBAC rendered from the code.

- :func:`render` / :func:`write`: the kustomize base (``config/default``) and the
  cert-manager overlay (``config/cert-manager``), see :mod:`.render`;
- :func:`rules_for`: the RBAC of a manager running some integrations, gathered from the
  ``RBAC`` declarations next to the code (:mod:`.rbac`);
- :func:`patch_configmap` / :func:`patch_configuration`: the change to Kueue's
  Configuration (:mod:`.kueue_config`).

``python -m integrations.deploy render|rbac|kueue-config`` runs them; see
``docs/deploy.md``.
"""

from .kueue_config import (
    KueueConfigPatchError,
    configuration_patch,
    patch_configmap,
    patch_configuration,
)
from .rbac import (
    WEBHOOK_CONFIGURATION_NAME,
    integration_rbac,
    manager_rbac,
    rbac_objects,
    rules_for,
)
from .render import (
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    CertManagement,
    cert_manager_overlay,
    rbac_manifests,
    render,
    render_text,
    to_yaml,
    write,
)

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "WEBHOOK_CONFIGURATION_NAME",
    "CertManagement",
    "KueueConfigPatchError",
    "cert_manager_overlay",
    "configuration_patch",
    "integration_rbac",
    "manager_rbac",
    "patch_configmap",
    "patch_configuration",
    "rbac_manifests",
    "rbac_objects",
    "render",
    "render_text",
    "rules_for",
    "to_yaml",
    "write",
]
