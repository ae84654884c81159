"""The AppWrapper operator configuration and the per-AppWrapper fault-tolerance annotations.

:class:`AppWrapperConfig` is the ``appwrapper`` section of upstream's operator ConfigMap
(``pkg/config``): Autopilot settings, the user RBAC admission check, the fault-tolerance
defaults and caps, and the scheduler / default queue names the controller and webhook
inject. :meth:`AppWrapperConfig.validate` applies upstream's ``ValidateAppWrapperConfig``
and :meth:`AppWrapperConfig.from_dict` reads the ConfigMap form (durations there are Go
``time.Duration`` JSON: integer nanoseconds).

The annotation readers (:func:`admission_grace_duration` ... :func:`retryable_exit_codes`)
turn an AppWrapper's ``workload.codeflare.dev.appwrapper/*`` annotations into the values
the controller uses, with Go's parsers reproduced exactly (:func:`parse_go_duration` is
``time.ParseDuration``, :func:`atoi` is ``strconv.Atoi``) and upstream's fallbacks: a
malformed duration is logged and replaced by the configured default, every grace period is
clamped into ``[0, grace_period_maximum]``, the success TTL annotation can only shorten the
configured TTL, and unparsable exit codes are dropped.

Durations are :class:`datetime.timedelta` (microsecond resolution); Go's are nanoseconds,
so a sub-microsecond annotation value is truncated toward zero after parsing.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from jobframework.runtime.gofmt import go_quote
from jobframework.runtime.objects import annotations_of

from .api import (
    ADMISSION_GRACE_PERIOD_ANNOTATION,
    DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION,
    FAILURE_GRACE_PERIOD_ANNOTATION,
    FORCEFUL_DELETION_GRACE_PERIOD_ANNOTATION,
    RETRY_LIMIT_ANNOTATION,
    RETRY_PAUSE_PERIOD_ANNOTATION,
    RETRYABLE_EXIT_CODES_ANNOTATION,
    SUCCESS_TTL_ANNOTATION,
    TERMINAL_EXIT_CODES_ANNOTATION,
    WARMUP_GRACE_PERIOD_ANNOTATION,
)

log = logging.getLogger(__name__)

__all__ = [
    "AppWrapperConfig",
    "AutopilotConfig",
    "ConfigError",
    "FaultToleranceConfig",
    "GoDurationError",
    "Taint",
    "admission_grace_duration",
    "atoi",
    "deletion_on_failure_grace_duration",
    "failure_grace_duration",
    "forceful_deletion_grace_duration",
    "format_go_duration",
    "limit_duration",
    "parse_go_duration",
    "retry_limit",
    "retry_pause_duration",
    "retryable_exit_codes",
    "terminal_exit_codes",
    "time_to_live_after_succeeded_duration",
    "to_int32",
    "warmup_grace_duration",
]

# --- Go parsers --------------------------------------------------------------------------------

_NS: Final = 1
_US: Final = 1000 * _NS
_MS: Final = 1000 * _US
_S: Final = 1000 * _MS
_M: Final = 60 * _S
_H: Final = 60 * _M
#: ``time.ParseDuration``'s units: both micro signs (U+00B5 and U+03BC) are accepted.
_UNITS: Final = {"ns": _NS, "us": _US, "\u00b5s": _US, "\u03bcs": _US, "ms": _MS, "s": _S,
                 "m": _M, "h": _H}
_U63: Final = 1 << 63
_MAX_INT64: Final = (1 << 63) - 1
_MIN_INT64: Final = -(1 << 63)


class GoDurationError(ValueError):
    """A string ``time.ParseDuration`` rejects; the message is Go's."""


def _time_quote(s: str) -> str:
    """The ``time`` package's own ``quote``: control and non-ASCII characters become
    ``\\xNN`` per UTF-8 byte; only ``"`` and ``\\`` are backslash-escaped."""
    out = ['"']
    for ch in s:
        if ord(ch) >= 0x80 or ch < " ":
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            if ch in '"\\':
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


