"""A commit described as events: the REST spec's `TableUpdate`s (Java's `MetadataUpdate`).

A REST catalog is not sent a new metadata file: it is sent what changed (add this snapshot,
point `main` at it, set these properties) and applies the changes to whatever its current
metadata is, after checking the commit's requirements (`icecore.spec.requirements`). The SQL
catalog applies the very same events locally, so every commit takes one path whatever the
catalog. Each class carries the spec's `action` name and JSON field names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from icecore.errors import ValidationError
from icecore.spec.jsonfields import require_object
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.refs import SnapshotRef
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Snapshot
from icecore.spec.sorting import SortOrder

LAST_ADDED = -1  # set-current-schema / set-default-spec / ...: "the one added by this commit"


class MetadataUpdate:
    """One change to a table's metadata, as the REST spec names it (`action`)."""

    ACTION: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class AssignUUID(MetadataUpdate):
    ACTION: ClassVar[str] = "assign-uuid"
    uuid: str

    def _fields(self) -> dict[str, Any]:
        return {"uuid": self.uuid}


@dataclass(frozen=True)
class UpgradeFormatVersion(MetadataUpdate):
    ACTION: ClassVar[str] = "upgrade-format-version"
    format_version: int

    def _fields(self) -> dict[str, Any]:
        return {"format-version": self.format_version}


@dataclass(frozen=True)
class AddSchema(MetadataUpdate):
    ACTION: ClassVar[str] = "add-schema"
    schema: Schema
    last_column_id: int  # deprecated in the spec, still sent: older servers require it

    def _fields(self) -> dict[str, Any]:
        return {"schema": self.schema.to_json(), "last-column-id": self.last_column_id}


@dataclass(frozen=True)
class SetCurrentSchema(MetadataUpdate):
    ACTION: ClassVar[str] = "set-current-schema"
    schema_id: int

    def _fields(self) -> dict[str, Any]:
        return {"schema-id": self.schema_id}


@dataclass(frozen=True)
class AddPartitionSpec(MetadataUpdate):
    ACTION: ClassVar[str] = "add-spec"
    spec: PartitionSpec

    def _fields(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json()}


@dataclass(frozen=True)
class SetDefaultSpec(MetadataUpdate):
    ACTION: ClassVar[str] = "set-default-spec"
    spec_id: int

    def _fields(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id}


@dataclass(frozen=True)
class AddSortOrder(MetadataUpdate):
    ACTION: ClassVar[str] = "add-sort-order"
    sort_order: SortOrder

    def _fields(self) -> dict[str, Any]:
        return {"sort-order": self.sort_order.to_json()}


@dataclass(frozen=True)
class SetDefaultSortOrder(MetadataUpdate):
    ACTION: ClassVar[str] = "set-default-sort-order"
    sort_order_id: int

    def _fields(self) -> dict[str, Any]:
        return {"sort-order-id": self.sort_order_id}


@dataclass(frozen=True)
class AddSnapshot(MetadataUpdate):
    ACTION: ClassVar[str] = "add-snapshot"
    snapshot: Snapshot

    def _fields(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot.to_json()}


@dataclass(frozen=True)
class SetSnapshotRef(MetadataUpdate):
    ACTION: ClassVar[str] = "set-snapshot-ref"
    ref_name: str
    ref: SnapshotRef

    def _fields(self) -> dict[str, Any]:
        return {"ref-name": self.ref_name, **self.ref.to_json()}


@dataclass(frozen=True)
class RemoveSnapshotRef(MetadataUpdate):
    ACTION: ClassVar[str] = "remove-snapshot-ref"
    ref_name: str

    def _fields(self) -> dict[str, Any]:
        return {"ref-name": self.ref_name}


@dataclass(frozen=True)
class RemoveSnapshots(MetadataUpdate):
    ACTION: ClassVar[str] = "remove-snapshots"
    snapshot_ids: tuple[int, ...]

    def _fields(self) -> dict[str, Any]:
        return {"snapshot-ids": list(self.snapshot_ids)}


@dataclass(frozen=True)
class SetLocation(MetadataUpdate):
    ACTION: ClassVar[str] = "set-location"
    location: str

    def _fields(self) -> dict[str, Any]:
        return {"location": self.location}


@dataclass(frozen=True)
class SetProperties(MetadataUpdate):
    ACTION: ClassVar[str] = "set-properties"
    updates: dict[str, str] = field(default_factory=dict)

    def _fields(self) -> dict[str, Any]:
        return {"updates": dict(self.updates)}


