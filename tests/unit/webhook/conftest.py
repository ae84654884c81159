"""Fixtures for webhook tests: serving certificates, a running server, request builders."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GroupVersionResource
from jobframework.webhook import (
    AdmissionRequest,
    CertificateAuthority,
    Operation,
    ServingCerts,
    UserInfo,
    WebhookServer,
    write_serving_certs,
)

JOBS = GroupVersionResource("batch", "v1", "jobs")


def job_object(name: str = "job", **spec: Any) -> dict[str, Any]:
    """A batch/v1 Job with a field this library has never heard of."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}},
        "spec": {"parallelism": 2, "futureField": {"keep": ["me"]}, **spec},
    }


@pytest.fixture(scope="session")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate()


@pytest.fixture
def certs(tmp_path: Path, ca: CertificateAuthority) -> ServingCerts:
    return write_serving_certs(tmp_path / "certs", ca=ca)


@pytest.fixture
def client_ssl(certs: ServingCerts) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs.ca_file))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def server(certs: ServingCerts, clock: ManualClock) -> AsyncIterator[WebhookServer]:
    srv = WebhookServer(cert_dir=certs.cert_dir, clock=clock, cert_poll_interval=10.0,
                        shutdown_timeout=5.0)
    yield srv
    await srv.stop()


@pytest.fixture
def make_request() -> Callable[..., AdmissionRequest]:
    counter = iter(range(1, 1_000_000))

    def build(
        operation: Operation | str,
        obj: dict[str, Any] | None = None,
        old: dict[str, Any] | None = None,
        **kw: Any,
    ) -> AdmissionRequest:
        return AdmissionRequest.for_object(
            operation, obj, old, resource=JOBS, uid=f"uid-{next(counter)}",
            user_info=UserInfo(username="alice", groups=("devs",)), **kw,
        )

    return build


@pytest.fixture
def job() -> Callable[..., dict[str, Any]]:
    return job_object