def _is_digit(c: str) -> bool:
    # ASCII only: Python's str.isdigit accepts other scripts' digits, Go does not.
    return "0" <= c <= "9"


def _leading_int(s: str) -> tuple[int, str]:
    """Go's ``leadingInt``: the leading decimal digits; ValueError on uint64/int64 overflow."""
    x = 0
    i = 0
    while i < len(s) and _is_digit(s[i]):
        if x > _U63 // 10:
            raise ValueError("overflow")
        x = x * 10 + (ord(s[i]) - 48)
        if x > _U63:
            raise ValueError("overflow")
        i += 1
    return x, s[i:]


def _leading_fraction(s: str) -> tuple[int, float, str]:
    """Go's ``leadingFraction``: digits after the dot, ignoring the ones that overflow."""
    x = 0
    scale = 1.0
    overflow = False
    i = 0
    while i < len(s) and _is_digit(s[i]):
        if overflow:
            i += 1
            continue
        if x > _MAX_INT64 // 10:
            overflow = True
            i += 1
            continue
        y = x * 10 + (ord(s[i]) - 48)
        if y > _U63:
            overflow = True
            i += 1
            continue
        x = y
        scale *= 10
        i += 1
    return x, scale, s[i:]


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration``: nanoseconds from ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+``.

    Units ``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h`` (no ``d``); fractions and a
    sign are allowed; ``"0"`` is the only unitless value. Raises :class:`GoDurationError`
    with Go's message (``time: invalid duration "x"``, ``time: missing unit in duration
    "1"``, ``time: unknown unit "d" in duration "1d"``).
    """
    orig = text
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    invalid = GoDurationError(f"time: invalid duration {_time_quote(orig)}")
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or _is_digit(s[0])):
            raise invalid
        before = len(s)
        try:
            v, s = _leading_int(s)
        except ValueError:
            raise invalid from None
        pre = before != len(s)
        post = False
        f, scale = 0, 1.0
        if s and s[0] == ".":
            s = s[1:]
            before = len(s)
            f, scale, s = _leading_fraction(s)
            post = before != len(s)
        if not pre and not post:
            raise invalid
        i = 0
        while i < len(s) and not (s[i] == "." or _is_digit(s[i])):
            i += 1
        if i == 0:
            raise GoDurationError(f"time: missing unit in duration {_time_quote(orig)}")
        unit_name, s = s[:i], s[i:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise GoDurationError(
                f"time: unknown unit {_time_quote(unit_name)} in duration {_time_quote(orig)}")
        if v > _U63 // unit:
            raise invalid
        v *= unit
        if f > 0:
            # Go computes the fraction in float64, then truncates to uint64.
            v += int(float(f) * (float(unit) / scale))
            if v > _U63:
                raise invalid
        total += v
        if total > _U63:
            raise invalid
    if neg:
        return -total
    if total > _MAX_INT64:
        raise invalid
    return total


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    """Go's ``fmtFrac``: ``v / 10**prec`` as ``.ddd`` without trailing zeros."""
    digits = []
    printed = False
    for _ in range(prec):
        digit = v % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        v //= 10
    frac = ("." + "".join(reversed(digits))) if printed else ""
    return frac, v


def format_go_duration(d: int | dt.timedelta) -> str:
    """Go's ``time.Duration.String()`` (``1m0s``, ``168h0m0s``, ``1.5s``, ``300ms``, ``0s``).

    An ``int`` is nanoseconds.
    """
    ns = to_nanoseconds(d) if isinstance(d, dt.timedelta) else int(d)
    if ns == 0:
        return "0s"
    neg = ns < 0
    u = -ns if neg else ns
    if u < _S:
        if u < _US:
            body = f"{u}ns"
        elif u < _MS:
            frac, whole = _fmt_frac(u, 3)
            body = f"{whole}{frac}µs"
        else:
            frac, whole = _fmt_frac(u, 6)
            body = f"{whole}{frac}ms"
    else:
        frac, whole = _fmt_frac(u, 9)
        secs = whole % 60
        whole //= 60
        body = f"{secs}{frac}s"
        if whole > 0:
            mins = whole % 60
            whole //= 60
            body = f"{mins}m{body}"
            if whole > 0:
                body = f"{whole}h{body}"
    return f"-{body}" if neg else body


