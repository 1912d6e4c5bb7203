"""Pure transitions from one TableMetadata to the next (Java's `TableMetadata.Builder`).

Every commit, snapshot-producing or not, is `base -> builder -> new metadata`; nothing here
touches storage. Keeping the transitions pure is what makes a retry safe: after a lost
compare-and-swap the same update is simply re-applied to the refreshed base.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.metadata import SUPPORTED_FORMAT_VERSIONS, TableMetadata
from icecore.spec.partitioning import PARTITION_FIELD_ID_START, UNPARTITIONED, PartitionSpec
from icecore.spec.properties import FORMAT_VERSION, METADATA_PREVIOUS_VERSIONS_MAX
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.snapshots import MetadataLogEntry, Snapshot, SnapshotLogEntry
from icecore.spec.sorting import UNSORTED, SortOrder

MAX_FORMAT_VERSION = max(SUPPORTED_FORMAT_VERSIONS)
STATISTICS = "statistics"
PARTITION_STATISTICS = "partition-statistics"
# Placeholder timestamp of a snapshot-log entry that takes the new metadata's own timestamp.
_AT_BUILD = -1


def now_ms() -> int:
    return int(time.time() * 1000)


def new_table_metadata(
    schema: Schema,
    location: str,
    *,
    spec: PartitionSpec = UNPARTITIONED,
    sort_order: SortOrder = UNSORTED,
    properties: Mapping[str, str] | None = None,
    table_uuid: str | None = None,
) -> TableMetadata:
    """Metadata of a new, empty table (v2, or the `format-version` property's version, which
    is not kept as a property, as in Java); the schema's, spec's and order's ids are kept."""
    spec.validate(schema)
    properties = dict(properties or {})
    version = _format_version_property(properties.pop(FORMAT_VERSION, None))
    schema = replace(schema, schema_id=0)
    spec = replace(spec, spec_id=0)
    return TableMetadata(
        format_version=version,
        next_row_id=0 if version >= 3 else None,
        table_uuid=table_uuid or str(uuid.uuid4()),
        location=location.rstrip("/"),
        last_sequence_number=0,
        last_updated_ms=now_ms(),
        last_column_id=schema.highest_field_id,
        schemas=(schema,),
        current_schema_id=0,
        partition_specs=(spec,),
        default_spec_id=0,
        last_partition_id=max(spec.last_assigned_field_id, PARTITION_FIELD_ID_START - 1),
        sort_orders=(sort_order,) if sort_order.is_unsorted else (UNSORTED, sort_order),
        default_sort_order_id=sort_order.order_id,
        properties=properties,
    )


def _format_version_property(value: str | None) -> int:
    if value is None:
        return 2
    if value.strip() not in ("1", "2", "3"):
        raise ValidationError(f"{FORMAT_VERSION} must be 1, 2 or 3, got {value!r}")
    return max(2, int(value))  # icecore writes v1 tables as v2


