"""Webhook certificates managed by the manager itself (Kueue's internal cert management).

Kueue (``pkg/util/cert``) runs open-policy-agent/cert-controller's ``rotator.CertRotator``
in every replica: a self-signed CA and a serving certificate live in a Secret, the
serving certificate is renewed before it expires, and the CA is patched into the
``caBundle`` of the webhook configurations. :class:`CertRotator` does the same in
asyncio, with the same defaults (CA 10 years, serving certificate 1 year, renewal 90 days
before expiry, a check every 12 hours, DNS name ``<service>.<namespace>.svc``), and:

- it creates the Secret when it is missing, and replaces one that holds no usable CA
  (saying why in the log); a valid Secret is adopted as it is;
- it writes ``tls.crt``, ``tls.key`` and ``ca.crt`` into the webhook server's
  ``cert_dir`` itself (the server's :class:`~.certwatcher.CertWatcher` picks them up), so
  no Secret volume is needed;
- replicas coordinate only through the Secret's ``resourceVersion``: a write that fails
  with ``Conflict``/``AlreadyExists`` means another replica wrote first, and the rotator
  re-reads and uses what that replica stored (so they all converge on one CA);
- a CA rotation keeps admission working: the new CA is first added to ``caBundle`` next
  to the old one, serving certificates switch to the new CA only once every webhook
  trusts it (and ``bundle_propagation_delay`` has passed), and the old CA leaves
  ``caBundle`` only after ``previous_ca_retention`` (by then every replica has re-read
  the Secret). cert-controller regenerates CA and certificate at once instead, leaving a
  short window in which the API server does not trust the served certificate.

Secret layout: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` as cert-controller writes
them (so a Secret written by Kueue's Go manager is adopted), plus during a CA rotation
``next-ca.crt``/``next-ca.key`` (the staged CA) or ``previous-ca.crt`` (the retired one),
with the times in the annotations :data:`NEXT_CA_SINCE_ANNOTATION` and
:data:`PREVIOUS_CA_UNTIL_ANNOTATION`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from jobframework.runtime import errors
from jobframework.runtime.client.interface import Client
from jobframework.runtime.clock import Clock, RealClock, parse_time, rfc3339
from jobframework.runtime.healthz import Checker
from jobframework.runtime.objects import GVK, Object, deep_copy

from .certs import CertificateAuthority

__all__ = [
    "CA_CERT_KEY",
    "CA_KEY_KEY",
    "DEFAULT_BUNDLE_PROPAGATION_DELAY",
    "DEFAULT_CA_VALIDITY",
    "DEFAULT_CERT_VALIDITY",
    "DEFAULT_CHECK_INTERVAL",
    "DEFAULT_LOOKAHEAD",
    "MUTATING_WEBHOOK_CONFIGURATION",
    "NEXT_CA_CERT_KEY",
    "NEXT_CA_KEY_KEY",
    "NEXT_CA_SINCE_ANNOTATION",
    "PREVIOUS_CA_CERT_KEY",
    "PREVIOUS_CA_UNTIL_ANNOTATION",
    "SECRET",
    "TLS_CERT_KEY",
    "TLS_KEY_KEY",
    "VALIDATING_WEBHOOK_CONFIGURATION",
    "CertRotator",
    "CertificateSet",
    "RefreshResult",
]

log = logging.getLogger("jobframework.webhook.certrotator")

SECRET: Final = GVK("", "v1", "Secret")
MUTATING_WEBHOOK_CONFIGURATION: Final = GVK(
    "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_WEBHOOK_CONFIGURATION: Final = GVK(
    "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")

#: Secret keys, as cert-controller names them.
CA_CERT_KEY: Final = "ca.crt"
CA_KEY_KEY: Final = "ca.key"
TLS_CERT_KEY: Final = "tls.crt"
TLS_KEY_KEY: Final = "tls.key"
#: Secret keys that exist only during a CA rotation (this implementation's own).
NEXT_CA_CERT_KEY: Final = "next-ca.crt"
NEXT_CA_KEY_KEY: Final = "next-ca.key"
PREVIOUS_CA_CERT_KEY: Final = "previous-ca.crt"
_ANNOTATION_PREFIX: Final = "certrotator.jobframework.x-k8s.io/"
#: When the staged CA was added (RFC 3339): it signs nothing before
#: ``bundle_propagation_delay`` has passed and every webhook trusts it.
NEXT_CA_SINCE_ANNOTATION: Final = _ANNOTATION_PREFIX + "next-ca-since"
#: Until when the retired CA stays in ``caBundle`` (RFC 3339).
PREVIOUS_CA_UNTIL_ANNOTATION: Final = _ANNOTATION_PREFIX + "previous-ca-until"

# cert-controller v0.16 pkg/rotator: defaultCaCertValidityDuration,
# defaultServerCertValidityDuration, defaultLookaheadInterval, defaultRotationCheckFrequency.
DEFAULT_CA_VALIDITY: Final = dt.timedelta(days=10 * 365)
DEFAULT_CERT_VALIDITY: Final = dt.timedelta(days=365)
DEFAULT_LOOKAHEAD: Final = dt.timedelta(days=90)
DEFAULT_CHECK_INTERVAL: Final = dt.timedelta(hours=12)
#: How long a new CA sits in every ``caBundle`` before serving certificates use it (the
#: API server's webhook-configuration cache must have seen it). Not in cert-controller.
DEFAULT_BUNDLE_PROPAGATION_DELAY: Final = dt.timedelta(minutes=1)

#: How often one refresh re-reads the Secret after a write conflict before giving up.
_MAX_WRITE_ATTEMPTS: Final = 8
#: Shortest wait between two scheduled checks (seconds).
_MIN_CHECK_SECONDS: Final = 1.0


@attrs.frozen
class CertificateSet:
    """What the rotator keeps in its Secret (all PEM).

    ``ca_cert``/``ca_key`` sign ``serving_cert``. During a CA rotation ``next_ca_*`` is the
    staged CA (trusted, not yet signing) and ``previous_ca_cert`` the retired one (still
    trusted until ``previous_ca_until``).
    """

    ca_cert: bytes
    ca_key: bytes
    serving_cert: bytes
    serving_key: bytes
    next_ca_cert: bytes | None = None
    next_ca_key: bytes | None = None
    next_ca_since: dt.datetime | None = None
    previous_ca_cert: bytes | None = None
    previous_ca_until: dt.datetime | None = None

    @property
    def ca(self) -> CertificateAuthority:
        """The CA that signs the serving certificate."""
        return CertificateAuthority(self.ca_cert, self.ca_key)

    @property
    def ca_bundle(self) -> bytes:
        """The CAs webhooks must trust: the current one, then the staged and the retired one."""
        parts: list[bytes] = []
        for pem in (self.ca_cert, self.next_ca_cert, self.previous_ca_cert):
            if pem and pem not in parts:
                parts.append(pem if pem.endswith(b"\n") else pem + b"\n")
        return b"".join(parts)


@attrs.frozen
class RefreshResult:
    """What one :meth:`CertRotator.refresh_once` did."""

    #: The certificates now in the Secret (and in ``cert_dir``).
    certificates: CertificateSet
    #: What changed in the Secret, in words ("created a new CA ...", "renewed ..."); empty
    #: when the stored certificates were used as they were.
    actions: tuple[str, ...]
    #: True when this rotator wrote the Secret (False when it adopted another's write).
    secret_written: bool
    #: True when a file in ``cert_dir`` changed.
    files_written: bool
    #: ``Kind/name`` of the webhook configurations whose ``caBundle`` was updated.
    configurations_patched: tuple[str, ...]
    #: When the next check is due (at most ``check_interval``; sooner when a certificate
    #: enters the lookahead window or a CA rotation step is due before).
    next_check: dt.timedelta


class CertRotator:
    """Keeps the webhook serving certificate, its CA Secret and ``caBundle`` current.

    A manager runnable (``manager.add(rotator)``) that runs in every replica
    (:meth:`need_leader_election` is False, as Kueue sets ``RequireLeaderElection:
    false``): :meth:`start` checks at once, then every ``check_interval`` (sooner when a
    rotation step is due), and, with ``watch=True``, whenever the Secret or a webhook
    configuration changes (another replica rotated, someone reset ``caBundle``).
    Failures are logged and retried with backoff; readiness stays false until one check
    has written the files and patched every ``caBundle``.

    ``client`` must read from the API server, not from an informer cache
    (``manager.get_api_reader()``): writes based on a stale read fail with ``Conflict``.

    Args:
        client: the API client.
        secret_namespace: namespace of the Secret (Kueue: the manager's namespace).
        secret_name: name of the Secret (Kueue: ``kueue-webhook-server-cert``).
        service_name: the webhook Service; the certificate is for
            ``<service_name>.<service_namespace>.svc``.
        service_namespace: defaults to ``secret_namespace``.
        extra_dns_names: more names for the serving certificate.
        cert_dir: where the webhook server reads its certificate files.
        mutating_webhooks: names of MutatingWebhookConfigurations whose every webhook
            gets the ``caBundle``.
        validating_webhooks: the same for ValidatingWebhookConfigurations.
        ca_name: the CA's common name (Kueue: ``kueue-ca``).
        ca_validity: lifetime of a new CA (10 years).
        cert_validity: lifetime of a new serving certificate (1 year).
        lookahead: renew a certificate once it expires within this window (90 days); must
            be shorter than both validities.
        check_interval: time between checks (12 hours).
        bundle_propagation_delay: how long a new CA is in ``caBundle`` before it signs.
        previous_ca_retention: how long a retired CA stays in ``caBundle``; default
            ``check_interval + bundle_propagation_delay``, by when every replica has
            checked (and switched to the new serving certificate) at least once.
        clock: time source (a ManualClock in tests).
        watch: watch the Secret and the configurations to react at once.
        cert_name, key_name, ca_file_name: file names in ``cert_dir``.
        field_manager: field manager of the writes.
        retry_initial, retry_max: backoff (seconds) after a failed check.
        watch_retry: seconds between attempts to re-open a failed watch.
    """

    def __init__(
        self,
        client: Client,
        *,
        secret_namespace: str,
        secret_name: str,
        service_name: str,
        cert_dir: str | Path,
        service_namespace: str | None = None,
        extra_dns_names: Sequence[str] = (),
        mutating_webhooks: Sequence[str] = (),
        validating_webhooks: Sequence[str] = (),
        ca_name: str = "jobframework-webhook-ca",
        ca_validity: dt.timedelta = DEFAULT_CA_VALIDITY,
        cert_validity: dt.timedelta = DEFAULT_CERT_VALIDITY,
        lookahead: dt.timedelta = DEFAULT_LOOKAHEAD,
        check_interval: dt.timedelta = DEFAULT_CHECK_INTERVAL,
        bundle_propagation_delay: dt.timedelta = DEFAULT_BUNDLE_PROPAGATION_DELAY,
        previous_ca_retention: dt.timedelta | None = None,
        clock: Clock | None = None,
        watch: bool = True,
        cert_name: str = TLS_CERT_KEY,
        key_name: str = TLS_KEY_KEY,
        ca_file_name: str = CA_CERT_KEY,
        field_manager: str = "jobframework-cert-rotator",
        retry_initial: float = 1.0,
        retry_max: float = 300.0,
        watch_retry: float = 10.0,
    ) -> None:
        if not secret_namespace or not secret_name:
            raise ValueError("the Secret needs a namespace and a name")
        if not service_name:
            raise ValueError("service_name is required (the certificate is for its DNS name)")
        for label, validity in (("cert_validity", cert_validity), ("ca_validity", ca_validity)):
            if lookahead >= validity:
                raise ValueError(
                    f"lookahead ({lookahead}) must be shorter than {label} ({validity}), "
                    "or every check would rotate")
        if check_interval <= dt.timedelta(0):
            raise ValueError("check_interval must be positive")
        if bundle_propagation_delay < dt.timedelta(0):
            raise ValueError("bundle_propagation_delay must not be negative")
        self._client = client
        self.secret_namespace = secret_namespace
        self.secret_name = secret_name
        self.service_name = service_name
        self.service_namespace = service_namespace or secret_namespace
        self.dns_name = f"{self.service_name}.{self.service_namespace}.svc"
        self.dns_names: tuple[str, ...] = tuple(dict.fromkeys((self.dns_name, *extra_dns_names)))
        self.cert_dir = Path(cert_dir)
        self.mutating_webhooks = tuple(mutating_webhooks)
        self.validating_webhooks = tuple(validating_webhooks)
        self.ca_name = ca_name
        self.ca_validity = ca_validity
        self.cert_validity = cert_validity
        self.lookahead = lookahead
        self.check_interval = check_interval
        self.bundle_propagation_delay = bundle_propagation_delay
        self.previous_ca_retention = (previous_ca_retention if previous_ca_retention is not None
                                      else check_interval + bundle_propagation_delay)
        self.watch = watch
        self._listeners: list[Callable[[], object]] = []
        self.cert_name = cert_name
        self.key_name = key_name
        self.ca_file_name = ca_file_name
        self.field_manager = field_manager
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.watch_retry = watch_retry
        self._clock: Clock = clock or RealClock()
        self._ready = asyncio.Event()
        self._trigger = asyncio.Event()
        self._lock = asyncio.Lock()
        self._missing: set[str] = set()
        self._current: CertificateSet | None = None

    def __repr__(self) -> str:
        return f"CertRotator({self.secret_namespace}/{self.secret_name})"

    # -- manager integration --------------------------------------------------------

    def need_leader_election(self) -> bool:
        """False: every replica serves webhooks, so every replica keeps its files current."""
        return False

    @property
    def is_ready(self) -> bool:
        """True once a check has written the files and patched every ``caBundle``."""
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once :attr:`is_ready` (start the webhook server after this)."""
        await self._ready.wait()

    def add_listener(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` each time new certificate files are written, e.g. the
        webhook server's ``cert_watcher.read_certificate`` (so it serves them at once)."""
        self._listeners.append(callback)

    def checker(self) -> Checker:
        """A readiness check (``manager.add_readyz_check``): fails until :attr:`is_ready`."""

        def check() -> None:
            if not self._ready.is_set():
                raise RuntimeError(
                    f"webhook certificates from secret {self.secret_namespace}/"
                    f"{self.secret_name} are not in {self.cert_dir} yet")

        return check

    @property
    def certificates(self) -> CertificateSet | None:
        """The certificates of the last successful check (None before)."""
        return self._current

    async def start(self) -> None:
        """Check now, then keep checking until cancelled (the manager's runnable contract)."""
        log.info("starting the certificate rotator for secret %s/%s (%s)",
                 self.secret_namespace, self.secret_name, ", ".join(self.dns_names))
        watches: list[asyncio.Task[None]] = []
        if self.watch:
            targets: list[tuple[GVK, str, str | None]] = [
                (SECRET, self.secret_name, self.secret_namespace)]
            targets += [(MUTATING_WEBHOOK_CONFIGURATION, n, None) for n in self.mutating_webhooks]
            targets += [(VALIDATING_WEBHOOK_CONFIGURATION, n, None)
                        for n in self.validating_webhooks]
            watches = [asyncio.create_task(self._watch(*t), name=f"certrotator-watch {t[1]}")
                       for t in targets]
        failures = 0
        try:
            while True:
                self._trigger.clear()
                try:
                    result = await self.refresh_once()
                except asyncio.CancelledError:
                    raise
                except Exception as err:
                    failures += 1
                    delay = min(self.retry_initial * 2 ** (failures - 1), self.retry_max,
                                self.check_interval.total_seconds())
                    log.error("checking the webhook certificates failed (attempt %d), "
                              "retrying in %.0fs: %s", failures, delay, err)
                else:
                    failures = 0
                    delay = result.next_check.total_seconds()
                await self._wait(delay)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            log.info("stopped the certificate rotator for secret %s/%s",
                     self.secret_namespace, self.secret_name)

    # -- one check --------------------------------------------------------------------

    async def refresh_once(self) -> RefreshResult:
        """One check: rotate in the Secret if due, write the files, patch ``caBundle``.

        Raises the API error that prevented it (the files are still written when only
        the ``caBundle`` patch failed); :meth:`start` logs it and retries.
        """
        async with self._lock:
            certs, actions, written = await self._sync_secret()
            files_written = self._write_files(certs)
            if files_written:
                log.info("wrote the webhook serving certificate to %s", self.cert_dir)
                # Serve it now: a server polling its files could keep the one signed by
                # a retired CA past the moment that CA leaves caBundle.
                for callback in self._listeners:
                    try:
                        callback()
                    except Exception:
                        log.exception("a certificate listener failed")
            self._current = certs
            patched = await self._inject(certs.ca_bundle)
            if not self._ready.is_set():
                log.info("webhook certificates are ready in %s and injected into the "
                         "webhook configurations", self.cert_dir)
                self._ready.set()
            return RefreshResult(certs, actions, written, files_written, patched,
                                 self._next_check(certs, self._clock.now()))

    async def _sync_secret(self) -> tuple[CertificateSet, tuple[str, ...], bool]:
        """Bring the Secret up to date; returns what it holds afterwards."""
        last: errors.ApiError | None = None
        for _ in range(_MAX_WRITE_ATTEMPTS):
            secret = await self._get_secret()
            now = self._clock.now()
            stored, problem = _from_secret(secret)
            trusted_next: bytes | None = None
            if (stored is not None and stored.next_ca_cert is not None
                    and stored.next_ca_since is not None
                    and now >= stored.next_ca_since + self.bundle_propagation_delay
                    and await self._bundles_trust(stored.next_ca_cert)):
                trusted_next = stored.next_ca_cert
            certs, actions = self._plan(stored, problem, secret is None, now, trusted_next)
            if certs == stored and stored is not None:
                return stored, (), False
            try:
                if secret is None:
                    await self._client.create(self._new_secret(certs),
                                              field_manager=self.field_manager)
                else:
                    await self._client.update(self._updated_secret(secret, certs),
                                              field_manager=self.field_manager)
            except (errors.Conflict, errors.AlreadyExists, errors.NotFound) as err:
                # Another replica wrote first (or the Secret went away): use the latest.
                log.info("secret %s/%s changed while rotating (%s); re-reading it",
                         self.secret_namespace, self.secret_name, err.reason or err)
                last = err
                continue
            for action in actions:
                log.info("secret %s/%s: %s", self.secret_namespace, self.secret_name, action)
            return certs, tuple(actions), True
        assert last is not None
        raise last

    async def _get_secret(self) -> Object | None:
        try:
            return await self._client.get(SECRET, self.secret_name,
                                          namespace=self.secret_namespace)
        except errors.NotFound:
            return None

    # -- what to store ----------------------------------------------------------------

    def _plan(
        self, stored: CertificateSet | None, problem: str | None, missing: bool,
        now: dt.datetime, trusted_next: bytes | None,
    ) -> tuple[CertificateSet, list[str]]:
        """The certificates the Secret should hold at ``now``, and why they changed.

        ``trusted_next`` is the staged CA when every webhook's ``caBundle`` was seen to
        trust it (only then may it sign).
        """
        where = f"{self.secret_namespace}/{self.secret_name}"
        if stored is not None:
            problem = _ca_problem(stored.ca_cert, stored.ca_key, now)
        if stored is None or problem:
            if missing:
                return self._generate(now, None), ["created a new CA and serving certificate"]
            if problem == "empty":
                log.info("secret %s holds no certificates yet; generating them", where)
            else:
                log.warning("secret %s does not hold a usable CA (%s); replacing it with a "
                            "new CA and serving certificate", where, problem)
            # A CA that still verifies the certificates being served stays trusted a while.
            keep = (stored.ca_cert if stored is not None and _valid_cert(stored.ca_cert, now)
                    else None)
            return self._generate(now, keep), [
                f"replaced the certificates (the stored CA was unusable: {problem})"]

        actions: list[str] = []
        certs = stored
        later = now + self.lookahead
        # A retired CA leaves caBundle once every replica has had time to switch.
        previous, until = certs.previous_ca_cert, certs.previous_ca_until
        if previous is not None:
            if not _valid_cert(previous, now) or (until is not None and now >= until):
                certs = attrs.evolve(certs, previous_ca_cert=None, previous_ca_until=None)
                actions.append("dropped the retired CA from the CA bundle")
            elif until is None:
                certs = attrs.evolve(certs, previous_ca_until=now + self.previous_ca_retention)
        # A staged CA that is broken, or itself about to expire, is discarded.
        if certs.next_ca_cert is not None:
            next_key = certs.next_ca_key or b""
            bad = (_ca_problem(certs.next_ca_cert, next_key, now)
                   or _ca_problem(certs.next_ca_cert, next_key, later)
                   or (None if _signing_key_ok(next_key) else
                       "its key type cannot sign"))
            if bad:
                certs = attrs.evolve(certs, next_ca_cert=None, next_ca_key=None,
                                     next_ca_since=None)
                actions.append(f"discarded the staged CA ({bad})")
            elif certs.next_ca_since is None:
                certs = attrs.evolve(certs, next_ca_since=now)
        # The CA enters its lookahead window (or cannot sign with this library): stage a
        # successor; it joins caBundle now and signs only once every webhook trusts it.
        ca_due = _ca_problem(certs.ca_cert, certs.ca_key, later)
        can_sign = _signing_key_ok(certs.ca_key)
        serving_problem = _serving_problem(certs, self.dns_names, now, later)
        serving_valid_now = _serving_problem(certs, (), now, now) is None
        # Stage a successor CA when the CA enters its lookahead window, or when the
        # serving certificate needs renewing and the CA's key is of a type this library
        # does not sign with (an RSA CA written by cert-controller). The successor joins
        # caBundle now and signs only once every webhook trusts it.
        roll = ca_due or (None if can_sign or not serving_problem
                          else "its key type cannot sign new certificates")
        if roll and certs.next_ca_cert is None and (can_sign or serving_valid_now):
            successor = CertificateAuthority.generate(self.ca_name, validity=self.ca_validity,
                                                      now=now)
            certs = attrs.evolve(certs, next_ca_cert=successor.cert_pem,
                                 next_ca_key=successor.key_pem, next_ca_since=now)
            actions.append(f"staged a new CA in the CA bundle (the current CA: {roll})")
        if (certs.next_ca_cert is not None and certs.next_ca_key is not None
                and certs.next_ca_since is not None
                and now >= certs.next_ca_since + self.bundle_propagation_delay):
            if trusted_next is not None and trusted_next == certs.next_ca_cert:
                successor = CertificateAuthority(certs.next_ca_cert, certs.next_ca_key)
                cert, key = self._issue(successor, now, ())
                certs = CertificateSet(
                    ca_cert=successor.cert_pem, ca_key=successor.key_pem, serving_cert=cert,
                    serving_key=key, previous_ca_cert=certs.ca_cert,
                    previous_ca_until=now + self.previous_ca_retention)
                actions.append("switched to the staged CA: new serving certificate, the "
                               "old CA stays in the CA bundle for now")
                return certs, actions
            # Some caBundle lacks it (reset by someone, or a patch failed): this check
            # patches it again, and the wait restarts so the API server sees the fix.
            log.warning("secret %s: the staged CA is not yet in the caBundle of every "
                        "webhook; serving certificates keep the current CA", where)
            certs = attrs.evolve(certs, next_ca_since=now)
            actions.append("restarted the wait of the staged CA (not yet in every caBundle)")
        if serving_problem:
            if certs.next_ca_cert is not None and serving_valid_now:
                pass  # still good; the switch to the staged CA renews it
            elif can_sign:
                kept = _dns_names(certs.serving_cert) if serving_valid_now else ()
                cert, key = self._issue(certs.ca, now, kept)
                certs = attrs.evolve(certs, serving_cert=cert, serving_key=key)
                actions.append(f"renewed the serving certificate ({serving_problem})")
            else:
                log.warning("secret %s: the serving certificate is unusable (%s) and the "
                            "CA cannot sign a new one; replacing both", where, serving_problem)
                return self._generate(now, certs.ca_cert), [
                    f"replaced the certificates (serving certificate: {serving_problem})"]
        return certs, actions

    def _generate(self, now: dt.datetime, previous: bytes | None) -> CertificateSet:
        ca = CertificateAuthority.generate(self.ca_name, validity=self.ca_validity, now=now)
        cert, key = self._issue(ca, now, ())
        return CertificateSet(
            ca_cert=ca.cert_pem, ca_key=ca.key_pem, serving_cert=cert, serving_key=key,
            previous_ca_cert=previous,
            previous_ca_until=now + self.previous_ca_retention if previous else None)

    def _issue(
        self, ca: CertificateAuthority, now: dt.datetime, kept_names: Iterable[str],
    ) -> tuple[bytes, bytes]:
        # Names another replica put on the certificate are kept, so replicas configured
        # with different extra names (during an upgrade) converge instead of taking turns.
        names = list(dict.fromkeys((*self.dns_names, *kept_names)))
        return ca.issue(names, common_name=self.dns_name, validity=self.cert_validity, now=now)

    def _next_check(self, certs: CertificateSet, now: dt.datetime) -> dt.timedelta:
        """When the next check is due: the interval, or sooner for a due rotation step."""
        due: list[dt.datetime] = [now + self.check_interval]
        for pem in (certs.ca_cert, certs.serving_cert):
            expiry = _not_after(pem)
            if expiry is not None:
                due.append(expiry - self.lookahead)
        if certs.next_ca_since is not None:
            due.append(certs.next_ca_since + self.bundle_propagation_delay)
        if certs.previous_ca_until is not None:
            due.append(certs.previous_ca_until)
        future = [d for d in due if d > now]
        wait = min(future) - now if future else self.check_interval
        return max(wait, dt.timedelta(seconds=_MIN_CHECK_SECONDS))

    # -- the Secret object ------------------------------------------------------------

    def _new_secret(self, certs: CertificateSet) -> Object:
        secret: Object = {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": self.secret_name, "namespace": self.secret_namespace},
        }
        return _fill_secret(secret, certs)

    def _updated_secret(self, current: Object, certs: CertificateSet) -> Object:
        return _fill_secret(deep_copy(current), certs)

    # -- files --------------------------------------------------------------------------

    def _write_files(self, certs: CertificateSet) -> bool:
        """Write what changed; the key before the certificate (a watcher retries a mismatch)."""
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        changed = False
        for name, data, mode in ((self.ca_file_name, certs.ca_cert, 0o644),
                                 (self.key_name, certs.serving_key, 0o600),
                                 (self.cert_name, certs.serving_cert, 0o644)):
            path = self.cert_dir / name
            try:
                if path.read_bytes() == data:
                    continue
            except FileNotFoundError:
                pass
            _atomic_write(path, data, mode)
            changed = True
        return changed

    # -- caBundle ---------------------------------------------------------------------

    def _configurations(self) -> list[tuple[GVK, str]]:
        return ([(MUTATING_WEBHOOK_CONFIGURATION, n) for n in self.mutating_webhooks]
                + [(VALIDATING_WEBHOOK_CONFIGURATION, n) for n in self.validating_webhooks])

    async def _get_configuration(self, gvk: GVK, name: str) -> Object | None:
        label = f"{gvk.kind}/{name}"
        try:
            obj = await self._client.get(gvk, name)
        except errors.NotFound:
            if label not in self._missing:
                log.warning("%s not found; cannot inject the CA bundle into it", label)
                self._missing.add(label)
            return None
        self._missing.discard(label)
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return obj

    async def _inject(self, bundle: bytes) -> tuple[str, ...]:
        """Set ``caBundle`` in every webhook of the configurations; names those updated."""
        encoded = base64.b64encode(bundle).decode()
        patched: list[str] = []
        failure: Exception | None = None
        for gvk, name in self._configurations():
            try:
                if await self._inject_one(gvk, name, encoded):
                    patched.append(f"{gvk.kind}/{name}")
            except errors.ApiError as err:
                log.error("cannot inject the CA bundle into %s/%s: %s", gvk.kind, name, err)
                failure = failure or err
        if failure is not None:
            raise failure
        return tuple(patched)

    async def _inject_one(self, gvk: GVK, name: str, encoded: str) -> bool:
        for attempt in range(_MAX_WRITE_ATTEMPTS):
            obj = await self._get_configuration(gvk, name)
            if obj is None:
                return False
            changed = False
            for hook in obj.get("webhooks") or []:
                config = hook.setdefault("clientConfig", {})
                if config.get("caBundle") != encoded:
                    config["caBundle"] = encoded
                    changed = True
            if not changed:
                return False
            try:
                await self._client.update(obj, field_manager=self.field_manager)
            except errors.Conflict:
                if attempt == _MAX_WRITE_ATTEMPTS - 1:
                    raise
                continue
            log.info("injected the CA bundle into %s/%s", gvk.kind, name)
            return True
        return False

    async def _bundles_trust(self, ca_pem: bytes) -> bool:
        """Whether every webhook of the configurations has ``ca_pem`` in its ``caBundle``."""
        wanted = _load_cert(ca_pem)
        if wanted is None:
            return False
        for gvk, name in self._configurations():
            obj = await self._get_configuration(gvk, name)
            if obj is None:
                continue
            for hook in obj.get("webhooks") or []:
                encoded = (hook.get("clientConfig") or {}).get("caBundle") or ""
                try:
                    trusted = x509.load_pem_x509_certificates(base64.b64decode(encoded))
                except (ValueError, binascii.Error):
                    return False
                if wanted not in trusted:
                    return False
        return True

    # -- waking up ----------------------------------------------------------------------

    async def _wait(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or until a watch reports a change."""
        sleep = asyncio.ensure_future(self._clock.sleep(seconds))
        trigger = asyncio.ensure_future(self._trigger.wait())
        try:
            await asyncio.wait({sleep, trigger}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleep.cancel()
            trigger.cancel()

    async def _watch(self, gvk: GVK, name: str, namespace: str | None) -> None:
        """Wake the check loop on every change of one object, re-watching as needed."""
        resource_version: str | None = None
        failures = 0
        while True:
            try:
                async for event in self._client.watch(
                        gvk, namespace=namespace, field_selector=f"metadata.name={name}",
                        resource_version=resource_version, allow_bookmarks=True,
                        timeout_seconds=600):
                    failures = 0
                    rv = (event.object.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        resource_version = str(rv)
                    if event.type != "BOOKMARK":
                        self._trigger.set()
            except asyncio.CancelledError:
                raise
            except errors.Gone:
                resource_version = None
            except Exception as err:
                failures += 1
                (log.warning if failures == 1 else log.debug)(
                    "watching %s %s failed, retrying in %.0fs: %s",
                    gvk.kind, name, self.watch_retry, err)
                resource_version = None
                await self._clock.sleep(self.watch_retry)


# -- Secret encoding ------------------------------------------------------------------------


def _fill_secret(secret: Object, certs: CertificateSet) -> Object:
    data: dict[str, Any] = dict(secret.get("data") or {})
    values: dict[str, bytes | None] = {
        CA_CERT_KEY: certs.ca_cert, CA_KEY_KEY: certs.ca_key,
        TLS_CERT_KEY: certs.serving_cert, TLS_KEY_KEY: certs.serving_key,
        NEXT_CA_CERT_KEY: certs.next_ca_cert, NEXT_CA_KEY_KEY: certs.next_ca_key,
        PREVIOUS_CA_CERT_KEY: certs.previous_ca_cert,
    }
    for key, value in values.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = base64.b64encode(value).decode()
    secret["data"] = data
    meta = secret.setdefault("metadata", {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    for key, when in ((NEXT_CA_SINCE_ANNOTATION, certs.next_ca_since),
                      (PREVIOUS_CA_UNTIL_ANNOTATION, certs.previous_ca_until)):
        if when is None:
            annotations.pop(key, None)
        else:
            annotations[key] = rfc3339(when)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return secret


def _from_secret(secret: Object | None) -> tuple[CertificateSet | None, str | None]:
    """The stored certificates, or None and why there are none."""
    if secret is None:
        return None, "missing"
    raw = secret.get("data") or {}
    if not isinstance(raw, Mapping) or not raw:
        return None, "empty"
    data: dict[str, bytes] = {}
    for key, value in raw.items():
        try:
            data[str(key)] = base64.b64decode(str(value), validate=True)
        except (ValueError, binascii.Error):
            if key in (CA_CERT_KEY, CA_KEY_KEY):
                return None, f"{key} is not base64"
            data[str(key)] = b""
    for key in (CA_CERT_KEY, CA_KEY_KEY):
        if not data.get(key):
            return None, f"no {key}"
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    previous = data.get(PREVIOUS_CA_CERT_KEY) or None
    next_cert = data.get(NEXT_CA_CERT_KEY) or None
    return CertificateSet(
        ca_cert=data[CA_CERT_KEY], ca_key=data[CA_KEY_KEY],
        serving_cert=data.get(TLS_CERT_KEY, b""), serving_key=data.get(TLS_KEY_KEY, b""),
        next_ca_cert=next_cert,
        next_ca_key=(data.get(NEXT_CA_KEY_KEY) or b"") if next_cert else None,
        next_ca_since=_parse_time(annotations.get(NEXT_CA_SINCE_ANNOTATION))
        if next_cert else None,
        previous_ca_cert=previous,
        previous_ca_until=_parse_time(annotations.get(PREVIOUS_CA_UNTIL_ANNOTATION))
        if previous else None,
    ), None


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = parse_time(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


# -- certificate checks --------------------------------------------------------------------


def _load_cert(pem: bytes) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _not_after(pem: bytes) -> dt.datetime | None:
    cert = _load_cert(pem)
    return cert.not_valid_after_utc if cert is not None else None


def _valid_cert(pem: bytes, at: dt.datetime) -> bool:
    cert = _load_cert(pem)
    return cert is not None and cert.not_valid_before_utc <= at < cert.not_valid_after_utc


def _public_der(cert_or_key: Any) -> bytes:
    public = cert_or_key.public_key()
    der: bytes = public.public_bytes(serialization.Encoding.DER,
                                     serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def _key_matches(cert: x509.Certificate, key_pem: bytes) -> bool:
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return _public_der(key) == _public_der(cert)


def _signing_key_ok(key_pem: bytes) -> bool:
    """Whether :meth:`CertificateAuthority.issue` can sign with this key (ECDSA)."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return isinstance(key, ec.EllipticCurvePrivateKey)


def _ca_problem(cert_pem: bytes, key_pem: bytes, at: dt.datetime) -> str | None:
    """Why this CA cannot be used at ``at`` (None when it can)."""
    cert = _load_cert(cert_pem)
    if cert is None:
        return "ca.crt is not a PEM certificate"
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "ca.crt is not a CA certificate"
    if not constraints.ca:
        return "ca.crt is not a CA certificate"
    if not _key_matches(cert, key_pem):
        return "ca.key does not match ca.crt"
    if at < cert.not_valid_before_utc:
        return f"the CA is not valid before {rfc3339(cert.not_valid_before_utc)}"
    if at >= cert.not_valid_after_utc:
        return f"the CA expires at {rfc3339(cert.not_valid_after_utc)}"
    return None


def _dns_names(cert_pem: bytes) -> tuple[str, ...]:
    cert = _load_cert(cert_pem)
    if cert is None:
        return ()
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(san.get_values_for_type(x509.DNSName))


def _serving_problem(
    certs: CertificateSet, names: Sequence[str], now: dt.datetime, later: dt.datetime,
) -> str | None:
    """Why the serving certificate must be renewed (None when it is good until ``later``).

    It must pair with its key, be signed by the CA, name every one of ``names``, allow
    server authentication, and be valid from ``now`` to ``later``.
    """
    cert = _load_cert(certs.serving_cert)
    ca = _load_cert(certs.ca_cert)
    if cert is None or ca is None:
        return "no serving certificate"
    if not _key_matches(cert, certs.serving_key):
        return "tls.key does not match tls.crt"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return "not signed by the CA"
    present = set(_dns_names(certs.serving_cert))
    absent = [n for n in names if n not in present]
    if absent:
        return f"does not name {', '.join(absent)}"
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and not ({ExtendedKeyUsageOID.SERVER_AUTH,
                                    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE} & set(usages)):
        return "not for server authentication"
    if now < cert.not_valid_before_utc:
        return f"not valid before {rfc3339(cert.not_valid_before_utc)}"
    if later >= cert.not_valid_after_utc:
        return f"expires at {rfc3339(cert.not_valid_after_utc)}"
    return None


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write to a temporary name and rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
