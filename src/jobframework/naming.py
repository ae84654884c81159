"""Workload names, byte-identical to Kueue's ``workload_names.go``.

A name is ``<prefix>-<hash>``: the prefix is ``lower(kind) + "-" + owner name`` cut to the
limit, the hash the first 5 hex digits of SHA-1 over ``kind``, ``group``, owner name, owner
UID and an optional *extra* part, newline-separated. The limit is 253 bytes, or 63 with
the ``ShortWorkloadNames`` gate. Reproducing the hash exactly lets Workloads made by Go
Kueue and by this library adopt each other.
"""

from __future__ import annotations

import hashlib

from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .runtime.objects import GVK

HASH_LENGTH = 5
LONG_MAX_WORKLOAD_NAME_LENGTH = 253
SHORT_MAX_WORKLOAD_NAME_LENGTH = 63


def max_workload_name_length(features: FeatureGates = DEFAULT_FEATURES) -> int:
    """63 with ``ShortWorkloadNames``, else 253."""
    if features.enabled(FeatureGate.SHORT_WORKLOAD_NAMES):
        return SHORT_MAX_WORKLOAD_NAME_LENGTH
    return LONG_MAX_WORKLOAD_NAME_LENGTH


def max_prefix_length(features: FeatureGates = DEFAULT_FEATURES) -> int:
    """The name limit minus the ``-`` separator and the hash: 247 or 57."""
    return max_workload_name_length(features) - 1 - HASH_LENGTH


def _truncate(s: str, n: int) -> str:
    # Go truncates bytes. Valid object names are ASCII, so bytes and characters agree;
    # for anything else a cut multi-byte character is dropped instead of kept half.
    raw = s.encode()
    if len(raw) <= n:
        return s
    return raw[:n].decode("utf-8", "ignore")


def _hash(owner_name: str, owner_uid: str, gvk: GVK, extra: str) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    h.update(f"{gvk.kind}\n{gvk.group}\n{owner_name}\n{owner_uid}".encode())
    if extra:
        h.update(f"\n{extra}".encode())
    return h.hexdigest()


def _with_hash(
    prefix: str, owner_name: str, owner_uid: str, gvk: GVK, extra: str, features: FeatureGates
) -> str:
    digest = _hash(owner_name, owner_uid, gvk, extra)[:HASH_LENGTH]
    return f"{_truncate(prefix, max_prefix_length(features))}-{digest}"


def generate_workload_name_prefix(
    owner_name: str, owner_uid: str, gvk: GVK, *, features: FeatureGates = DEFAULT_FEATURES
) -> str:
    """``lower(kind)-<owner name>`` cut to the prefix limit (``GenerateWorkloadNamePrefix``)."""
    del owner_uid  # Part of Go's signature; the prefix does not depend on it.
    return _truncate(f"{gvk.kind.lower()}-{owner_name}", max_prefix_length(features))


def generate_workload_name_with_extra(
    owner_name: str,
    owner_uid: str,
    gvk: GVK,
    extra: str,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> str:
    """Prefix plus the hash of owner identity and ``extra`` (``GenerateWorkloadNameWithExtra``).

    The hash always covers the full, untruncated owner name; an empty ``extra`` is not hashed.
    """
    prefix = generate_workload_name_prefix(owner_name, owner_uid, gvk, features=features)
    return _with_hash(prefix, owner_name, owner_uid, gvk, extra, features)


def get_workload_name_for_owner_with_gvk(
    owner_name: str, owner_uid: str, gvk: GVK, *, features: FeatureGates = DEFAULT_FEATURES
) -> str:
    """The name of the Workload of a job (``GetWorkloadNameForOwnerWithGVK``)."""
    return generate_workload_name_with_extra(owner_name, owner_uid, gvk, "", features=features)


def get_workload_name_for_owner_with_gvk_and_generation(
    owner_name: str,
    owner_uid: str,
    gvk: GVK,
    generation: int,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> str:
    """Name hashed with the decimal generation as extra (elastic workload slices)."""
    return generate_workload_name_with_extra(
        owner_name, owner_uid, gvk, str(generation), features=features
    )


def get_workload_name_for_variant(
    parent_name: str,
    owner_uid: str,
    gvk: GVK,
    flavor: str,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> str:
    """``<parent without hash>-variant-<flavor>-<hash>`` (``GetWorkloadNameForVariant``).

    The hash covers the parent *workload* name as owner name and the flavor as extra.
    Raises ``ValueError`` when ``parent_name`` has no ``-`` (Go panics).
    """
    cut = parent_name.rfind("-")
    if cut < 0:
        raise ValueError(f"workload name {parent_name!r} has no hash suffix")
    prefix = f"{parent_name[:cut]}-variant-{flavor}"
    return _with_hash(prefix, parent_name, owner_uid, gvk, flavor, features)
