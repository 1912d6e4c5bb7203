"""A table's policy: the config's layers (`config.PolicyLayers`), then the table's own
properties, so a table's owner sets its maintenance where the table lives (as Amoro's
`self-optimizing.*` table properties do).

Table properties (all optional; values in the jobs' grammar: sizes `128MB`, durations `7d`,
ratios `0.1` or `10%`):

    property                          policy key               default
    icefloe.maintenance.enabled       (false: fleets skip it)  true
    icefloe.minor.file-count          minor_file_count         12
    icefloe.min-target-size-ratio     min_target_size_ratio    0.75
    icefloe.target-file-size-bytes    target_file_size_bytes   write.target-file-size-bytes
    icefloe.major.delete-ratio        major_delete_ratio       0.1
    icefloe.manifests.max-data-count  max_data_manifests       100
    icefloe.expire.interval           expire_interval          1d
    icefloe.expire.retain-last        retain_last              1
    icefloe.expire.max-snapshot-age   max_snapshot_age         5d
    icefloe.orphan.interval           orphan_interval          7d
    icefloe.orphan.older-than         orphan_older_than        3d

An unknown `icefloe.maintenance.*`, `icefloe.minor.*`, `icefloe.major.*`,
`icefloe.manifests.*`, `icefloe.expire.*` or `icefloe.orphan.*` property, or a value that
does not parse, is a `PolicyError` for that table alone: the fleet reports it and leaves the
table alone rather than guess (a typo in `enabled` must not start maintenance the owner meant
to stop). Other `icefloe.*` properties (`icefloe.job`, written by the jobs) are not policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icefloe_airflow.policy import MaintenancePolicy

ENABLED = "icefloe.maintenance.enabled"
PROPERTY_KEYS = {
    "icefloe.minor.file-count": "minor_file_count",
    "icefloe.min-target-size-ratio": "min_target_size_ratio",
    "icefloe.target-file-size-bytes": "target_file_size_bytes",
    "icefloe.major.delete-ratio": "major_delete_ratio",
    "icefloe.manifests.max-data-count": "max_data_manifests",
    "icefloe.expire.interval": "expire_interval",
    "icefloe.expire.retain-last": "retain_last",
    "icefloe.expire.max-snapshot-age": "max_snapshot_age",
    "icefloe.orphan.interval": "orphan_interval",
    "icefloe.orphan.older-than": "orphan_older_than",
}
_POLICY_PREFIXES = (
    "icefloe.maintenance.",
    "icefloe.minor.",
    "icefloe.major.",
    "icefloe.manifests.",
    "icefloe.expire.",
    "icefloe.orphan.",
)
_INTEGER_KEYS = frozenset({"minor_file_count", "max_data_manifests", "retain_last"})


class PolicyError(ValueError):
    """A table's policy properties cannot be read; the message names the property."""


@dataclass(frozen=True)
class TablePolicy:
    """What the fleet does with one table: whether at all, and with which thresholds."""

    enabled: bool
    policy: MaintenancePolicy
    from_properties: tuple[str, ...] = ()  # the properties that set it, for `why`


def table_policy(config_values: Mapping[str, Any], properties: Mapping[str, str]) -> TablePolicy:
    """The config's policy values overridden by the table's properties."""
    unknown = sorted(
        key
        for key in properties
        if key.startswith(_POLICY_PREFIXES) and key != ENABLED and key not in PROPERTY_KEYS
    )
    if unknown:
        raise PolicyError(
            f"unknown policy property {unknown[0]}; known: {ENABLED}, "
            + ", ".join(sorted(PROPERTY_KEYS))
        )
    enabled = True
    if ENABLED in properties:
        text = properties[ENABLED].strip().lower()
        if text not in ("true", "false"):
            raise PolicyError(f"{ENABLED}: expected true or false, got {properties[ENABLED]!r}")
        enabled = text == "true"
    values = dict(config_values)
    used = []
    for prop, key in PROPERTY_KEYS.items():
        if prop in properties:
            values[key] = _typed(key, properties[prop])
            used.append(prop)
    try:
        policy = MaintenancePolicy.from_mapping(values)
    except ValueError as exc:
        named = [p for p, k in PROPERTY_KEYS.items() if k in str(exc) and p in used]
        where = f"property {named[0]}: " if named else ""
        raise PolicyError(f"{where}{exc}") from None
    return TablePolicy(enabled, policy, tuple(used))


def _typed(key: str, text: str) -> Any:
    """Properties are strings; counts must be numbers before the policy reads them (sizes,
    durations and ratios parse from text)."""
    if key in _INTEGER_KEYS:
        try:
            return int(text.strip())
        except ValueError:
            prop = next(p for p, k in PROPERTY_KEYS.items() if k == key)
            raise PolicyError(f"{prop}: expected a whole number, got {text!r}") from None
    return text
