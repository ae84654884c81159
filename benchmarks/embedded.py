"""The batch/v1 Job integration embedded in a program of one's own: ``cluster.py
--embedded``'s manager, measured beside the shipped one (``python -m integrations run``).

What a user writes who runs an integration from their own main, as the docs show:
``Manager(client)``, the integration registered in an ``IntegrationManager``,
``setup_controllers(..., configuration=<Kueue's Configuration>)`` (worker counts,
feature gates and the rest from Kueue's own file), and ``jobframework.runtime.run``
around it (event loop, garbage collector, SIGTERM). The webhooks are served from this
process and registered by URL, as the shipped manager does out of a cluster.

    python benchmarks/embedded.py --kubeconfig PATH --kueue-config PATH
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import sys
import tempfile

from integrations import batchjob
from integrations.manager import webhook_specs
from jobframework.config import load_configuration
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import setup_controllers
from jobframework.runtime import Manager, run
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK
from jobframework.webhook import (
    WebhookServer,
    mutating_webhook_configuration,
    validating_webhook_configuration,
    write_serving_certs,
)

MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
#: The webhook configurations' name (the shipped manager's is ``kueue-jobframework``).
WEBHOOK_CONFIGURATION = "kueue-jobframework-embedded"

log = logging.getLogger("embedded")


async def main(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Set up, serve, run until SIGTERM, clean up."""
    configuration = load_configuration(args.kueue_config)
    async with await RestClient.from_kubeconfig(args.kubeconfig) as client:
        mgr = Manager(client)
        integrations = IntegrationManager()
        batchjob.register(integrations)
        with tempfile.TemporaryDirectory(prefix="jf-embedded-webhook-") as cert_dir:
            certs = write_serving_certs(cert_dir, ("127.0.0.1", "localhost"))
            server = WebhookServer(cert_dir=cert_dir)
            done = await setup_controllers(mgr, integrations, configuration=configuration,
                                           webhook_server=server)
            if not done:
                raise SystemExit("setup_controllers set up nothing: does Kueue's "
                                 "Configuration list batch/v1 Jobs?")
            await server.listen()
            # The same webhook configurations as the shipped manager registers.
            mutating, validating = webhook_specs(list(server.handlers),
                                                 batchjob.webhook_resources())
            registered = []
            try:
                for gvk, build, specs in ((MUTATING, mutating_webhook_configuration, mutating),
                                          (VALIDATING, validating_webhook_configuration,
                                           validating)):
                    config = build(WEBHOOK_CONFIGURATION, specs, url=server.url(),
                                   ca_bundle=certs.ca_bundle)
                    with contextlib.suppress(NotFound):
                        await client.delete(gvk, WEBHOOK_CONFIGURATION)
                    await client.create(config)
                    registered.append(gvk)
                log.info("embedded batch/job manager running (webhooks at %s, %s workers)",
                         server.url(), mgr.group_kind_concurrency.get("Job.batch"))
                await mgr.start(stop)
            finally:
                for gvk in registered:
                    with contextlib.suppress(Exception):
                        await client.delete(gvk, WEBHOOK_CONFIGURATION)
                await server.stop()
    return 0


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--kueue-config", required=True, help="the file Kueue's --config reads")
    p.add_argument("--event-loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return run(functools.partial(main, args), event_loop=args.event_loop)


if __name__ == "__main__":
    sys.exit(cli())
