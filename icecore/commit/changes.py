"""A commit as requirements + updates: derived from the metadata an update built, applied by
whichever catalog holds the table.

Every icecore update (snapshot producers, expiry, schema, spec, sort order, properties,
refs) builds the metadata it wants from its base; `TableCommit.between(base, updated)` turns
the difference into the REST spec's events, and `apply_updates` replays them on a base with
the same `MetadataBuilder` transitions. The SQL catalog commits by applying the events to the
metadata it compares-and-swaps against; the REST catalog sends them. Replaying the events on
`base` gives back `updated` (tests hold every operation to that), so both catalogs commit
exactly what the update built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import PARTITION_STATISTICS, STATISTICS, MetadataBuilder
from icecore.spec.metadata_updates import (
    LAST_ADDED,
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    AssignUUID,
    MetadataUpdate,
    RemovePartitionStatistics,
    RemoveProperties,
    RemoveSnapshotRef,
    RemoveSnapshots,
    RemoveStatistics,
    SetCurrentSchema,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetLocation,
    SetPartitionStatistics,
    SetProperties,
    SetSnapshotRef,
    SetStatistics,
    UpgradeFormatVersion,
)
from icecore.spec.requirements import UpdateRequirement, requirements_for


@dataclass(frozen=True)
class TableCommit:
    """What a catalog is asked to do: check `requirements`, then apply `updates`."""

    requirements: tuple[UpdateRequirement, ...]
    updates: tuple[MetadataUpdate, ...]

    @classmethod
    def between(cls, base: TableMetadata, updated: TableMetadata) -> TableCommit:
        updates = diff_metadata(base, updated)
        return cls(tuple(requirements_for(base, updates)), tuple(updates))

    def to_json(self) -> dict[str, Any]:
        """The body of the REST spec's `CommitTableRequest` (without the identifier)."""
        return {
            "requirements": [r.to_json() for r in self.requirements],
            "updates": [u.to_json() for u in self.updates],
        }

    def added_snapshot_ids(self) -> list[int]:
        return [u.snapshot.snapshot_id for u in self.updates if isinstance(u, AddSnapshot)]


def _statistics(metadata: TableMetadata, key: str) -> dict[Any, dict[str, Any]]:
    return {s.get("snapshot-id"): s for s in metadata.extra.get(key) or ()}


def diff_metadata(base: TableMetadata, updated: TableMetadata) -> list[MetadataUpdate]:
    """The events that turn `base` into `updated`, in the order a catalog must apply them."""
    out: list[MetadataUpdate] = []
    if updated.table_uuid != base.table_uuid and updated.table_uuid is not None:
        out.append(AssignUUID(updated.table_uuid))
    if updated.format_version > base.format_version or base.format_version == 1:
        out.append(UpgradeFormatVersion(max(updated.format_version, 2)))

    schema_ids = {s.schema_id for s in base.schemas}
    new_schemas = [s for s in updated.schemas if s.schema_id not in schema_ids]
    out.extend(AddSchema(s, updated.last_column_id) for s in new_schemas)
    if updated.current_schema_id != base.current_schema_id:
        last = new_schemas[-1].schema_id if new_schemas else None
        current = updated.current_schema_id
        out.append(SetCurrentSchema(LAST_ADDED if current == last else current))

    spec_ids = {s.spec_id for s in base.partition_specs}
    new_specs = [s for s in updated.partition_specs if s.spec_id not in spec_ids]
    out.extend(AddPartitionSpec(s) for s in new_specs)
    if updated.default_spec_id != base.default_spec_id:
        last = new_specs[-1].spec_id if new_specs else None
        default = updated.default_spec_id
        out.append(SetDefaultSpec(LAST_ADDED if default == last else default))

    order_ids = {o.order_id for o in base.sort_orders}
    new_orders = [o for o in updated.sort_orders if o.order_id not in order_ids]
    out.extend(AddSortOrder(o) for o in new_orders)
    if updated.default_sort_order_id != base.default_sort_order_id:
        last = new_orders[-1].order_id if new_orders else None
        default = updated.default_sort_order_id
        out.append(SetDefaultSortOrder(LAST_ADDED if default == last else default))

    if updated.location != base.location:
        out.append(SetLocation(updated.location))
    changed = {k: v for k, v in updated.properties.items() if base.properties.get(k) != v}
    if changed:
        out.append(SetProperties(changed))
    removed = tuple(k for k in base.properties if k not in updated.properties)
    if removed:
        out.append(RemoveProperties(removed))

    snapshot_ids = {s.snapshot_id for s in base.snapshots}
    out.extend(AddSnapshot(s) for s in updated.snapshots if s.snapshot_id not in snapshot_ids)
    out.extend(RemoveSnapshotRef(name) for name in base.refs if name not in updated.refs)
    out.extend(
        SetSnapshotRef(name, ref)
        for name, ref in updated.refs.items()
        if base.refs.get(name) != ref
    )
    kept = {s.snapshot_id for s in updated.snapshots}
    gone = tuple(s.snapshot_id for s in base.snapshots if s.snapshot_id not in kept)
    if gone:
        out.append(RemoveSnapshots(gone))

    for key, set_, remove in (
        (STATISTICS, SetStatistics, RemoveStatistics),
        (PARTITION_STATISTICS, SetPartitionStatistics, RemovePartitionStatistics),
    ):
        # Statistics of removed snapshots go with them (remove-snapshots drops them).
        before, after = _statistics(base, key), _statistics(updated, key)
        out.extend(set_(s) for sid, s in after.items() if before.get(sid) != s)
        out.extend(remove(sid) for sid in before if sid not in after and sid in kept)
    return out


