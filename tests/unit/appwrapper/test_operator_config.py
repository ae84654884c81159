"""Upstream's operator configuration (the ``appwrapper-operator-config`` ConfigMap)
read into :class:`AppWrapperConfig`: upstream's defaults, Go's decoding rules, each bad
field refused by its path, upstream's own process sections warned about, and the
ConfigMap ``deploy render`` ships."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from integrations.appwrapper.config import (
    IGNORED_SECTIONS,
    OPERATOR_CONFIGMAP_KEY,
    OPERATOR_CONFIGMAP_NAME,
    AppWrapperConfig,
    AutopilotConfig,
    ConfigError,
    FaultToleranceConfig,
    Taint,
    load_operator_config,
    operator_config_document,
    operator_config_map,
    parse_operator_config,
)

S = dt.timedelta(seconds=1)
GPU_HEALTH = "autopilot.ibm.com/gpuhealth"

#: ``json.Marshal(config.NewAppWrapperConfig())`` of project-codeflare/appwrapper v1.2.2,
#: printed by a Go program against the module Kueue v0.19.2's go.mod pins.
UPSTREAM_DEFAULTS_JSON = (
    '{"autopilot":{"injectAntiAffinities":true,"monitorNodes":true,"resourceTaints":'
    '{"nvidia.com/gpu":[{"key":"autopilot.ibm.com/gpuhealth","value":"WARN",'
    '"effect":"PreferNoSchedule"},{"key":"autopilot.ibm.com/gpuhealth","value":"TESTING",'
    '"effect":"NoSchedule"},{"key":"autopilot.ibm.com/gpuhealth","value":"EVICT",'
    '"effect":"NoExecute"}]},"preferNoScheduleWeight":50},"userRBACAdmissionCheck":true,'
    '"faultTolerance":{"admissionGracePeriod":60000000000,"warmupGracePeriod":300000000000,'
    '"failureGracePeriod":60000000000,"resetPause":90000000000,"retryLimit":3,'
    '"deletionGracePeriod":600000000000,"gracePeriodCeiling":86400000000000,'
    '"successTTLCeiling":604800000000000}}')


# --- defaults ----------------------------------------------------------------------------------


def test_defaults_are_upstreams() -> None:
    upstream = json.loads(UPSTREAM_DEFAULTS_JSON)
    assert AppWrapperConfig().to_dict() == upstream
    assert AppWrapperConfig.from_dict(upstream) == AppWrapperConfig()
    assert AppWrapperConfig.from_dict({}) == AppWrapperConfig()


@pytest.mark.parametrize("document", [None, "", "{}", "appwrapper: {}\n",
                                      {"appwrapper": {}}, "# only a comment\n"])
def test_an_empty_document_is_the_defaults(document: Any) -> None:
    assert parse_operator_config(document) == AppWrapperConfig()


# --- a valid document --------------------------------------------------------------------------


FULL = """\
appwrapper:
  autopilot:
    injectAntiAffinities: false
    monitorNodes: false
    resourceTaints:
      example.com/fpga:
      - {key: fpga.example.com/health, value: BAD, effect: NoExecute}
    preferNoScheduleWeight: 10
  userRBACAdmissionCheck: false
  faultTolerance:
    admissionGracePeriod: 30000000000
    warmupGracePeriod: 120000000000
    failureGracePeriod: 0
    resetPause: 5000000000
    retryLimit: 0
    deletionGracePeriod: 20000000000
    gracePeriodCeiling: 3600000000000
    successTTLCeiling: 600000000000
  schedulerName: custom-scheduler
  defaultQueueName: team-queue
"""


def test_every_field_is_read() -> None:
    config = parse_operator_config(FULL)
    assert config == AppWrapperConfig(
        autopilot=AutopilotConfig(
            inject_anti_affinities=False, monitor_nodes=False, prefer_no_schedule_weight=10,
            # Merged into the default map, as Go's decoder does.
            resource_taints={
                "nvidia.com/gpu": AutopilotConfig().resource_taints["nvidia.com/gpu"],
                "example.com/fpga": (Taint("fpga.example.com/health", "BAD", "NoExecute"),)}),
        user_rbac_admission_check=False,
        fault_tolerance=FaultToleranceConfig(
            admission_grace_period=30 * S, warmup_grace_period=120 * S,
            failure_grace_period=0 * S, retry_pause_period=5 * S, retry_limit=0,
            forceful_deletion_grace_period=20 * S, grace_period_maximum=3600 * S,
            success_ttl=600 * S),
        scheduler_name="custom-scheduler", default_queue_name="team-queue")
    # What to_dict writes reads back to the same configuration.
    assert AppWrapperConfig.from_dict(config.to_dict()) == config
    assert parse_operator_config(operator_config_document(config)) == config


def test_absent_keys_keep_their_defaults() -> None:
    config = parse_operator_config({"appwrapper": {"faultTolerance": {"retryLimit": 7}}})
    assert config.fault_tolerance == FaultToleranceConfig(retry_limit=7)
    assert config.autopilot == AutopilotConfig()
    assert config.user_rbac_admission_check is True


def test_keys_match_case_insensitively_as_in_go() -> None:
    """Go's ``encoding/json`` matches JSON names case-insensitively (exact match first)."""
    config = parse_operator_config(
        "AppWrapper:\n  DEFAULTQUEUENAME: q\n  faulttolerance: {RetryLimit: 5}\n")
    assert config.default_queue_name == "q"
    assert config.fault_tolerance.retry_limit == 5


