"""The AppWrapper operator configuration and the per-AppWrapper fault-tolerance annotations.

:class:`AppWrapperConfig` is the ``appwrapper`` section of upstream's operator ConfigMap
(``pkg/config``): Autopilot settings, the user RBAC admission check, the fault-tolerance
defaults and caps, and the scheduler / default queue names the controller and webhook
inject. :meth:`AppWrapperConfig.validate` applies upstream's ``ValidateAppWrapperConfig``
and :meth:`AppWrapperConfig.from_dict` reads the ConfigMap form (durations there are Go
``time.Duration`` JSON: integer nanoseconds) through pydantic models of upstream's structs.

:func:`load_operator_config` reads the whole document of upstream's
``appwrapper-operator-config`` ConfigMap from a file (the manager's
``--appwrapper-config``, the ConfigMap mounted by ``deploy render``), warns about the
sections that configure upstream's own process and validates the result;
:func:`operator_config_map` is that ConfigMap with upstream's defaults.

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
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal

import attrs
import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

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
    "IGNORED_SECTIONS",
    "OPERATOR_CONFIGMAP_KEY",
    "OPERATOR_CONFIGMAP_NAME",
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
    "load_operator_config",
    "operator_config_document",
    "operator_config_map",
    "parse_go_duration",
    "parse_operator_config",
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
    """An AppWrapper operator configuration that cannot be used: one upstream's
    ``ValidateAppWrapperConfig`` rejects (its message), or a document with bad fields
    (:attr:`errors` name each field's path)."""

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        #: One line per problem (``faultTolerance.retryLimit: expected an integer, ...``).
        self.errors: list[str] = list(errors) or [message]

    @classmethod
    def of(cls, errors: Sequence[str], prefix: str = "") -> ConfigError:
        """The errors joined into one message, after ``prefix`` when given."""
        text = "; ".join(errors)
        return cls(f"{prefix}: {text}" if prefix else text, errors)


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
        """Read the ConfigMap's ``appwrapper`` section over the defaults, as Go's
        ``encoding/json`` decodes it into ``NewAppWrapperConfig()``.

        Present keys replace the defaults and absent ones keep them; keys match
        case-insensitively; ``null`` leaves a scalar as it was and empties a pointer, map
        or list (``autopilot: null`` turns Autopilot off); ``resourceTaints`` is merged
        into the default map resource by resource. Durations are integer nanoseconds (Go's
        ``time.Duration`` JSON). Raises :class:`ConfigError` naming each bad field's path
        (relative to the section): a wrong type, a value out of range, an unknown key.
        Does not apply :meth:`validate`.
        """
        try:
            doc = _AppWrapperDoc.model_validate(data)
        except ValidationError as err:
            raise ConfigError.of(_decode_errors(err)) from None
        return _config_from(doc)

    def to_dict(self) -> dict[str, Any]:
        """The ``appwrapper`` section that :meth:`from_dict` reads back to this config
        (durations as integer nanoseconds, upstream's JSON names).

        Go's decoder merges ``resourceTaints`` into the defaults, so a default resource this
        config lacks is written with an empty taint list (no taints: the same behaviour),
        and an empty map as ``null``.
        """
        out: dict[str, Any] = {}
        ap = self.autopilot
        if ap is None:
            out["autopilot"] = None
        else:
            taints: dict[str, Any] | None = {
                resource: [_taint_dict(t) for t in items]
                for resource, items in ap.resource_taints.items()}
            if not ap.resource_taints:
                taints = None
            else:
                assert taints is not None
                for resource in _default_resource_taints():
                    taints.setdefault(resource, [])
            out["autopilot"] = {
                "injectAntiAffinities": ap.inject_anti_affinities,
                "monitorNodes": ap.monitor_nodes,
                "resourceTaints": taints,
                "preferNoScheduleWeight": ap.prefer_no_schedule_weight,
            }
        out["userRBACAdmissionCheck"] = self.user_rbac_admission_check
        ft = self.fault_tolerance
        out["faultTolerance"] = {
            key: (ft.retry_limit if name == "retry_limit"
                  else to_nanoseconds(getattr(ft, name)))
            for key, name in _FT_KEYS.items()}
        # Empty strings are left out, as Go's ``omitempty`` writes them.
        if self.scheduler_name:
            out["schedulerName"] = self.scheduler_name
        if self.default_queue_name:
            out["defaultQueueName"] = self.default_queue_name
        return out


def _taint_dict(taint: Taint) -> dict[str, str]:
    out = {"key": taint.key}
    if taint.value:
        out["value"] = taint.value
    out["effect"] = taint.effect
    return out


# --- the ConfigMap document (pydantic) ---------------------------------------------------------

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1


def _nanoseconds(value: Any) -> Any:
    """A Go ``time.Duration`` is JSON integer nanoseconds: a duration string such as
    ``"90s"`` is refused, with the number it stands for."""
    if isinstance(value, str):
        try:
            hint = f" ({value} is {parse_go_duration(value)})"
        except GoDurationError:
            hint = ""
        raise ValueError("expected integer nanoseconds (Go's time.Duration), got "
                         f"{value!r}{hint}")
    return value


#: A ``time.Duration`` field: int64 nanoseconds.
_Duration = Annotated[int, BeforeValidator(_nanoseconds),
                      Field(ge=_MIN_INT64, le=_MAX_INT64)]


class _GoStruct(BaseModel):
    """A Go struct as ``encoding/json`` fills it, stricter on what Go would let through.

    As Go: keys match the JSON names case-insensitively (an exact match first; the last
    of duplicates wins), and ``null`` leaves a non-pointer field as it was. Unlike Go,
    an unknown key is refused (a misspelt setting would otherwise do nothing, silently)
    and numbers and booleans must have their JSON type (Go refuses those too).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    #: JSON names of the pointer, map and slice fields: ``null`` empties them.
    nil_fields: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _as_go_decodes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        names = [f.alias or n for n, f in cls.model_fields.items()]
        out: dict[str, Any] = {}
        for key, value in data.items():
            name = str(key)
            if name not in names:
                name = next((n for n in names if n.casefold() == name.casefold()), name)
            if value is None and name in names and name not in cls.nil_fields:
                continue
            out[name] = value
        return out


class _TaintDoc(_GoStruct):
    """A ``v1.Taint`` of ``autopilot.resourceTaints``: the node label Autopilot sets."""

    key: str = Field(min_length=1)
    value: str = ""
    # Upstream acts on these three only; another effect would do nothing, silently.
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    #: Part of ``v1.Taint`` (a timestamp, which YAML may decode as a datetime);
    #: meaningless for a node label, accepted and unused.
    time_added: Any = Field(None, alias="timeAdded")


class _AutopilotDoc(_GoStruct):
    nil_fields = frozenset({"resourceTaints", "preferNoScheduleWeight"})

    inject_anti_affinities: bool | None = Field(None, alias="injectAntiAffinities")
    monitor_nodes: bool | None = Field(None, alias="monitorNodes")
    resource_taints: dict[str, list[_TaintDoc] | None] | None = Field(
        None, alias="resourceTaints")
    # The API server refuses a preferred scheduling term's weight outside 1..100.
    prefer_no_schedule_weight: int | None = Field(None, alias="preferNoScheduleWeight",
                                                  ge=1, le=100)


class _FaultToleranceDoc(_GoStruct):
    admission_grace_period: _Duration | None = Field(None, alias="admissionGracePeriod")
    warmup_grace_period: _Duration | None = Field(None, alias="warmupGracePeriod")
    failure_grace_period: _Duration | None = Field(None, alias="failureGracePeriod")
    retry_pause_period: _Duration | None = Field(None, alias="resetPause")
    retry_limit: int | None = Field(None, alias="retryLimit", ge=_INT32_MIN, le=_INT32_MAX)
    forceful_deletion_grace_period: _Duration | None = Field(None, alias="deletionGracePeriod")
    grace_period_maximum: _Duration | None = Field(None, alias="gracePeriodCeiling")
    success_ttl: _Duration | None = Field(None, alias="successTTLCeiling")


def _not_null(value: Any) -> Any:
    if value is None:
        # Go would store a nil pointer, and upstream's validation dereferences it.
        raise ValueError("must not be null (leave the key out for the defaults)")
    return value


class _AppWrapperDoc(_GoStruct):
    nil_fields = frozenset({"autopilot", "faultTolerance"})

    autopilot: _AutopilotDoc | None = None
    user_rbac_admission_check: bool | None = Field(None, alias="userRBACAdmissionCheck")
    fault_tolerance: Annotated[_FaultToleranceDoc | None, BeforeValidator(_not_null)] = \
        Field(None, alias="faultTolerance")
    scheduler_name: str | None = Field(None, alias="schedulerName")
    default_queue_name: str | None = Field(None, alias="defaultQueueName")


class _OperatorConfigDoc(_GoStruct):
    """Upstream's ``OperatorConfig``: the document under the ConfigMap's key."""

    nil_fields = frozenset({"appwrapper", "certManagement", "controllerManager",
                            "webhooksEnabled"})

    appwrapper: Annotated[_AppWrapperDoc | None, BeforeValidator(_not_null)] = None
    # Upstream's process settings: our manager's own flags govern these (see
    # IGNORED_SECTIONS); accepted whatever they hold, and not read.
    cert_management: Any = Field(None, alias="certManagement")
    controller_manager: Any = Field(None, alias="controllerManager")
    webhooks_enabled: Any = Field(None, alias="webhooksEnabled")


def _config_from(doc: _AppWrapperDoc) -> AppWrapperConfig:
    """``doc``'s keys over ``NewAppWrapperConfig()``'s defaults."""
    base = AppWrapperConfig()
    given = doc.model_fields_set
    changes: dict[str, Any] = {}
    if "autopilot" in given:
        changes["autopilot"] = (None if doc.autopilot is None
                                else _autopilot_from(doc.autopilot, base.autopilot))
    if "fault_tolerance" in given and doc.fault_tolerance is not None:
        ft = doc.fault_tolerance
        timers: dict[str, Any] = {
            name: (getattr(ft, name) if name == "retry_limit"
                   else from_nanoseconds(getattr(ft, name)))
            for name in ft.model_fields_set}
        changes["fault_tolerance"] = attrs.evolve(base.fault_tolerance, **timers)
    for name in ("user_rbac_admission_check", "scheduler_name", "default_queue_name"):
        if name in given:
            changes[name] = getattr(doc, name)
    return attrs.evolve(base, **changes)


def _autopilot_from(doc: _AutopilotDoc, base: AutopilotConfig | None) -> AutopilotConfig:
    # Go decodes into the default object: absent keys keep their defaults, and the
    # resourceTaints map is merged resource by resource (a resource's list is replaced).
    out = base or AutopilotConfig()
    given = doc.model_fields_set
    changes: dict[str, Any] = {}
    for name in ("inject_anti_affinities", "monitor_nodes", "prefer_no_schedule_weight"):
        if name in given:
            changes[name] = getattr(doc, name)
    if "resource_taints" in given:
        if doc.resource_taints is None:
            changes["resource_taints"] = {}
        else:
            taints = dict(out.resource_taints)
            for resource, items in doc.resource_taints.items():
                taints[resource] = tuple(Taint(t.key, t.value, t.effect) for t in items or ())
            changes["resource_taints"] = taints
    return attrs.evolve(out, **changes)


#: Error types of pydantic → how the message says it.
_EXPECTED: Final = {
    "model_type": "expected an object", "dict_type": "expected an object",
    "model_attributes_type": "expected an object", "list_type": "expected a list",
    "int_type": "expected an integer", "bool_type": "expected a boolean (true or false)",
    "string_type": "expected a string",
}


def _loc_path(loc: Sequence[int | str]) -> str:
    """``appwrapper.autopilot.resourceTaints[nvidia.com/gpu][0].effect``."""
    out = ""
    map_key = False
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int) or map_key:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        map_key = part == "resourceTaints"
    return out or "(document)"


def _decode_errors(err: ValidationError) -> list[str]:
    out: list[str] = []
    for e in err.errors():
        path = _loc_path(e["loc"])
        kind = e["type"]
        if kind == "extra_forbidden":
            out.append(f"{path}: unknown field (upstream v1.2.2 has none of that name)")
        elif kind == "missing":
            out.append(f"{path}: required")
        elif kind == "value_error":
            out.append(f"{path}: {(e.get('ctx') or {}).get('error')}")
        else:
            what = _EXPECTED.get(kind) or e["msg"][:1].lower() + e["msg"][1:]
            out.append(f"{path}: {what}, got {e['input']!r}")
    return out


# --- reading the operator's ConfigMap ----------------------------------------------------------

#: Upstream's ConfigMap (``cmd/main.go``'s ``--config`` default, after its kustomize prefix).
OPERATOR_CONFIGMAP_NAME: Final = "appwrapper-operator-config"
#: The key upstream writes the document under (it reads the ConfigMap's only key).
OPERATOR_CONFIGMAP_KEY: Final = "config.yaml"
#: Upstream's ``OperatorConfig`` sections that configure its own process; our manager's
#: flags govern the same things, so these are accepted, logged and not read.
IGNORED_SECTIONS: Final = {
    "certManagement": "--cert-management, --cert-dir, --webhook-service-name, "
                      "--cert-secret-name, --webhook-configuration-name",
    "controllerManager": "--metrics-bind-address, --health-probe-bind-address, "
                         "--leader-elect",
    "webhooksEnabled": "the manager always serves its webhooks",
}


def parse_operator_config(document: Mapping[str, Any] | str | bytes | None, *,
                          source: str = "") -> AppWrapperConfig:
    """The :class:`AppWrapperConfig` of upstream's operator configuration document (the
    YAML under the ConfigMap's key, or that document decoded), validated.

    Its ``appwrapper`` section is read over the defaults (:meth:`AppWrapperConfig.from_dict`;
    an empty document or none is the defaults); upstream's other sections are logged as
    not read (:data:`IGNORED_SECTIONS`). Then :meth:`AppWrapperConfig.validate`, as
    upstream's ``main`` does before it starts. Raises :class:`ConfigError` naming the
    field paths (``appwrapper.faultTolerance.retryLimit: ...``) and ``source``.
    """
    where = f" ({source})" if source else ""
    prefix = f"invalid AppWrapper operator configuration{where}"
    if isinstance(document, (str, bytes)):
        try:
            document = yaml.safe_load(document)
        except yaml.YAMLError as err:
            raise ConfigError.of([f"not valid YAML: {err}"], prefix) from None
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError.of([f"(document): expected an object, got {document!r}"], prefix)
    try:
        doc = _OperatorConfigDoc.model_validate(document)
    except ValidationError as err:
        raise ConfigError.of(_decode_errors(err), prefix) from None
    given = {_OperatorConfigDoc.model_fields[n].alias for n in doc.model_fields_set}
    for section, instead in IGNORED_SECTIONS.items():
        if section in given:
            log.warning("AppWrapper operator configuration%s: %s is not read (upstream's own "
                        "process setting; here: %s)", where, section, instead)
    config = _config_from(doc.appwrapper) if doc.appwrapper is not None else AppWrapperConfig()
    try:
        config.validate()
    except ConfigError as err:
        raise ConfigError.of([f"appwrapper.faultTolerance: {err}"], prefix) from None
    return config


def load_operator_config(path: str | os.PathLike[str]) -> AppWrapperConfig:
    """Read upstream's operator configuration from a file: the ConfigMap's
    ``config.yaml`` as a mounted volume presents it (``--appwrapper-config``).

    See :func:`parse_operator_config`; an unreadable file is a :class:`ConfigError` too.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError.of([f"cannot read the file: {err.strerror or err}"],
                             f"invalid AppWrapper operator configuration ({path})") from None
    return parse_operator_config(text, source=str(path))


def operator_config_document(config: AppWrapperConfig | None = None) -> dict[str, Any]:
    """The operator configuration document holding ``config`` (default: upstream's
    defaults) as its ``appwrapper`` section."""
    return {"appwrapper": (config or AppWrapperConfig()).to_dict()}


def operator_config_map(namespace: str, config: AppWrapperConfig | None = None, *,
                        name: str = OPERATOR_CONFIGMAP_NAME) -> dict[str, Any]:
    """The ConfigMap upstream would create when it finds none: ``config`` (default:
    upstream's defaults) under :data:`OPERATOR_CONFIGMAP_KEY`."""
    text = yaml.safe_dump(operator_config_document(config), sort_keys=False,
                          default_flow_style=False)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {OPERATOR_CONFIGMAP_KEY: text}}


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