def apply_updates(
    base: TableMetadata, updates: Sequence[MetadataUpdate], timestamp_ms: int | None = None
) -> TableMetadata:
    """`base` with `updates` applied, as a catalog applies a commit; ValidationError names
    an update that does not fit the base."""
    builder = MetadataBuilder(base)
    for update in updates:
        _apply_one(builder, update)
    return builder.build(timestamp_ms)


def _apply_one(builder: MetadataBuilder, update: MetadataUpdate) -> None:
    match update:
        case AssignUUID(uuid=uuid):
            builder.assign_uuid(uuid)
        case UpgradeFormatVersion(format_version=version):
            builder.upgrade_format_version(version)
        case AddSchema(schema=schema):
            builder.add_schema(schema, set_current=False)
        case SetCurrentSchema(schema_id=schema_id):
            builder.set_current_schema(schema_id)
        case AddPartitionSpec(spec=spec):
            builder.add_partition_spec(spec, set_default=False)
        case SetDefaultSpec(spec_id=spec_id):
            builder.set_default_spec(spec_id)
        case AddSortOrder(sort_order=order):
            builder.add_sort_order(order, set_default=False)
        case SetDefaultSortOrder(sort_order_id=order_id):
            builder.set_default_sort_order(order_id)
        case SetLocation(location=location):
            builder.set_location(location)
        case SetProperties(updates=properties):
            builder.set_properties(properties)
        case RemoveProperties(removals=keys):
            builder.remove_properties(keys)
        case AddSnapshot(snapshot=snapshot):
            builder.add_snapshot(snapshot)
        case RemoveSnapshotRef(ref_name=name):
            builder.remove_ref(name)
        case SetSnapshotRef(ref_name=name, ref=ref):
            builder.set_ref(name, ref)
        case RemoveSnapshots(snapshot_ids=ids):
            builder.remove_snapshots(ids)
        case SetStatistics(statistics=statistics):
            builder.set_statistics(statistics)
        case RemoveStatistics(snapshot_id=snapshot_id):
            builder.remove_statistics(snapshot_id)
        case SetPartitionStatistics(partition_statistics=statistics):
            builder.set_statistics(statistics, PARTITION_STATISTICS)
        case RemovePartitionStatistics(snapshot_id=snapshot_id):
            builder.remove_statistics(snapshot_id, PARTITION_STATISTICS)
        case _:
            raise ValidationError(f"cannot apply table update {update.to_json()['action']!r}")


def updates_landed(metadata: TableMetadata, commit: TableCommit) -> bool:
    """Whether `metadata` already holds the commit's effects: asked after the catalog could not
    say whether it applied the commit. A snapshot id is drawn at random for one commit, so its
    presence settles it; a metadata-only commit landed if each of its effects is visible."""
    snapshot_ids = {s.snapshot_id for s in metadata.snapshots}
    added = commit.added_snapshot_ids()
    if added:
        return all(i in snapshot_ids for i in added)
    return all(_visible(metadata, u) for u in commit.updates)


def _visible(metadata: TableMetadata, update: MetadataUpdate) -> bool:
    match update:
        case SetProperties(updates=properties):
            return all(metadata.properties.get(k) == v for k, v in properties.items())
        case RemoveProperties(removals=keys):
            return not any(k in metadata.properties for k in keys)
        case SetSnapshotRef(ref_name=name, ref=ref):
            return metadata.refs.get(name) == ref
        case RemoveSnapshotRef(ref_name=name):
            return name not in metadata.refs
        case RemoveSnapshots(snapshot_ids=ids):
            return not {s.snapshot_id for s in metadata.snapshots} & set(ids)
        case AddSchema(schema=schema):
            return any(s.fields == schema.fields for s in metadata.schemas)
        case AddPartitionSpec(spec=spec):
            return any(s.fields == spec.fields for s in metadata.partition_specs)
        case AddSortOrder(sort_order=order):
            return any(o.fields == order.fields for o in metadata.sort_orders)
        case SetLocation(location=location):
            return metadata.location == location
        case _:
            # Current-id settings and statistics follow the additions checked above.
            return True