def test_null_as_go_decodes_it() -> None:
    """``null`` leaves a scalar as it was; it empties a pointer, a map or a list."""
    config = parse_operator_config({"appwrapper": {
        "defaultQueueName": None, "userRBACAdmissionCheck": None,
        "faultTolerance": {"retryLimit": None, "resetPause": None},
        "autopilot": {"preferNoScheduleWeight": None,
                      "resourceTaints": {"nvidia.com/gpu": None}}}})
    assert config.default_queue_name == "" and config.user_rbac_admission_check is True
    assert config.fault_tolerance == FaultToleranceConfig()
    assert config.autopilot is not None
    assert config.autopilot.prefer_no_schedule_weight is None  # upstream then uses 1
    assert config.autopilot.resource_taints == {"nvidia.com/gpu": ()}
    assert parse_operator_config({"appwrapper": {"autopilot": None}}).autopilot is None
    emptied = parse_operator_config({"appwrapper": {"autopilot": {"resourceTaints": None}}})
    assert emptied.autopilot is not None and emptied.autopilot.resource_taints == {}
    assert AppWrapperConfig.from_dict(emptied.to_dict()) == emptied


# --- bad fields, each named -----------------------------------------------------------------


@pytest.mark.parametrize(("section", "message"), [
    ({"faultTolerance": {"retryLimit": "3"}},
     "appwrapper.faultTolerance.retryLimit: expected an integer, got '3'"),
    ({"faultTolerance": {"retryLimit": 2**31}},
     "appwrapper.faultTolerance.retryLimit: input should be less than or equal to "
     "2147483647, got 2147483648"),
    ({"faultTolerance": {"admissionGracePeriod": "1m"}},
     "appwrapper.faultTolerance.admissionGracePeriod: expected integer nanoseconds (Go's "
     "time.Duration), got '1m' (1m is 60000000000)"),
    ({"faultTolerance": {"resetPause": 1.5}},
     "appwrapper.faultTolerance.resetPause: expected an integer, got 1.5"),
    ({"faultTolerance": {"successTTLCeiling": 2**63}},
     "appwrapper.faultTolerance.successTTLCeiling: input should be less than or equal to "
     "9223372036854775807"),
    ({"faultTolerance": None},
     "appwrapper.faultTolerance: must not be null (leave the key out for the defaults)"),
    ({"faultTolerance": [1]}, "appwrapper.faultTolerance: expected an object, got [1]"),
    ({"userRBACAdmissionCheck": "false"},
     "appwrapper.userRBACAdmissionCheck: expected a boolean (true or false), got 'false'"),
    ({"schedulerName": 5}, "appwrapper.schedulerName: expected a string, got 5"),
    ({"defaultQueueName": ["q"]},
     "appwrapper.defaultQueueName: expected a string, got ['q']"),
    ({"defaultQueue": "q"},
     "appwrapper.defaultQueue: unknown field (upstream v1.2.2 has none of that name)"),
    ({"autopilot": "on"}, "appwrapper.autopilot: expected an object, got 'on'"),
    ({"autopilot": {"monitorNodes": 1}},
     "appwrapper.autopilot.monitorNodes: expected a boolean (true or false), got 1"),
    ({"autopilot": {"preferNoScheduleWeight": 0}},
     "appwrapper.autopilot.preferNoScheduleWeight: input should be greater than or equal "
     "to 1, got 0"),
    ({"autopilot": {"preferNoScheduleWeight": 101}},
     "appwrapper.autopilot.preferNoScheduleWeight: input should be less than or equal to "
     "100, got 101"),
    ({"autopilot": {"resourceTaints": []}},
     "appwrapper.autopilot.resourceTaints: expected an object, got []"),
    ({"autopilot": {"resourceTaints": {"nvidia.com/gpu": {"key": "k"}}}},
     "appwrapper.autopilot.resourceTaints[nvidia.com/gpu]: expected a list"),
    ({"autopilot": {"resourceTaints": {"nvidia.com/gpu": [
        {"key": GPU_HEALTH, "value": "EVICT", "effect": "Evict"}]}}},
     "appwrapper.autopilot.resourceTaints[nvidia.com/gpu][0].effect: input should be "
     "'NoSchedule', 'PreferNoSchedule' or 'NoExecute', got 'Evict'"),
    ({"autopilot": {"resourceTaints": {"nvidia.com/gpu": [{"effect": "NoExecute"}]}}},
     "appwrapper.autopilot.resourceTaints[nvidia.com/gpu][0].key: required"),
    ({"autopilot": {"resourceTaints": {"nvidia.com/gpu": [
        {"key": GPU_HEALTH, "effect": "NoExecute", "tolerance": 1}]}}},
     "appwrapper.autopilot.resourceTaints[nvidia.com/gpu][0].tolerance: unknown field"),
])
def test_a_bad_field_is_refused_by_its_path(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_operator_config({"appwrapper": section}, source="cm.yaml")
    assert str(err.value).startswith("invalid AppWrapper operator configuration (cm.yaml): ")
    assert message in str(err.value)
    # The section alone names the same field, relative to it.
    with pytest.raises(ConfigError) as alone:
        AppWrapperConfig.from_dict(section)
    assert message.removeprefix("appwrapper.") in str(alone.value)


def test_every_bad_field_is_listed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_operator_config({"appwrapper": {"schedulerName": 1,
                                              "faultTolerance": {"retryLimit": "x"}}})
    assert sorted(err.value.errors) == [
        "appwrapper.faultTolerance.retryLimit: expected an integer, got 'x'",
        "appwrapper.schedulerName: expected a string, got 1"]


@pytest.mark.parametrize(("document", "message"), [
    ("appwrapper: [\n", "not valid YAML"),
    ("- appwrapper\n", "(document): expected an object, got ['appwrapper']"),
    ({"appwrapper": None}, "appwrapper: must not be null"),
    ({"appWrappers": {}}, "appWrappers: unknown field"),
])
def test_a_bad_document_is_refused(document: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="invalid AppWrapper operator configuration") as err:
        parse_operator_config(document)
    assert message in str(err.value)


def test_upstreams_validation_runs_on_the_document() -> None:
    """As upstream's ``main``: ``ValidateAppWrapperConfig`` after the load, its message."""
    doc = {"appwrapper": {"faultTolerance": {"warmupGracePeriod": 10_000_000_000}}}
    with pytest.raises(ConfigError) as err:
        parse_operator_config(doc, source="f")
    assert str(err.value) == (
        "invalid AppWrapper operator configuration (f): appwrapper.faultTolerance: "
        "AdmissionGracePeriod 10s exceeds AdmissionGracePeriod 24h0m0s")


def test_upstreams_process_sections_are_warned_about_not_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    """``certManagement``, ``controllerManager`` and ``webhooksEnabled`` configure
    upstream's own process; our manager's flags do that here."""
    document = """\
appwrapper:
  defaultQueueName: q
certManagement:
  namespace: appwrapper-system
controllerManager:
  leaderElection: true
  health: {bindAddress: ":8081"}
webhooksEnabled: false
"""
    with caplog.at_level(logging.WARNING, logger="integrations.appwrapper.config"):
        config = parse_operator_config(document, source="cm")
    assert config.default_queue_name == "q"
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 3
    for section, instead in IGNORED_SECTIONS.items():
        assert any(f"(cm): {section} is not read" in w and instead in w for w in warned)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="integrations.appwrapper.config"):
        parse_operator_config(FULL)
    assert caplog.records == []


