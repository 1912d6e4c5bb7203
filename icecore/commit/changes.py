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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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

T = TypeVar("T")


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

    out += _versioned(
        [(s.schema_id, s) for s in base.schemas],
        [(s.schema_id, s) for s in updated.schemas],
        (base.current_schema_id, updated.current_schema_id),
        lambda s: AddSchema(s, updated.last_column_id),
        SetCurrentSchema,
    )
    out += _versioned(
        [(s.spec_id, s) for s in base.partition_specs],
        [(s.spec_id, s) for s in updated.partition_specs],
        (base.default_spec_id, updated.default_spec_id),
        AddPartitionSpec,
        SetDefaultSpec,
    )
    out += _versioned(
        [(o.order_id, o) for o in base.sort_orders],
        [(o.order_id, o) for o in updated.sort_orders],
        (base.default_sort_order_id, updated.default_sort_order_id),
        AddSortOrder,
        SetDefaultSortOrder,
    )

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


def _versioned(
    before: list[tuple[int, T]],
    after: list[tuple[int, T]],
    current: tuple[int, int],
    add: Callable[[T], MetadataUpdate],
    select: Callable[[int], MetadataUpdate],
) -> list[MetadataUpdate]:
    """Schemas, specs or sort orders: one add per new id, then the new current/default id, as
    "the last added" (-1) when it is that one, so the catalog may renumber it."""
    known = {i for i, _ in before}
    added = [(i, item) for i, item in after if i not in known]
    out = [add(item) for _, item in added]
    if current[1] != current[0]:
        last = added[-1][0] if added else None
        out.append(select(LAST_ADDED if current[1] == last else current[1]))
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
