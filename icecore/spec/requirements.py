"""What a commit assumes about the table: the REST spec's `TableRequirement`s.

A catalog applies a commit's updates only if every requirement holds against its current
metadata, else it answers 409 and the writer refreshes, re-validates and retries. Which
requirements a commit carries follows Iceberg Java's `UpdateRequirements`: the table is the
one we loaded (uuid), each ref we move still points where we saw it, and schema, spec and
sort-order changes were made against the current ones. Expiry additionally pins every ref,
so that nothing moves onto a snapshot it is removing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from icecore.errors import CommitFailedError, ValidationError
from icecore.spec.jsonfields import require_object
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_updates import (
    AddPartitionSpec,
    AddSchema,
    MetadataUpdate,
    RemoveSnapshotRef,
    RemoveSnapshots,
    SetCurrentSchema,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetSnapshotRef,
)


class UpdateRequirement:
    """A condition on the table's current metadata (None: the table does not exist)."""

    TYPE: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {}

    def check(self, metadata: TableMetadata | None) -> None:
        """Raise CommitFailedError, with what differs, if the requirement does not hold."""
        if metadata is None:
            raise CommitFailedError(f"requirement {self.TYPE} failed: the table does not exist")
        problem = self._problem(metadata)
        if problem:
            raise CommitFailedError(f"requirement {self.TYPE} failed: {problem}")

    def _problem(self, metadata: TableMetadata) -> str | None:
        raise NotImplementedError


def _differs(what: str, expected: object, actual: object) -> str | None:
    return None if expected == actual else f"{what} is {actual}, expected {expected}"


@dataclass(frozen=True)
class AssertCreate(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-create"

    def check(self, metadata: TableMetadata | None) -> None:
        if metadata is not None:
            raise CommitFailedError("requirement assert-create failed: the table exists")


@dataclass(frozen=True)
class AssertTableUUID(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-table-uuid"
    uuid: str

    def _fields(self) -> dict[str, Any]:
        return {"uuid": self.uuid}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs("table uuid", self.uuid, metadata.table_uuid)


@dataclass(frozen=True)
class AssertRefSnapshotId(UpdateRequirement):
    """`snapshot_id` None: the ref must not exist."""

    TYPE: ClassVar[str] = "assert-ref-snapshot-id"
    ref: str
    snapshot_id: int | None

    def _fields(self) -> dict[str, Any]:
        return {"ref": self.ref, "snapshot-id": self.snapshot_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        current = metadata.refs.get(self.ref)
        actual = None if current is None else current.snapshot_id
        return _differs(f"ref {self.ref!r}", self.snapshot_id, actual)


@dataclass(frozen=True)
class AssertLastAssignedFieldId(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-last-assigned-field-id"
    last_assigned_field_id: int

    def _fields(self) -> dict[str, Any]:
        return {"last-assigned-field-id": self.last_assigned_field_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs("last column id", self.last_assigned_field_id, metadata.last_column_id)


@dataclass(frozen=True)
class AssertCurrentSchemaId(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-current-schema-id"
    current_schema_id: int

    def _fields(self) -> dict[str, Any]:
        return {"current-schema-id": self.current_schema_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs("current schema id", self.current_schema_id, metadata.current_schema_id)


@dataclass(frozen=True)
class AssertLastAssignedPartitionId(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-last-assigned-partition-id"
    last_assigned_partition_id: int

    def _fields(self) -> dict[str, Any]:
        return {"last-assigned-partition-id": self.last_assigned_partition_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs(
            "last partition id", self.last_assigned_partition_id, metadata.last_partition_id
        )


@dataclass(frozen=True)
class AssertDefaultSpecId(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-default-spec-id"
    default_spec_id: int

    def _fields(self) -> dict[str, Any]:
        return {"default-spec-id": self.default_spec_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs("default spec id", self.default_spec_id, metadata.default_spec_id)


@dataclass(frozen=True)
class AssertDefaultSortOrderId(UpdateRequirement):
    TYPE: ClassVar[str] = "assert-default-sort-order-id"
    default_sort_order_id: int

    def _fields(self) -> dict[str, Any]:
        return {"default-sort-order-id": self.default_sort_order_id}

    def _problem(self, metadata: TableMetadata) -> str | None:
        return _differs(
            "default sort order id", self.default_sort_order_id, metadata.default_sort_order_id
        )


_PARSERS: dict[str, Callable[[dict[str, Any]], UpdateRequirement]] = {
    AssertCreate.TYPE: lambda o: AssertCreate(),
    AssertTableUUID.TYPE: lambda o: AssertTableUUID(o["uuid"]),
    AssertRefSnapshotId.TYPE: lambda o: AssertRefSnapshotId(o["ref"], o.get("snapshot-id")),
    AssertLastAssignedFieldId.TYPE: lambda o: AssertLastAssignedFieldId(
        int(o["last-assigned-field-id"])
    ),
    AssertCurrentSchemaId.TYPE: lambda o: AssertCurrentSchemaId(int(o["current-schema-id"])),
    AssertLastAssignedPartitionId.TYPE: lambda o: AssertLastAssignedPartitionId(
        int(o["last-assigned-partition-id"])
    ),
    AssertDefaultSpecId.TYPE: lambda o: AssertDefaultSpecId(int(o["default-spec-id"])),
    AssertDefaultSortOrderId.TYPE: lambda o: AssertDefaultSortOrderId(
        int(o["default-sort-order-id"])
    ),
}


def requirement_from_json(obj: Any) -> UpdateRequirement:
    obj = require_object(obj, "a table requirement")
    parse = _PARSERS.get(obj.get("type"))  # type: ignore[arg-type]
    if parse is None:
        raise ValidationError(f"unknown table requirement type {obj.get('type')!r}")
    try:
        return parse(obj)
    except KeyError as exc:
        raise ValidationError(f"requirement {obj['type']!r} lacks {exc.args[0]!r}") from None


def requirements_for(
    base: TableMetadata | None, updates: Sequence[MetadataUpdate]
) -> list[UpdateRequirement]:
    """The requirements of committing `updates` on top of `base` (None: a create)."""
    if base is None:
        return [AssertCreate()]
    out: list[UpdateRequirement] = []
    if base.table_uuid is not None:
        out.append(AssertTableUUID(base.table_uuid))
    pinned: set[str] = set()

    def pin(ref: str) -> None:
        if ref not in pinned:
            pinned.add(ref)
            current = base.refs.get(ref)
            out.append(AssertRefSnapshotId(ref, None if current is None else current.snapshot_id))

    for update in updates:
        if isinstance(update, (SetSnapshotRef, RemoveSnapshotRef)):
            pin(update.ref_name)
        elif isinstance(update, RemoveSnapshots):
            for ref in sorted(base.refs):
                pin(ref)
    kinds = {type(u) for u in updates}
    if AddSchema in kinds:
        out.append(AssertLastAssignedFieldId(base.last_column_id))
    if SetCurrentSchema in kinds:
        out.append(AssertCurrentSchemaId(base.current_schema_id))
    if AddPartitionSpec in kinds:
        out.append(AssertLastAssignedPartitionId(base.last_partition_id))
    if SetDefaultSpec in kinds:
        out.append(AssertDefaultSpecId(base.default_spec_id))
    if SetDefaultSortOrder in kinds:
        out.append(AssertDefaultSortOrderId(base.default_sort_order_id))
    return out