# --- files and the ConfigMap -----------------------------------------------------------------


def test_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(FULL)
    assert load_operator_config(path) == parse_operator_config(FULL)
    path.write_text("appwrapper:\n  faultTolerance:\n    retryLimit: three\n")
    with pytest.raises(ConfigError) as err:
        load_operator_config(path)
    assert str(err.value) == (
        f"invalid AppWrapper operator configuration ({path}): "
        "appwrapper.faultTolerance.retryLimit: expected an integer, got 'three'")
    with pytest.raises(ConfigError, match=r"\(.*missing\.yaml\): cannot read the file"):
        load_operator_config(tmp_path / "missing.yaml")


def test_the_configmap_holds_upstreams_defaults() -> None:
    cm = operator_config_map("ns")
    assert cm["metadata"] == {"name": "appwrapper-operator-config", "namespace": "ns"}
    assert OPERATOR_CONFIGMAP_NAME == "appwrapper-operator-config"
    assert list(cm["data"]) == [OPERATOR_CONFIGMAP_KEY] == ["config.yaml"]
    document = yaml.safe_load(cm["data"]["config.yaml"])
    assert document == {"appwrapper": json.loads(UPSTREAM_DEFAULTS_JSON)}
    assert parse_operator_config(cm["data"]["config.yaml"]) == AppWrapperConfig()
    custom = AppWrapperConfig(default_queue_name="q")
    assert parse_operator_config(
        operator_config_map("ns", custom)["data"]["config.yaml"]) == custom
