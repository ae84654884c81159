"""``python -m jobframework.scaffold``: write a new integration package for your own kind.

Example::

    python -m jobframework.scaffold --group analytics.example.com --version v1 \\
        --kind SparkApp --pod-sets driver:1,executor:3 --partial-admission executor \\
        --output sparkapp
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import TODO_MARKER, ScaffoldError, resolve, write


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(
        prog="python -m jobframework.scaffold",
        description="Write an installable kueue-jobframework integration package for a "
                    "Job-like kind of your own: API, CRD, GenericJob, controller, webhook, "
                    "setup, RBAC and tests (see docs/scaffold.md).")
    parser.add_argument("--group", required=True,
                        help="API group, a domain (e.g. analytics.example.com)")
    parser.add_argument("--version", required=True, help="API version (e.g. v1, v1alpha1)")
    parser.add_argument("--kind", required=True, help="Kind, CamelCase (e.g. SparkApp)")
    parser.add_argument("--output", required=True,
                        help="the project folder to write (pyproject.toml, src/, tests/)")
    parser.add_argument("--name", help="the integration's short name, as --integrations "
                        "takes it (default: the Kind in lower case)")
    parser.add_argument("--package", help="the Python package (default: <name>_integration)")
    parser.add_argument("--distribution",
                        help="the distribution's name (default: the package with dashes)")
    parser.add_argument("--plural",
                        help="the resource name (default: the Kind in lower case, plural)")
    parser.add_argument("--pod-sets", metavar="NAME[:COUNT],...",
                        help="the pod sets and their default pod counts, in the Workload's "
                             "order (default: main:1)")
    parser.add_argument("--partial-admission", metavar="POD_SET",
                        help="a pod set Kueue may admit with fewer pods, down to its "
                             "minReplicas")
    parser.add_argument("--force", action="store_true",
                        help="overwrite the project's files where they exist")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        resolved = resolve(
            group=args.group, version=args.version, kind=args.kind, name=args.name,
            package=args.package, distribution=args.distribution, plural=args.plural,
            pod_sets=args.pod_sets, partial_admission=args.partial_admission)
        written = write(resolved, args.output, force=args.force)
    except ScaffoldError as err:
        parser.error(f"{err.flag}: {err.detail}")
    for path in written:
        print(f"wrote {path}")
    print(f"\nThe {resolved.kind} integration {resolved.name!r} is in {args.output}. Next:\n"
          f"  cd {args.output} && pip install -e '.[test,lint]' && pytest\n"
          f"  grep -rn '{TODO_MARKER}' src     # the places to adapt to your kind\n"
          f"  python -m integrations run --integrations {resolved.name}\n"
          f"  python -m integrations.deploy render --integrations {resolved.name} "
          "--output deploy/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