class MetadataBuilder:
    """Accumulates changes to `base`; `build()` returns the new metadata.

    The metadata-log gets `base.metadata_location` on build (when it has one), trimmed to
    `write.metadata.previous-versions-max` (the catalog deletes what fell off when
    `write.metadata.delete-after-commit.enabled` is set).
    """

    def __init__(self, base: TableMetadata) -> None:
        self.base = base
        self._changes: dict[str, Any] = {}
        self._snapshots = list(base.snapshots)
        self._refs = dict(base.refs)
        self._snapshot_log = list(base.snapshot_log)
        self._last_sequence_number = base.last_sequence_number
        self._current_snapshot_id = base.current_snapshot_id
        self._properties = dict(base.properties)
        self._schemas = list(base.schemas)
        self._specs = list(base.partition_specs)
        self._orders = list(base.sort_orders)
        self._extra = dict(base.extra)
        self._format_version = base.format_version
        self._next_row_id = base.next_row_id
        self._last_added: dict[str, int] = {}  # "schema" / "spec" / "order" -> id added

    # Snapshots and refs -------------------------------------------------------------------

    def add_snapshot(self, snapshot: Snapshot) -> MetadataBuilder:
        if any(s.snapshot_id == snapshot.snapshot_id for s in self._snapshots):
            raise ValidationError(f"snapshot id {snapshot.snapshot_id} already exists")
        if snapshot.sequence_number <= self._last_sequence_number:
            raise ValidationError(
                f"snapshot {snapshot.snapshot_id} has sequence number {snapshot.sequence_number}, "
                f"not above the table's last sequence number {self._last_sequence_number}"
            )
        if self._format_version >= 3:
            self._add_row_range(snapshot)
        self._snapshots.append(snapshot)
        self._last_sequence_number = max(self._last_sequence_number, snapshot.sequence_number)
        return self

    def _add_row_range(self, snapshot: Snapshot) -> None:
        """v3: a snapshot's new rows take ids from the table's next-row-id on (Java's rule)."""
        if snapshot.first_row_id is None or snapshot.added_rows is None:
            raise ValidationError(
                f"snapshot {snapshot.snapshot_id} lacks first-row-id/added-rows (format v3)"
            )
        assert self._next_row_id is not None
        if snapshot.first_row_id < self._next_row_id:
            raise ValidationError(
                f"snapshot {snapshot.snapshot_id} has first-row-id {snapshot.first_row_id}, "
                f"behind the table's next-row-id {self._next_row_id}"
            )
        self._next_row_id = snapshot.first_row_id + snapshot.added_rows

    def set_branch_snapshot(self, branch: str, snapshot_id: int) -> MetadataBuilder:
        """Point `branch` at a snapshot, keeping the branch's retention settings."""
        ref = self._refs.get(branch)
        if ref is not None and not ref.is_branch:
            raise ValidationError(f"{branch!r} is a tag, not a branch: tags cannot be committed to")
        if ref is None:
            ref = SnapshotRef(snapshot_id, SnapshotRefType.BRANCH)
        return self.set_ref(branch, replace(ref, snapshot_id=snapshot_id))

    def set_ref(self, name: str, ref: SnapshotRef) -> MetadataBuilder:
        snapshot = self._snapshot(ref.snapshot_id)
        if name == MAIN_BRANCH and not ref.is_branch:
            raise ValidationError("'main' must be a branch")
        self._refs[name] = ref
        if name == MAIN_BRANCH and self._current_snapshot_id != ref.snapshot_id:
            self._current_snapshot_id = ref.snapshot_id
            if any(s.snapshot_id == ref.snapshot_id for s in self.base.snapshots):
                # An existing snapshot (rollback, fast-forward) becomes current now, not when it
                # was written: time travel reads the log, and an older timestamp would claim it
                # was current while the previous head still was. Java logs the commit time too.
                timestamp = _AT_BUILD
            else:
                timestamp = max(snapshot.timestamp_ms, self.base.last_updated_ms)
            self._snapshot_log.append(SnapshotLogEntry(timestamp, ref.snapshot_id))
        return self

    def remove_ref(self, name: str) -> MetadataBuilder:
        if name not in self._refs:
            raise ValidationError(f"no branch or tag named {name!r}")
        del self._refs[name]
        if name == MAIN_BRANCH:
            self._current_snapshot_id = None
        return self

    def remove_snapshots(self, snapshot_ids: Iterable[int]) -> MetadataBuilder:
        """Drop snapshots, refs pointing at them, their snapshot-log entries and statistics."""
        gone = set(snapshot_ids)
        self._snapshots = [s for s in self._snapshots if s.snapshot_id not in gone]
        for name in [n for n, r in self._refs.items() if r.snapshot_id in gone]:
            self.remove_ref(name)
        # Java keeps only the log suffix after the last removed entry, so the log never
        # claims a history that can no longer be read back.
        kept: list[SnapshotLogEntry] = []
        for entry in self._snapshot_log:
            if entry.snapshot_id in gone:
                kept = []
            else:
                kept.append(entry)
        self._snapshot_log = kept
        for key in (STATISTICS, PARTITION_STATISTICS):
            if isinstance(self._extra.get(key), list):
                self._extra[key] = [s for s in self._extra[key] if s.get("snapshot-id") not in gone]
        return self

    # Identity and format --------------------------------------------------------------------

    def assign_uuid(self, table_uuid: str) -> MetadataBuilder:
        if self.base.table_uuid not in (None, table_uuid):
            raise ValidationError(
                f"cannot reassign table uuid {self.base.table_uuid} to {table_uuid}"
            )
        self._changes["table_uuid"] = table_uuid
        return self

    def upgrade_format_version(self, version: int) -> MetadataBuilder:
        """Only upward, as Iceberg allows; v1 is written as v2, so any commit upgrades it."""
        if version < self.base.format_version:
            raise ValidationError(
                f"cannot downgrade format version {self.base.format_version} to {version}"
            )
        if version > MAX_FORMAT_VERSION:
            raise ValidationError(f"format version {version} is not supported by icecore")
        if version >= 3 > self._format_version:
            # Row lineage starts at the upgrade: earlier rows have no ids until their
            # manifests are listed by a v3 manifest list, which assigns them.
            self._next_row_id = 0
        self._format_version = max(self._format_version, version)
        return self

    # Schema, specs, orders, properties ----------------------------------------------------

    def set_properties(self, updates: Mapping[str, str]) -> MetadataBuilder:
        """`format-version` is reserved, as in Java: setting it upgrades the table."""
        updates = {str(k): str(v) for k, v in updates.items()}
        if FORMAT_VERSION in updates:
            version = updates.pop(FORMAT_VERSION)
            if not version.strip().isdigit():
                raise ValidationError(f"{FORMAT_VERSION} must be a number, got {version!r}")
            self.upgrade_format_version(int(version))
        self._properties.update(updates)
        return self

    def remove_properties(self, keys: Iterable[str]) -> MetadataBuilder:
        for key in keys:
            self._properties.pop(key, None)
        return self

    def add_schema(self, schema: Schema, set_current: bool = True) -> int:
        """Add a schema (reusing an identical one) and return its id."""
        for existing in self._schemas:
            if existing.fields == schema.fields and (
                existing.identifier_field_ids == schema.identifier_field_ids
            ):
                new_id = existing.schema_id
                break
        else:
            new_id = max(s.schema_id for s in self._schemas) + 1
            self._schemas.append(replace(schema, schema_id=new_id))
        self._last_added["schema"] = new_id
        if set_current:
            self.set_current_schema(new_id)
        return new_id

    def set_current_schema(self, schema_id: int) -> MetadataBuilder:
        """`schema_id` -1 means the schema added last by this builder (the REST convention)."""
        schema_id = self._resolve("schema", schema_id, [s.schema_id for s in self._schemas])
        self._changes["current_schema_id"] = schema_id
        return self

    def set_default_spec(self, spec_id: int) -> MetadataBuilder:
        spec_id = self._resolve("spec", spec_id, [s.spec_id for s in self._specs])
        self._changes["default_spec_id"] = spec_id
        return self

    def set_default_sort_order(self, order_id: int) -> MetadataBuilder:
        order_id = self._resolve("order", order_id, [o.order_id for o in self._orders])
        self._changes["default_sort_order_id"] = order_id
        return self

    def _resolve(self, kind: str, given: int, known: list[int]) -> int:
        if given == -1:
            if kind not in self._last_added:
                raise ValidationError(f"cannot use the last added {kind}: none was added")
            return self._last_added[kind]
        if given not in known:
            raise ValidationError(f"{kind} id {given} does not exist")
        return given

    def add_partition_spec(self, spec: PartitionSpec, set_default: bool = True) -> int:
        """Add a spec (reusing a compatible one with the same field ids) and return its id."""
        schema = self._current_schema()
        spec.validate(schema)
        for existing in self._specs:
            if existing.fields == spec.fields:
                new_id = existing.spec_id
                break
        else:
            new_id = max(s.spec_id for s in self._specs) + 1
            self._specs.append(replace(spec, spec_id=new_id))
        last = self._changes.get("last_partition_id", self.base.last_partition_id)
        self._changes["last_partition_id"] = max(last, spec.last_assigned_field_id)
        self._last_added["spec"] = new_id
        if set_default:
            self.set_default_spec(new_id)
        return new_id

    def add_sort_order(self, order: SortOrder, set_default: bool = True) -> int:
        for existing in self._orders:
            if existing.fields == order.fields:
                new_id = existing.order_id
                break
        else:
            new_id = max(o.order_id for o in self._orders) + 1
            self._orders.append(replace(order, order_id=new_id))
        self._last_added["order"] = new_id
        if set_default:
            self.set_default_sort_order(new_id)
        return new_id

    def set_location(self, location: str) -> MetadataBuilder:
        self._changes["location"] = location.rstrip("/")
        return self

    # Statistics (kept as the JSON objects the metadata holds) ------------------------------

    def set_statistics(self, statistics: dict[str, Any], key: str = STATISTICS) -> MetadataBuilder:
        """Add or replace the statistics file of one snapshot; `key` is `statistics` or
        `partition-statistics`."""
        self.remove_statistics(statistics.get("snapshot-id"), key)
        self._extra[key] = [*(self._extra.get(key) or ()), statistics]
        return self

    def remove_statistics(self, snapshot_id: Any, key: str = STATISTICS) -> MetadataBuilder:
        if key in self._extra:
            self._extra[key] = [
                s for s in self._extra[key] or () if s.get("snapshot-id") != snapshot_id
            ]
        return self

    # Build --------------------------------------------------------------------------------

    def build(self, timestamp_ms: int | None = None) -> TableMetadata:
        base = self.base
        metadata_log = list(base.metadata_log)
        if base.metadata_location is not None:
            metadata_log.append(MetadataLogEntry(base.last_updated_ms, base.metadata_location))
        keep = max(1, METADATA_PREVIOUS_VERSIONS_MAX.read(self._properties))
        if len(metadata_log) > keep:
            metadata_log = metadata_log[len(metadata_log) - keep :]
        schemas = tuple(self._schemas)
        last_updated_ms = max(timestamp_ms or now_ms(), base.last_updated_ms)
        snapshot_log = tuple(
            replace(e, timestamp_ms=last_updated_ms) if e.timestamp_ms == _AT_BUILD else e
            for e in self._snapshot_log
        )
        upgraded = base.upgrade_to_v2() if base.format_version == 1 else base
        return replace(
            upgraded,
            **self._changes,
            format_version=max(upgraded.format_version, self._format_version),
            next_row_id=self._next_row_id,
            last_updated_ms=last_updated_ms,
            last_sequence_number=self._last_sequence_number,
            last_column_id=max(base.last_column_id, *(s.highest_field_id for s in schemas)),
            schemas=schemas,
            partition_specs=tuple(self._specs),
            sort_orders=tuple(self._orders),
            properties=self._properties,
            current_snapshot_id=self._current_snapshot_id,
            snapshots=tuple(self._snapshots),
            snapshot_log=snapshot_log,
            metadata_log=tuple(metadata_log),
            refs=self._refs,
            extra=self._extra,
            metadata_location=None,
        )

    def _current_schema(self) -> Schema:
        schema_id = self._changes.get("current_schema_id", self.base.current_schema_id)
        return next(s for s in self._schemas if s.schema_id == schema_id)

    def _snapshot(self, snapshot_id: int) -> Snapshot:
        for s in self._snapshots:
            if s.snapshot_id == snapshot_id:
                return s
        raise ValidationError(f"snapshot {snapshot_id} does not exist")
