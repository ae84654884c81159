"""``python -m integrations.deploy``: render the in-cluster manifests from the code.

- ``render --output config/default``: write the kustomize base there and the cert-manager
  overlay beside it (``config/cert-manager``; ``--cert-manager-output`` elsewhere,
  ``--no-cert-manager-overlay`` not at all);
- ``rbac``: print the ClusterRole, Roles and bindings (what ``rbac.yaml`` holds);
- ``kueue-config [FILE|-]``: read Kueue's ConfigMap (or a bare Configuration document)
  and print it with our integrations in ``integrations.externalFrameworks`` and the
  built-ins they replace switched off.

See ``docs/deploy.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from integrations.catalog import DEFAULT_INTEGRATIONS, parse_integrations
from jobframework.config import CONFIGMAP_KEY, DEFAULT_CONFIGMAP_NAME
from jobframework.config import DEFAULT_NAMESPACE as KUEUE_NAMESPACE
from jobframework.plugins import IntegrationLoadError

from .kueue_config import KueueConfigPatchError, patch_configmap, patch_configuration
from .render import DEFAULT_IMAGE, DEFAULT_NAMESPACE, rbac_manifests, to_yaml, write

__all__ = ["main"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--integrations", type=parse_integrations, default=DEFAULT_INTEGRATIONS,
                        help=f"comma-separated integrations the manager runs, by the "
                             "names installed distributions declare (entry-point group "
                             "kueue_jobframework.integrations) (default: "
                             f"{','.join(DEFAULT_INTEGRATIONS)})")
    parser.add_argument("--kueue-namespace", default=KUEUE_NAMESPACE,
                        help=f"Kueue's namespace, where its ConfigMap is (default: "
                             f"{KUEUE_NAMESPACE})")
    parser.add_argument("--kueue-configmap", default=DEFAULT_CONFIGMAP_NAME,
                        help=f"Kueue's ConfigMap (default: {DEFAULT_CONFIGMAP_NAME})")


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="In-cluster manifests of the external-framework manager, from the code.")
    sub = parser.add_subparsers(dest="command", required=True)

    r = sub.add_parser("render", help="write the kustomize base and the cert-manager overlay")
    r.add_argument("--output", type=Path, required=True,
                   help="directory of the base (the repository's is config/default)")
    r.add_argument("--cert-manager-output", type=Path, default=None,
                   help="directory of the cert-manager overlay (default: cert-manager beside "
                        "--output)")
    r.add_argument("--no-cert-manager-overlay", action="store_true",
                   help="write no cert-manager overlay")
    r.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                   help=f"the manager's namespace (default: {DEFAULT_NAMESPACE})")
    r.add_argument("--image", default=DEFAULT_IMAGE,
                   help=f"the manager's image (default: {DEFAULT_IMAGE})")
    r.add_argument("--replicas", type=int, default=2, help="manager replicas (default: 2)")
    r.add_argument("--cert-management", choices=("internal", "cert-manager"),
                   default="internal",
                   help="internal: the manager issues its serving certificate (default); "
                        "cert-manager: a base in the cert-manager form, without overlay")
    _common(r)

    b = sub.add_parser("rbac", help="print the RBAC (ClusterRole, Roles, bindings) as YAML")
    b.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                   help=f"the manager's namespace (default: {DEFAULT_NAMESPACE})")
    _common(b)

    k = sub.add_parser(
        "kueue-config",
        help="print Kueue's ConfigMap (or Configuration) changed to run beside us",
        description="Read Kueue's ConfigMap (kubectl get -o yaml) or a bare Configuration "
                    "document and print it with the integrations added to "
                    "integrations.externalFrameworks and the built-in frameworks they "
                    "replace removed from integrations.frameworks.")
    k.add_argument("input", nargs="?", default="-",
                   help="the ConfigMap or Configuration YAML file ('-': standard input)")
    k.add_argument("--integrations", type=parse_integrations, default=DEFAULT_INTEGRATIONS,
                   help=f"comma-separated integrations the manager runs (default: "
                        f"{','.join(DEFAULT_INTEGRATIONS)})")
    k.add_argument("--key", default=CONFIGMAP_KEY,
                   help=f"the ConfigMap key holding the Configuration (default: "
                        f"{CONFIGMAP_KEY})")
    return parser


def _kueue_config(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text("utf-8")
    document: Any = yaml.safe_load(text)
    if not isinstance(document, dict):
        print("kueue-config: the input is not a YAML mapping", file=sys.stderr)
        return 2
    try:
        if document.get("kind") == "ConfigMap":
            out = patch_configmap(document, args.integrations, key=args.key)
        else:
            out = patch_configuration(document, args.integrations)
    except KueueConfigPatchError as err:
        print(f"kueue-config: {err}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump(out, sort_keys=False))
    return 0


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m integrations.deploy"
         ) -> int:
    """Entry point: ``argv`` without the program name (default: ``sys.argv[1:]``);
    ``prog`` is the name usage messages show. Returns the exit code."""
    args = _parser(prog).parse_args(argv)
    try:
        return _command(args)
    except IntegrationLoadError as err:
        print(f"{args.command}: {err}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    if args.command == "render":
        overlay = None if args.no_cert_manager_overlay or args.cert_management != "internal" \
            else (args.cert_manager_output or args.output.resolve().parent / "cert-manager")
        for path in write(args.output, args.integrations, cert_manager_directory=overlay,
                          namespace=args.namespace, image=args.image, replicas=args.replicas,
                          cert_management=args.cert_management,
                          kueue_namespace=args.kueue_namespace,
                          kueue_configmap=args.kueue_configmap):
            print(path)
        return 0
    if args.command == "rbac":
        sys.stdout.write(to_yaml(rbac_manifests(
            args.integrations, namespace=args.namespace, kueue_namespace=args.kueue_namespace,
            kueue_configmap=args.kueue_configmap)))
        return 0
    return _kueue_config(args)


if __name__ == "__main__":
    sys.exit(main())
