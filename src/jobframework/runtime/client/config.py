"""Connection configuration: kubeconfig and in-cluster service account, via kubernetes-asyncio.

kubernetes-asyncio does the parsing and the credential plumbing (client certificates,
bearer tokens, token files, ``exec`` credential plugins, the mounted service-account
token with its periodic re-read). This module only wraps it so that:

- nothing touches kubernetes-asyncio's process-global default ``Configuration``
  (the manager must be embeddable; two clients for two clusters must coexist);
- the kubeconfig file is never rewritten (``persist_config=False``);
- a client can ask for fresh credentials after a ``401`` (:meth:`Credentials.refresh`),
  which is how client-go's exec authenticator recovers from an expired token.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ._lean_import import import_lean

import_lean()  # before the first kubernetes_asyncio import: its generated APIs stay unloaded

from kubernetes_asyncio import client as k8s_client  # noqa: E402
from kubernetes_asyncio import config as k8s_config  # noqa: E402

#: Where a pod finds its service-account credentials (as client-go's ``rest.InClusterConfig``).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"


class ConfigError(Exception):
    """No usable cluster configuration (missing kubeconfig, not in a pod, bad context)."""


@attrs.define
class Credentials:
    """A kubernetes-asyncio ``Configuration`` plus a way to reload its credentials.

    ``configuration`` is what :class:`kubernetes_asyncio.client.ApiClient` is built from.
    ``refresh`` re-runs the loader (re-executes an ``exec`` plugin, re-reads a token file);
    it is None when the credentials are static.
    """

    configuration: Any
    source: str
    _loader: Any = None

    async def refresh(self) -> bool:
        """Reload credentials in place; False when there is nothing to reload.

        Called after a ``401``: a credential the server refused is stale whatever its
        claimed expiry, so kubernetes-asyncio's cached ``exec`` result is dropped and the
        plugin really runs again (client-go's exec authenticator does the same).
        """
        if self._loader is None:
            return False
        with contextlib.suppress(AttributeError):
            delattr(self._loader, "exec_plugin_expiry")
        result = self._loader.load_and_set(self.configuration)
        if hasattr(result, "__await__"):
            await result
        return True

    async def refresh_if_expired(self) -> None:
        """Re-run an ``exec`` plugin whose credential has passed its ``expirationTimestamp``
        (kubernetes-asyncio only checks that when asked to load again)."""
        expiry = getattr(self._loader, "exec_plugin_expiry", None)
        if isinstance(expiry, dt.datetime):
            now = dt.datetime.now(dt.UTC)
            if expiry.tzinfo is None:
                now = now.replace(tzinfo=None)
            if now >= expiry:
                await self.refresh()


def _new_configuration() -> Any:
    # type.__call__ bypasses kubernetes-asyncio's metaclass, which would otherwise hand back
    # a copy of the process-global default configuration.
    return type.__call__(k8s_client.Configuration)


def _default_kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def in_cluster_available(environ: Mapping[str, str] | None = None,
                         sa_dir: str = SERVICE_ACCOUNT_DIR) -> bool:
    """True when running in a pod: the service env vars are set and the token is mounted."""
    env = os.environ if environ is None else environ
    return bool(env.get(SERVICE_HOST_ENV)) and bool(env.get(SERVICE_PORT_ENV)) and \
        os.path.isfile(os.path.join(sa_dir, "token"))


async def load_kubeconfig(path: str | None = None, context: str | None = None) -> Credentials:
    """Credentials from a kubeconfig file.

    ``path`` defaults to ``$KUBECONFIG`` (a ``:``-separated list is merged), then
    ``~/.kube/config``; ``context`` defaults to the file's
    ``current-context``. Supports client certificates, tokens, token files and ``exec``
    plugins (whatever kubernetes-asyncio supports).
    """
    config_file = path or _default_kubeconfig()
    cfg = _new_configuration()
    try:
        loader = await k8s_config.load_kube_config(
            config_file=config_file, context=context, client_configuration=cfg,
            persist_config=False,
        )
    except (k8s_config.ConfigException, OSError) as exc:
        raise ConfigError(f"cannot load kubeconfig {config_file!r}: {exc}") from exc
    return Credentials(cfg, source=f"kubeconfig:{config_file}", loader=loader)


def load_in_cluster(*, environ: Mapping[str, str] | None = None,
                    sa_dir: str = SERVICE_ACCOUNT_DIR) -> Credentials:
    """Credentials from the pod's service account (token re-read as it rotates)."""
    from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

    cfg = _new_configuration()
    loader = InClusterConfigLoader(
        token_filename=os.path.join(sa_dir, "token"),
        cert_filename=os.path.join(sa_dir, "ca.crt"),
        try_refresh_token=True,
        environ=dict(os.environ if environ is None else environ),
    )
    try:
        loader.load_and_set(cfg)
    except (k8s_config.ConfigException, OSError) as exc:
        raise ConfigError(f"not running in a cluster: {exc}") from exc
    return Credentials(cfg, source="in-cluster", loader=loader)


async def load_auto(path: str | None = None, context: str | None = None) -> Credentials:
    """The first configuration found, in controller-runtime's ``config.GetConfig`` order.

    An explicit ``path``, then ``$KUBECONFIG``, then the pod's service account, then
    ``~/.kube/config``.
    """
    if path is None and not os.environ.get("KUBECONFIG") and in_cluster_available():
        return load_in_cluster()
    return await load_kubeconfig(path, context)