@dataclass(frozen=True)
class RemoveProperties(MetadataUpdate):
    ACTION: ClassVar[str] = "remove-properties"
    removals: tuple[str, ...]

    def _fields(self) -> dict[str, Any]:
        return {"removals": list(self.removals)}


@dataclass(frozen=True)
class SetStatistics(MetadataUpdate):
    """A statistics file of one snapshot; kept as the JSON object the metadata holds."""

    ACTION: ClassVar[str] = "set-statistics"
    statistics: dict[str, Any]

    def _fields(self) -> dict[str, Any]:
        return {"snapshot-id": self.statistics["snapshot-id"], "statistics": self.statistics}


@dataclass(frozen=True)
class RemoveStatistics(MetadataUpdate):
    ACTION: ClassVar[str] = "remove-statistics"
    snapshot_id: int

    def _fields(self) -> dict[str, Any]:
        return {"snapshot-id": self.snapshot_id}


@dataclass(frozen=True)
class SetPartitionStatistics(MetadataUpdate):
    ACTION: ClassVar[str] = "set-partition-statistics"
    partition_statistics: dict[str, Any]

    def _fields(self) -> dict[str, Any]:
        return {"partition-statistics": self.partition_statistics}


@dataclass(frozen=True)
class RemovePartitionStatistics(MetadataUpdate):
    ACTION: ClassVar[str] = "remove-partition-statistics"
    snapshot_id: int

    def _fields(self) -> dict[str, Any]:
        return {"snapshot-id": self.snapshot_id}


def _ref(obj: dict[str, Any]) -> SetSnapshotRef:
    return SetSnapshotRef(obj["ref-name"], SnapshotRef.from_json(obj))


_PARSERS: dict[str, Callable[[dict[str, Any]], MetadataUpdate]] = {
    AssignUUID.ACTION: lambda o: AssignUUID(o["uuid"]),
    UpgradeFormatVersion.ACTION: lambda o: UpgradeFormatVersion(int(o["format-version"])),
    AddSchema.ACTION: lambda o: AddSchema(
        Schema.from_json(o["schema"]), int(o.get("last-column-id", -1))
    ),
    SetCurrentSchema.ACTION: lambda o: SetCurrentSchema(int(o["schema-id"])),
    AddPartitionSpec.ACTION: lambda o: AddPartitionSpec(PartitionSpec.from_json(o["spec"])),
    SetDefaultSpec.ACTION: lambda o: SetDefaultSpec(int(o["spec-id"])),
    AddSortOrder.ACTION: lambda o: AddSortOrder(SortOrder.from_json(o["sort-order"])),
    SetDefaultSortOrder.ACTION: lambda o: SetDefaultSortOrder(int(o["sort-order-id"])),
    AddSnapshot.ACTION: lambda o: AddSnapshot(Snapshot.from_json(o["snapshot"])),
    SetSnapshotRef.ACTION: _ref,
    RemoveSnapshotRef.ACTION: lambda o: RemoveSnapshotRef(o["ref-name"]),
    RemoveSnapshots.ACTION: lambda o: RemoveSnapshots(tuple(int(i) for i in o["snapshot-ids"])),
    SetLocation.ACTION: lambda o: SetLocation(o["location"]),
    SetProperties.ACTION: lambda o: SetProperties(dict(o["updates"])),
    RemoveProperties.ACTION: lambda o: RemoveProperties(tuple(o["removals"])),
    SetStatistics.ACTION: lambda o: SetStatistics(dict(o["statistics"])),
    RemoveStatistics.ACTION: lambda o: RemoveStatistics(int(o["snapshot-id"])),
    SetPartitionStatistics.ACTION: lambda o: SetPartitionStatistics(
        dict(o["partition-statistics"])
    ),
    RemovePartitionStatistics.ACTION: lambda o: RemovePartitionStatistics(int(o["snapshot-id"])),
}


def update_from_json(obj: Any) -> MetadataUpdate:
    obj = require_object(obj, "a table update")
    action = obj.get("action")
    parse = _PARSERS.get(action)  # type: ignore[arg-type]
    if parse is None:
        raise ValidationError(f"unknown table update action {action!r}")
    try:
        return parse(obj)
    except KeyError as exc:
        raise ValidationError(f"table update {action!r} lacks {exc.args[0]!r}") from None