def to_nanoseconds(d: dt.timedelta) -> int:
    """A timedelta as integer nanoseconds (exact: timedeltas are whole microseconds)."""
    return ((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds) * 1000


def from_nanoseconds(ns: int) -> dt.timedelta:
    """Nanoseconds as a timedelta, truncated toward zero to whole microseconds."""
    us = abs(ns) // 1000
    return dt.timedelta(microseconds=-us if ns < 0 else us)


def atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` (64-bit ``int``): an optional sign then ASCII digits only.

    No whitespace, underscores or base prefixes. Raises ``ValueError`` with Go's message
    (``strconv.Atoi: parsing "x": invalid syntax`` / ``value out of range``).
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all(_is_digit(c) for c in body):
        raise ValueError(f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax")
    value = int(body) * (-1 if text[:1] == "-" else 1)
    if not _MIN_INT64 <= value <= _MAX_INT64:
        raise ValueError(f"strconv.Atoi: parsing {go_quote(text)}: value out of range")
    return value


def to_int32(value: int) -> int:
    """Go's ``int32(v)`` conversion: two's-complement wrap-around."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


# --- the configuration -------------------------------------------------------------------------


class ConfigError(ValueError):
    """An :class:`AppWrapperConfig` upstream's ``ValidateAppWrapperConfig`` rejects."""


@attrs.frozen
class Taint:
    """A ``v1.Taint`` of Autopilot's resource map (key, value, effect)."""

    key: str
    value: str = ""
    effect: str = ""


def _default_resource_taints() -> dict[str, tuple[Taint, ...]]:
    key = "autopilot.ibm.com/gpuhealth"
    return {"nvidia.com/gpu": (Taint(key, "WARN", "PreferNoSchedule"),
                               Taint(key, "TESTING", "NoSchedule"),
                               Taint(key, "EVICT", "NoExecute"))}


def _taint_map(value: Mapping[str, Sequence[Taint]]) -> dict[str, tuple[Taint, ...]]:
    return {k: tuple(v) for k, v in value.items()}


@attrs.frozen(hash=False)
class AutopilotConfig:
    """Autopilot integration: anti-affinity injection and the node health monitor.

    ``resource_taints`` maps a resource name to the node labels (as taints: key, value,
    effect) Autopilot uses to flag unhealthy devices of that resource.
    """

    inject_anti_affinities: bool = True
    monitor_nodes: bool = True
    resource_taints: dict[str, tuple[Taint, ...]] = attrs.field(
        factory=_default_resource_taints, converter=_taint_map)
    #: Weight of the injected PreferNoSchedule term; None means 1 (``ptr.Deref(..., 1)``).
    prefer_no_schedule_weight: int | None = 50


@attrs.frozen
class FaultToleranceConfig:
    """Defaults and the ceiling of the fault-tolerance timers (upstream's defaults)."""

    admission_grace_period: dt.timedelta = dt.timedelta(minutes=1)
    warmup_grace_period: dt.timedelta = dt.timedelta(minutes=5)
    failure_grace_period: dt.timedelta = dt.timedelta(minutes=1)
    retry_pause_period: dt.timedelta = dt.timedelta(seconds=90)
    retry_limit: int = 3
    forceful_deletion_grace_period: dt.timedelta = dt.timedelta(minutes=10)
    #: ``gracePeriodCeiling``: the clamp of every annotated grace period.
    grace_period_maximum: dt.timedelta = dt.timedelta(hours=24)
    #: ``successTTLCeiling``: how long a Succeeded AppWrapper keeps its resources.
    success_ttl: dt.timedelta = dt.timedelta(days=7)


#: ``faultTolerance`` JSON keys (upstream's) → field names.
_FT_KEYS: Final = {
    "admissionGracePeriod": "admission_grace_period",
    "warmupGracePeriod": "warmup_grace_period",
    "failureGracePeriod": "failure_grace_period",
    "resetPause": "retry_pause_period",
    "retryLimit": "retry_limit",
    "deletionGracePeriod": "forceful_deletion_grace_period",
    "gracePeriodCeiling": "grace_period_maximum",
    "successTTLCeiling": "success_ttl",
}


@attrs.frozen(hash=False)
class AppWrapperConfig:
    """The ``appwrapper`` section of the operator configuration (``NewAppWrapperConfig``).

    ``autopilot`` None disables anti-affinity injection and node monitoring.
    """

    autopilot: AutopilotConfig | None = attrs.field(factory=AutopilotConfig)
    user_rbac_admission_check: bool = True
    fault_tolerance: FaultToleranceConfig = attrs.field(factory=FaultToleranceConfig)
    #: Injected as ``spec.schedulerName`` of pod templates that set none ("" = none).
    scheduler_name: str = ""
    #: The queue label the webhook adds to AppWrappers that have none ("" = none).
    default_queue_name: str = ""

    def validate(self) -> None:
        """Upstream's ``ValidateAppWrapperConfig``; raises :class:`ConfigError`.

        The messages keep upstream's wording, typos and argument mix-ups included, so
        operators can search for them.
        """
        ft = self.fault_tolerance
        ceiling = format_go_duration(ft.grace_period_maximum)

        def exceeds(label: str, value: dt.timedelta) -> ConfigError:
            return ConfigError(f"{label} {format_go_duration(value)} exceeds "
                               f"GracePeriodCeiling {ceiling}")

        if ft.forceful_deletion_grace_period > ft.grace_period_maximum:
            raise exceeds("ForcefulDelectionGracePeriod", ft.forceful_deletion_grace_period)
        if ft.retry_pause_period > ft.grace_period_maximum:
            raise exceeds("RetryPausePeriod", ft.retry_pause_period)
        if ft.failure_grace_period > ft.grace_period_maximum:
            raise exceeds("FailureGracePeriod", ft.failure_grace_period)
        if ft.admission_grace_period > ft.grace_period_maximum:
            raise exceeds("AdmissionGracePeriod", ft.admission_grace_period)
        if ft.warmup_grace_period > ft.grace_period_maximum:
            raise exceeds("AdmissionGracePeriod", ft.warmup_grace_period)
        if ft.admission_grace_period > ft.warmup_grace_period:
            raise ConfigError(
                f"AdmissionGracePeriod {format_go_duration(ft.warmup_grace_period)} exceeds "
                f"AdmissionGracePeriod {ceiling}")
        if ft.success_ttl <= dt.timedelta(0):
            raise ConfigError(
                f"SuccessTTL {format_go_duration(ft.success_ttl)} is not a positive duration")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AppWrapperConfig:
        """Read the ConfigMap's ``appwrapper`` section over the defaults.

        As upstream (the document is unmarshalled into ``NewAppWrapperConfig()``), keys
        that are present replace the defaults and absent ones keep them; durations are
        integer nanoseconds (Go's ``time.Duration`` JSON). Raises ``ValueError`` on
        wrongly typed values.
        """
        base = cls()
        changes: dict[str, Any] = {}
        if "autopilot" in data:
            changes["autopilot"] = _autopilot_from(data["autopilot"], base.autopilot)
        if "userRBACAdmissionCheck" in data:
            changes["user_rbac_admission_check"] = _bool(data["userRBACAdmissionCheck"],
                                                         "userRBACAdmissionCheck")
        if "faultTolerance" in data:
            changes["fault_tolerance"] = _fault_tolerance_from(data["faultTolerance"],
                                                               base.fault_tolerance)
        for key, name in (("schedulerName", "scheduler_name"),
                          ("defaultQueueName", "default_queue_name")):
            if key in data:
                value = data[key]
                if not isinstance(value, str):
                    raise ValueError(f"{key}: expected a string, got {value!r}")
                changes[name] = value
        return attrs.evolve(base, **changes)


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected a boolean, got {value!r}")
    return value


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    return value


def _autopilot_from(data: Any, base: AutopilotConfig | None) -> AutopilotConfig | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"autopilot: expected an object, got {data!r}")
    # Go unmarshals into the default object: absent keys keep their defaults and the
    # resourceTaints map is merged key by key (a key's taint list is replaced).
    out = base or AutopilotConfig()
    changes: dict[str, Any] = {}
    if "injectAntiAffinities" in data:
        changes["inject_anti_affinities"] = _bool(data["injectAntiAffinities"],
                                                  "autopilot.injectAntiAffinities")
    if "monitorNodes" in data:
        changes["monitor_nodes"] = _bool(data["monitorNodes"], "autopilot.monitorNodes")
    if "resourceTaints" in data:
        raw = data["resourceTaints"] or {}
        if not isinstance(raw, Mapping):
            raise ValueError("autopilot.resourceTaints: expected an object")
        taints = dict(out.resource_taints)
        for resource, items in raw.items():
            taints[str(resource)] = tuple(
                Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                for t in (items or []) if isinstance(t, Mapping))
        changes["resource_taints"] = taints
    if "preferNoScheduleWeight" in data:
        weight = data["preferNoScheduleWeight"]
        changes["prefer_no_schedule_weight"] = (
            None if weight is None else _int(weight, "autopilot.preferNoScheduleWeight"))
    return attrs.evolve(out, **changes)


def _fault_tolerance_from(data: Any, base: FaultToleranceConfig) -> FaultToleranceConfig:
    if data is None:
        return base
    if not isinstance(data, Mapping):
        raise ValueError(f"faultTolerance: expected an object, got {data!r}")
    changes: dict[str, Any] = {}
    for key, name in _FT_KEYS.items():
        if key not in data:
            continue
        value = _int(data[key], f"faultTolerance.{key}")
        changes[name] = value if name == "retry_limit" else from_nanoseconds(value)
    return attrs.evolve(base, **changes)


# --- annotation readers (upstream's reconciler methods) ----------------------------------------


def limit_duration(desired: dt.timedelta, config: AppWrapperConfig) -> dt.timedelta:
    """Clamp ``desired`` into ``[0, grace_period_maximum]`` (upstream's ``limitDuration``)."""
    if desired < dt.timedelta(0):
        return dt.timedelta(0)
    return min(desired, config.fault_tolerance.grace_period_maximum)


def _annotated_nanoseconds(aw: Mapping[str, Any], key: str, what: str) -> int | None:
    """The annotation as Go nanoseconds, None when absent or malformed (logged)."""
    value = annotations_of(aw).get(key)
    if value is None:
        return None
    try:
        return parse_go_duration(str(value))
    except GoDurationError as err:
        log.error("Malformed %s annotation; using default: %s (annotation %r)", what, err,
                  value)
        return None


def _annotated_duration(aw: Mapping[str, Any], key: str, what: str) -> dt.timedelta | None:
    ns = _annotated_nanoseconds(aw, key, what)
    return None if ns is None else from_nanoseconds(ns)


def _grace(aw: Mapping[str, Any], config: AppWrapperConfig, key: str, what: str,
           default: dt.timedelta) -> dt.timedelta:
    value = _annotated_duration(aw, key, what)
    return limit_duration(default if value is None else value, config)


def admission_grace_duration(aw: Mapping[str, Any], config: AppWrapperConfig) -> dt.timedelta:
    """How long pods may take to be created (Resuming retries; too few pods in Running)."""
    return _grace(aw, config, ADMISSION_GRACE_PERIOD_ANNOTATION, "admission grace period",
                  config.fault_tolerance.admission_grace_period)


def warmup_grace_duration(aw: Mapping[str, Any], config: AppWrapperConfig) -> dt.timedelta:
    """How long created pods may take to run."""
    return _grace(aw, config, WARMUP_GRACE_PERIOD_ANNOTATION, "warmup grace period",
                  config.fault_tolerance.warmup_grace_period)


def failure_grace_duration(aw: Mapping[str, Any], config: AppWrapperConfig) -> dt.timedelta:
    """How long failed pods are tolerated before the AppWrapper is reset or failed."""
    return _grace(aw, config, FAILURE_GRACE_PERIOD_ANNOTATION, "failure grace period",
                  config.fault_tolerance.failure_grace_period)


def retry_pause_duration(aw: Mapping[str, Any], config: AppWrapperConfig) -> dt.timedelta:
    """The pause of a reset before resources are created again."""
    return _grace(aw, config, RETRY_PAUSE_PERIOD_ANNOTATION, "retry pause",
                  config.fault_tolerance.retry_pause_period)


def forceful_deletion_grace_duration(aw: Mapping[str, Any],
                                     config: AppWrapperConfig) -> dt.timedelta:
    """How long a graceful deletion may take before pods are deleted forcefully."""
    return _grace(aw, config, FORCEFUL_DELETION_GRACE_PERIOD_ANNOTATION,
                  "forceful deletion period", config.fault_tolerance.forceful_deletion_grace_period)


def deletion_on_failure_grace_duration(aw: Mapping[str, Any],
                                       config: AppWrapperConfig) -> dt.timedelta:
    """How long a Failed AppWrapper keeps its resources for debugging (default 0)."""
    value = _annotated_duration(aw, DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION,
                                "deletion on failure grace period")
    return dt.timedelta(0) if value is None else limit_duration(value, config)


def time_to_live_after_succeeded_duration(aw: Mapping[str, Any],
                                          config: AppWrapperConfig) -> dt.timedelta:
    """How long a Succeeded AppWrapper keeps its resources.

    The annotation can only shorten the configured TTL: it is used when strictly between
    zero and the configured value, and never clamped by the grace period ceiling.
    """
    ns = _annotated_nanoseconds(aw, SUCCESS_TTL_ANNOTATION, "successTTL")
    ttl = config.fault_tolerance.success_ttl
    # Compared in nanoseconds, as Go does, before truncating to a timedelta.
    if ns is not None and 0 < ns < to_nanoseconds(ttl):
        return from_nanoseconds(ns)
    return ttl


def retry_limit(aw: Mapping[str, Any], config: AppWrapperConfig) -> int:
    """How many resets are allowed (``strconv.Atoi`` then ``int32``; no clamp)."""
    value = annotations_of(aw).get(RETRY_LIMIT_ANNOTATION)
    if value is not None:
        try:
            return to_int32(atoi(str(value)))
        except ValueError as err:
            log.error("Malformed retry limit annotation; using default: %s", err)
    return config.fault_tolerance.retry_limit


def _exit_codes(aw: Mapping[str, Any], key: str) -> list[int]:
    value = annotations_of(aw).get(key)
    if value is None:
        return []
    codes = []
    for part in str(value).split(","):
        try:
            codes.append(atoi(part))
        except ValueError:
            continue  # upstream drops unparsable entries silently
    return codes


def terminal_exit_codes(aw: Mapping[str, Any]) -> list[int]:
    """Exit codes that fail the AppWrapper without retry (``"3,10,abc,42"`` → 3, 10, 42)."""
    return _exit_codes(aw, TERMINAL_EXIT_CODES_ANNOTATION)


def retryable_exit_codes(aw: Mapping[str, Any]) -> list[int]:
    """When set, the only exit codes that may be retried; any other non-zero is terminal."""
    return _exit_codes(aw, RETRYABLE_EXIT_CODES_ANNOTATION)
