"""Workload names: every vector from Kueue's workload_names_test.go and the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobframework.constants import FeatureGates
from jobframework.naming import (
    generate_workload_name_prefix,
    generate_workload_name_with_extra,
    get_workload_name_for_owner_with_gvk,
    get_workload_name_for_owner_with_gvk_and_generation,
    get_workload_name_for_variant,
    max_prefix_length,
)
from jobframework.runtime.objects import GVK

JOB = GVK("batch", "v1", "Job")
SHORT = FeatureGates(ShortWorkloadNames=True)
LONG_NAME = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-"
    "sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-"
    "revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-"
    "legal-and-ops-dept"
)


def test_prefix_limits() -> None:
    assert max_prefix_length() == 247
    assert max_prefix_length(SHORT) == 57


@pytest.mark.parametrize("extra", ["", "1", "100", "custom-part"])
def test_with_extra_keeps_prefix_and_length(extra: str) -> None:
    name = generate_workload_name_with_extra("my-job", "uid-123", JOB, extra)
    assert name.startswith("job-my-job-")
    assert len(name) == len("job-my-job-") + 5


@pytest.mark.kueue_case(
    "TestGenerateWorkloadNameWithExtra/empty extra",
    "TestGenerateWorkloadNameWithExtra/generation as extra",
    "TestGenerateWorkloadNameWithExtra/resourceVersion as extra",
    "TestGenerateWorkloadNameWithExtra/custom extra string",
    "TestGenerateWorkloadNameWithExtra/short name, no extra (ShortWorkloadNames=false)",
    "TestGenerateWorkloadNameWithExtra/short name, with extra (ShortWorkloadNames=false)",
)
@pytest.mark.parametrize(
    ("name", "uid", "extra", "expected"),
    [
        ("name", "uid", "", "job-name-ef3a1"),
        ("name", "uid", "1", "job-name-2514c"),
        ("test-job", "test-job", "", "job-test-job-ce737"),
        ("test-job", "test-job", "0", "job-test-job-3991b"),
        ("job", "test-uid", "0", "job-job-2e122"),
        ("job", "test-uid", "", "job-job-b3219"),
        ("job", "", "", "job-job-15f7f"),
        ("job", "long-uid" * 8, "", "job-job-bf838"),
        ("my-job", "uid-123", "", "job-my-job-cd350"),
        ("my-job", "uid-123", "1", "job-my-job-da75e"),
        ("my-job", "uid-123", "2", "job-my-job-eff4a"),
        ("my-job", "uid-123", "100", "job-my-job-cc2b3"),
        ("my-job", "uid-123", "200", "job-my-job-8fee7"),
        ("my-job", "uid-123", "custom-part", "job-my-job-f00f7"),
        ("my-job", "uid-123", "42", "job-my-job-f82b3"),
    ],
)
def test_literal_vectors(name: str, uid: str, extra: str, expected: str) -> None:
    assert generate_workload_name_with_extra(name, uid, JOB, extra) == expected
    if not extra:
        assert get_workload_name_for_owner_with_gvk(name, uid, JOB) == expected


@pytest.mark.kueue_case(
    "TestGenerateWorkloadNameWithExtra/long owner name truncated (ShortWorkloadNames=false)",
)
def test_long_owner_name_truncated_long_limit() -> None:
    expected = (
        "job-marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-"
        "sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-"
        "revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-l"
        "-218b8"
    )
    got = generate_workload_name_with_extra(LONG_NAME, "uid", JOB, "")
    assert got == expected
    assert len(got) == 253


@pytest.mark.kueue_case(
    "TestGenerateWorkloadNameWithExtra/long owner name truncated (ShortWorkloadNames=true)",
)
def test_long_owner_name_truncated_short_limit() -> None:
    got = generate_workload_name_with_extra(LONG_NAME, "uid", JOB, "", features=SHORT)
    assert got == "job-marketing-campaign-autumn-2024-region-north-america-d-218b8"
    assert len(got) == 63


@pytest.mark.kueue_case(
    "TestGenerateWorkloadNameWithExtra/different extra values produce different names",
    "TestGenerateWorkloadNameWithExtra/different resourceVersion values produce different names",
    "TestGenerateWorkloadNameWithExtra/same extra produces same name",
    "TestGenerateWorkloadNameWithExtra/same prefix as GetWorkloadNameForOwnerWithGVK",
)
def test_extra_equality_rules() -> None:
    def n(extra: str) -> str:
        return generate_workload_name_with_extra("my-job", "uid-123", JOB, extra)

    assert n("1") != n("2")
    assert n("100") != n("200")
    assert n("100") == n("100")
    plain = get_workload_name_for_owner_with_gvk("my-job", "uid-123", JOB)
    assert n("1")[:-5] == plain[:-5]
    assert n("1") != plain


@pytest.mark.kueue_case(
    "TestGenerateWorkloadNameWithGeneration/different generations produce different names",
    "TestGenerateWorkloadNameWithGeneration/same generation produces same name",
    "TestGenerateWorkloadNameWithGeneration/consistent with GenerateWorkloadNameWithExtra using "
    "string generation",
)
def test_generation_form() -> None:
    def g(gen: int) -> str:
        return get_workload_name_for_owner_with_gvk_and_generation("my-job", "uid-123", JOB, gen)

    assert g(1) != g(2)
    assert g(1) == g(1)
    assert g(42) == generate_workload_name_with_extra("my-job", "uid-123", JOB, "42")


@pytest.mark.kueue_case("TestGetWorkloadNameForVariant/simple flavor")
def test_variant_simple() -> None:
    got = get_workload_name_for_variant("job-my-job-12345", "uid-123", JOB, "spot")
    assert got == "job-my-job-variant-spot-6320b"


@pytest.mark.parametrize(
    ("flavor", "expected"),
    [
        ("flavor1", "job-my-job-variant-flavor1-054da"),
        ("flavor2", "job-my-job-variant-flavor2-e926b"),
        ("flavor-x", "job-my-job-variant-flavor-x-2ac5f"),
    ],
)
def test_variant_vectors(flavor: str, expected: str) -> None:
    assert get_workload_name_for_variant("job-my-job-12345", "uid-123", JOB, flavor) == expected


@pytest.mark.kueue_case(
    "TestGetWorkloadNameForVariant/flavor name exceeding max length (ShortWorkloadNames=false)",
)
def test_variant_flavor_exceeding_long_limit() -> None:
    got = get_workload_name_for_variant("job-my-job-12345", "uid-123", JOB, "a" * 300)
    assert got == "job-my-job-variant-" + "a" * 228 + "-2e907"
    assert len(got) == 253


@pytest.mark.kueue_case(
    "TestGetWorkloadNameForVariant/flavor name exceeding max length (ShortWorkloadNames=true)",
)
def test_variant_flavor_exceeding_short_limit() -> None:
    got = get_workload_name_for_variant(
        "job-my-job-12345", "uid-123", JOB, "a" * 300, features=SHORT
    )
    assert got == "job-my-job-variant-" + "a" * 38 + "-2e907"
    assert len(got) == 63


@pytest.mark.kueue_case(
    "TestGetWorkloadNameForVariant/different flavors produce different names",
    "TestGetWorkloadNameForVariant/same flavor produces same name",
    "TestGetWorkloadNameForVariant/parent name exceeding max length with different flavors have "
    "same prefix but different hashes",
)
def test_variant_equality_rules() -> None:
    def v(flavor: str, parent: str = "job-my-job-12345") -> str:
        return get_workload_name_for_variant(parent, "uid-123", JOB, flavor)

    assert v("flavor1") != v("flavor2")
    assert v("flavor-x") == v("flavor-x")
    parent = "job-" + "a" * 300 + "-12345"
    a, b = v("flavor1", parent), v("flavor2", parent)
    assert a[:-5] == b[:-5]
    assert a[-5:] != b[-5:]


def test_variant_without_dash_raises() -> None:
    with pytest.raises(ValueError):
        get_workload_name_for_variant("nodash", "uid", JOB, "spot")


def test_prefix_ignores_version_and_lowercases_kind() -> None:
    assert generate_workload_name_prefix("x", "u", GVK("example.com", "v9", "MyJob")) == "myjob-x"
    a = get_workload_name_for_owner_with_gvk("x", "u", GVK("batch", "v1", "Job"))
    b = get_workload_name_for_owner_with_gvk("x", "u", GVK("batch", "v2", "Job"))
    c = get_workload_name_for_owner_with_gvk("x", "u", GVK("other", "v1", "Job"))
    assert a == b
    assert a != c


@given(
    name=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,300}[a-z0-9])?", fullmatch=True),
    uid=st.uuids().map(str),
    short=st.booleans(),
)
def test_names_are_bounded_and_deterministic(name: str, uid: str, short: bool) -> None:
    features = SHORT if short else FeatureGates()
    got = get_workload_name_for_owner_with_gvk(name, uid, JOB, features=features)
    assert len(got) <= (63 if short else 253)
    assert got == get_workload_name_for_owner_with_gvk(name, uid, JOB, features=features)
    assert got[-6] == "-"
