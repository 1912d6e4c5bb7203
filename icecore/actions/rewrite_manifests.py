"""Which manifests a manifest rewrite replaces, and how it regroups their entries (the plan of
Iceberg's `rewrite_manifests`, engine-neutral: the driver's threads or Spark tasks execute it).

Manifests are grouped by partition spec and content: data and delete manifests are rewritten
apart, and a manifest only ever holds files of one spec. Within a group the live entries of
the replaced manifests are sorted by their partition tuple (the clustering key of
`partition_order`; `sort_by` names partition fields to sort by first, as Java's `sort_by`,
the spec's other fields break ties) and cut into `outputs` manifests of about equal size,
`commit.manifest.target-size-bytes` (default 8 MiB) at most: a planner then opens few
manifests, and a partition filter rules out most of them by their partition summaries.

Left alone, unless `rewrite_all`:
- a manifest near the target (0.75 to 1.8 x, the bounds a data file's size is judged by) and
  alone in its partition range: no other manifest of its group overlaps it on the first
  clustering field (touching at an end does not count: the manifests a rewrite writes touch
  where one ends and the next begins). Manifests of an unpartitioned spec have no range and
  count as alone;
- a group where rewriting saves nothing: it would write at least as many manifests as it
  replaces, none of them overlap and none carries DELETED entries (a second run of the job
  on its own output is a no-op).
Manifests of DELETED entries only are always replaced (by nothing).

Outputs are estimated from the manifests' lengths, less the share of their DELETED entries.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from icecore.actions.partition_order import nullable_key, tuple_key
from icecore.errors import ValidationError
from icecore.manifest_stats import SMALL_MANIFEST_FRACTION, manifest_target_size
from icecore.spec.conversions import decoder
from icecore.spec.manifest import DataFile
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.types import IcebergType

LARGE_MANIFEST_FRACTION = 1.8


@dataclass(frozen=True)
class ManifestGroup:
    """The manifests of one partition spec and content that are rewritten together."""

    spec_id: int
    content: ManifestContent
    manifests: tuple[ManifestFile, ...]
    sort_positions: tuple[int, ...]  # partition tuple positions, in clustering order
    outputs: int  # manifests to write (0 when the replaced ones list no live file)
    live_files: int
    estimated_bytes: int

    @property
    def bytes(self) -> int:
        return sum(m.manifest_length for m in self.manifests)

    def sort_key(self, spec: PartitionSpec, schema: Schema) -> Callable[[DataFile], bytes]:
        """The order a file of this group is written in (see `sort_key`)."""
        return sort_key(spec, schema, self.sort_positions)


@dataclass(frozen=True)
class ManifestRewritePlan:
    """What one snapshot's manifest rewrite replaces (`groups`) and keeps."""

    snapshot_id: int
    target_size_bytes: int
    groups: tuple[ManifestGroup, ...]
    kept: tuple[ManifestFile, ...]

    @property
    def rewritten(self) -> list[ManifestFile]:
        return [m for g in self.groups for m in g.manifests]

    @property
    def outputs(self) -> int:
        return sum(g.outputs for g in self.groups)


def plan_manifest_rewrite(
    metadata: TableMetadata,
    snapshot_id: int,
    manifests: Sequence[ManifestFile],
    *,
    spec_id: int | None = None,
    sort_by: Sequence[str] | None = None,
    rewrite_all: bool = False,
) -> ManifestRewritePlan:
    """The plan for `manifests`, the manifest list of snapshot `snapshot_id`; `spec_id`
    limits the rewrite to one partition spec."""
    specs = metadata.specs_by_id()
    if spec_id is not None and spec_id not in specs:
        raise ValidationError(
            f"partition spec {spec_id} does not exist; the table's specs are {sorted(specs)}"
        )
    target = manifest_target_size(metadata)
    if target <= 0:
        raise ValidationError(f"commit.manifest.target-size-bytes must be positive, got {target}")
    schema = metadata.schema()
    by_group: dict[tuple[int, ManifestContent], list[ManifestFile]] = {}
    for m in manifests:
        by_group.setdefault((m.partition_spec_id, m.content), []).append(m)
    groups: list[ManifestGroup] = []
    kept: list[ManifestFile] = []
    for (group_spec, content), members in sorted(by_group.items()):
        if spec_id is not None and group_spec != spec_id:
            kept.extend(members)
            continue
        spec = specs.get(group_spec)
        if spec is None:
            raise ValidationError(
                f"{members[0].manifest_path} has partition spec {group_spec}, which the table "
                "does not have"
            )
        positions = sort_positions(spec, sort_by)
        group = _plan_group(
            spec,
            schema=schema,
            content=content,
            members=members,
            positions=positions,
            target=target,
            rewrite_all=rewrite_all,
        )
        if group is None:
            kept.extend(members)
            continue
        groups.append(group)
        chosen = {m.manifest_path for m in group.manifests}
        kept.extend(m for m in members if m.manifest_path not in chosen)
    return ManifestRewritePlan(snapshot_id, target, tuple(groups), tuple(kept))


def sort_key(
    spec: PartitionSpec, schema: Schema, positions: Sequence[int]
) -> Callable[[DataFile], bytes]:
    """A file's clustering key (its partition tuple, fields at `positions` first) followed by
    its path: files of one partition, the whole of an unpartitioned table's, sort in a fixed
    order and can be cut into several manifests at any file."""
    types = [f.field_type for f in spec.partition_type(schema).fields]
    key = tuple_key(types, positions)
    return lambda f: key(f.partition) + f.file_path.encode("utf-8")


