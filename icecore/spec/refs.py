"""Snapshot references: named branches and tags (spec: "Snapshot References").

Retention settings decide what snapshot expiration may delete, so they are validated as Java
validates them: a tag keeps exactly one snapshot and so cannot carry the branch-only settings,
and every limit must be positive (a zero would expire everything).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.jsonfields import get_int, get_str, require_object

MAIN_BRANCH = "main"


class SnapshotRefType(Enum):
    BRANCH = "branch"
    TAG = "tag"


@dataclass(frozen=True)
class SnapshotRef:
    """A branch or tag; a None limit means "use the table's history.expire.* property"."""

    snapshot_id: int
    type: SnapshotRefType
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type is SnapshotRefType.TAG:
            if self.min_snapshots_to_keep is not None:
                raise ValidationError("a tag cannot set min-snapshots-to-keep (branches only)")
            if self.max_snapshot_age_ms is not None:
                raise ValidationError("a tag cannot set max-snapshot-age-ms (branches only)")
        for name, value in self._limits():
            if value is not None and value <= 0:
                raise ValidationError(f"{name} must be greater than 0, got {value}")

    def _limits(self) -> tuple[tuple[str, int | None], ...]:
        return (
            ("min-snapshots-to-keep", self.min_snapshots_to_keep),
            ("max-snapshot-age-ms", self.max_snapshot_age_ms),
            ("max-ref-age-ms", self.max_ref_age_ms),
        )

    @property
    def is_branch(self) -> bool:
        return self.type is SnapshotRefType.BRANCH

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id, "type": self.type.value}
        out.update((name, value) for name, value in self._limits() if value is not None)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> SnapshotRef:
        obj = require_object(obj, "a snapshot ref")
        type_name = get_str(obj, "type")
        try:
            ref_type = SnapshotRefType(type_name.lower())
        except ValueError:
            raise ValidationError(
                f"snapshot ref type must be 'branch' or 'tag', got {type_name!r}"
            ) from None
        return cls(
            snapshot_id=get_int(obj, "snapshot-id"),
            type=ref_type,
            min_snapshots_to_keep=get_int(obj, "min-snapshots-to-keep", None),
            max_snapshot_age_ms=get_int(obj, "max-snapshot-age-ms", None),
            max_ref_age_ms=get_int(obj, "max-ref-age-ms", None),
        )