def sort_positions(spec: PartitionSpec, sort_by: Sequence[str] | None) -> tuple[int, ...]:
    """The spec's partition fields in clustering order: those `sort_by` names, then the
    others in the spec's order."""
    names = [f.name for f in spec.fields]
    first: list[int] = []
    for name in sort_by or ():
        if name not in names:
            raise ValidationError(
                f"sort_by: {name!r} is not a partition field of spec {spec.spec_id} "
                f"(its fields: {', '.join(names) or 'none, it is unpartitioned'}); "
                "choose the spec with spec_id"
            )
        if names.index(name) not in first:
            first.append(names.index(name))
    return (*first, *(p for p in range(len(names)) if p not in first))


def _plan_group(
    spec: PartitionSpec,
    *,
    schema: Schema,
    content: ManifestContent,
    members: list[ManifestFile],
    positions: tuple[int, ...],
    target: int,
    rewrite_all: bool,
) -> ManifestGroup | None:
    overlapping = _overlapping(spec, schema, members, positions[0] if positions else None)
    low, high = target * SMALL_MANIFEST_FRACTION, target * LARGE_MANIFEST_FRACTION
    if rewrite_all:
        chosen = list(members)
    else:
        chosen = [
            m
            for m in members
            if not (low <= m.manifest_length <= high)
            or m.manifest_path in overlapping
            or _has_dead_entries(m)
        ]
    live = sum(_live_files(m) for m in chosen)
    estimated = sum(_live_bytes(m) for m in chosen)
    outputs = math.ceil(estimated / target) if live else 0
    if not chosen:
        return None
    clean = not any(_has_dead_entries(m) for m in chosen)
    if len(chosen) == 1 and outputs <= 1 and clean:
        return None  # Java's rule: one manifest rewritten into one
    if (
        not rewrite_all
        and clean
        and outputs >= len(chosen)
        and not any(m.manifest_path in overlapping for m in chosen)
    ):
        return None
    return ManifestGroup(
        spec.spec_id, content, tuple(chosen), positions, outputs, live, int(estimated)
    )


def _live_files(m: ManifestFile) -> int:
    if m.added_files_count is None or m.existing_files_count is None:
        raise ValidationError(
            f"{m.manifest_path} has no file counts (a v1 manifest list); it cannot be rewritten"
        )
    return m.added_files_count + m.existing_files_count


def _has_dead_entries(m: ManifestFile) -> bool:
    """DELETED entries, or no live file at all: a rewrite drops them."""
    return bool(m.deleted_files_count) or _live_files(m) == 0


def _live_bytes(m: ManifestFile) -> float:
    """The bytes of `m` its live entries take, by their share of its entries."""
    live = _live_files(m)
    total = live + (m.deleted_files_count or 0)
    return m.manifest_length * live / total if total else 0.0


Range = tuple[bytes, bytes]


def _overlapping(
    spec: PartitionSpec, schema: Schema, members: Iterable[ManifestFile], position: int | None
) -> set[str]:
    """The manifests whose range of the partition field at `position` strictly overlaps
    another's: ranges [a, b] and [c, d] overlap when a < d and c < b, so two manifests that
    only touch (b == c), or that both hold a single value, do not. A manifest without
    partition summaries overlaps every other."""
    members = list(members)
    if position is None or len(members) < 2:
        return set()
    field_type = spec.partition_type(schema).fields[position].field_type
    unknown: list[str] = []
    ranges: list[tuple[Range, str]] = []
    for m in members:
        found = _range(m, position, field_type)
        if found is None:
            unknown.append(m.manifest_path)
        else:
            ranges.append((found, m.manifest_path))
    if unknown:
        return {m.manifest_path for m in members}
    ranges.sort()
    lows = [r[0] for r, _ in ranges]
    prefix_high = list(accumulate((r[1] for r, _ in ranges), max))
    out: set[str] = set()
    for i, ((low, high), path) in enumerate(ranges):
        # Earlier ranges start at or below `low`: one overlaps when it ends above `low` and,
        # for a single-value range, also starts below it.
        earlier = i if low < high else bisect_left(lows, low)
        before = earlier > 0 and prefix_high[earlier - 1] > low
        # Later ranges start at or above `low`: the next one overlaps when it starts below
        # `high` (a single-value range overlaps no later one).
        after = low < high and i + 1 < len(ranges) and lows[i + 1] < high
        if before or after:
            out.add(path)
    return out


def _range(m: ManifestFile, position: int, field_type: IcebergType) -> Range | None:
    """The clustering keys of the lowest and highest value of one partition field."""
    if m.partitions is None or position >= len(m.partitions):
        return None
    summary = m.partitions[position]
    key, decode = nullable_key(field_type), decoder(field_type)
    if summary.lower_bound is None or summary.upper_bound is None:
        if summary.contains_null and not summary.contains_nan:
            return key(None), key(None)  # nulls only
        return None  # NaN only, or a writer that left the bounds out
    low = key(None) if summary.contains_null else key(decode(summary.lower_bound))
    high = key(decode(summary.upper_bound))
    if summary.contains_nan:
        high = key(math.nan)
    return low, high
