"""Which manifests a manifest rewrite replaces, and how it regroups their entries (the plan of
Iceberg's `rewrite_manifests`, engine-neutral: the driver's threads or Spark tasks execute it).

Manifests are grouped by partition spec and content: data and delete manifests are rewritten
apart, and a manifest only ever holds files of one spec. Within a group the live entries of
the replaced manifests are sorted by their partition tuple (the clustering key of
`partition_order`; `sort_by` names partition fields to sort by first, as Java's `sort_by`,
the spec's other fields break ties) and cut into `outputs` manifests of about equal size,
`commit.manifest.target-size-bytes` (default 8 MiB) at most: a planner then opens few
manifests, and a partition filter rules out most of them by their partition summaries.
`outputs` comes from the group's live entries and what an entry takes once written
(`manifest_output.EntrySize`, measured on a sample of the group's own entries).

Left alone, unless `rewrite_all`:
- a manifest near the target (0.75 to 1.8 x, the bounds a data file's size is judged by) and
  alone in its partition range (`manifest_ranges`). The others are rewritten in runs that no
  such manifest separates in range order (each run a `ManifestGroup` of its own), so that
  what a rewrite writes never overlaps what it keeps;
- a run where rewriting saves nothing: it would write at least as many manifests as it
  replaces, none of them overlap and none carries DELETED entries (a second run of the job
  on its own output is a no-op); and, as in Java, a single manifest rewritten into one.
Manifests of DELETED entries only are always replaced (by nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from icecore.actions.manifest_output import SAMPLE_ENTRIES, EntrySize, ManifestFormat
from icecore.actions.manifest_ranges import Range, manifest_ranges, overlapping
from icecore.actions.partition_order import tuple_key
from icecore.commit.producer import manifest_codec
from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.manifest_stats import SMALL_MANIFEST_FRACTION, manifest_target_size
from icecore.spec.manifest import DataFile, read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema

LARGE_MANIFEST_FRACTION = 1.8
SAMPLE_MANIFESTS = 16  # read to measure what an entry takes (until 1,000 entries)


@dataclass(frozen=True)
class ManifestGroup:
    """The manifests of one partition spec and content that are rewritten together."""

    form: ManifestFormat
    manifests: tuple[ManifestFile, ...]
    sort_positions: tuple[int, ...]  # partition tuple positions, in clustering order
    live_files: int
    entry_size: EntrySize
    target_size_bytes: int

    @property
    def spec_id(self) -> int:
        return self.form.spec.spec_id

    @property
    def content(self) -> ManifestContent:
        return self.form.content

    @property
    def bytes(self) -> int:
        return sum(m.manifest_length for m in self.manifests)

    @property
    def outputs(self) -> int:
        """Manifests to write (0 when the replaced ones list no live file)."""
        return self.manifests_for(self.live_files)

    def manifests_for(self, entries: int, slack: float = 1.0) -> int:
        return self.entry_size.manifests_for(entries, self.target_size_bytes, slack)

    def sort_key(self) -> Callable[[DataFile], bytes]:
        """The order a file of this group is written in (see `sort_key`)."""
        return sort_key(self.form.spec, self.form.schema, self.sort_positions)


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
    io: FileIO,
    metadata: TableMetadata,
    snapshot_id: int,
    manifests: Sequence[ManifestFile],
    *,
    spec_id: int | None = None,
    sort_by: Sequence[str] | None = None,
    rewrite_all: bool = False,
) -> ManifestRewritePlan:
    """The plan for `manifests`, the manifest list of snapshot `snapshot_id`; `spec_id`
    limits the rewrite to one partition spec. Reads a sample of entries of each group that
    has manifests to rewrite (see `EntrySize`)."""
    specs = metadata.specs_by_id()
    if spec_id is not None and spec_id not in specs:
        raise ValidationError(
            f"partition spec {spec_id} does not exist; the table's specs are {sorted(specs)}"
        )
    target = manifest_target_size(metadata)
    if target <= 0:
        raise ValidationError(f"commit.manifest.target-size-bytes must be positive, got {target}")
    codec = manifest_codec(metadata, metadata.location)
    by_group: dict[tuple[int, ManifestContent], list[ManifestFile]] = {}
    for m in manifests:
        by_group.setdefault((m.partition_spec_id, m.content), []).append(m)
    groups: list[ManifestGroup] = []
    kept: list[ManifestFile] = []
    for (group_spec, content), members in sorted(by_group.items()):
        spec = specs.get(group_spec)
        if spec is None:
            raise ValidationError(
                f"{members[0].manifest_path} has partition spec {group_spec}, which the table "
                "does not have"
            )
        form = ManifestFormat(spec, metadata.schema(), content, metadata.format_version, codec)
        planned: list[ManifestGroup] = []
        if spec_id is None or group_spec == spec_id:
            positions = sort_positions(spec, sort_by)
            planned = _plan_groups(
                io, form, members, positions, target=target, rewrite_all=rewrite_all
            )
        chosen = {m.manifest_path for g in planned for m in g.manifests}
        kept.extend(m for m in members if m.manifest_path not in chosen)
        groups.extend(planned)
    return ManifestRewritePlan(snapshot_id, target, tuple(groups), tuple(kept))


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


def sort_key(
    spec: PartitionSpec, schema: Schema, positions: Sequence[int]
) -> Callable[[DataFile], bytes]:
    """A file's clustering key (its partition tuple, fields at `positions` first) followed by
    its path: files of one partition, the whole of an unpartitioned table's, sort in a fixed
    order and can be cut into several manifests at any file."""
    types = [f.field_type for f in spec.partition_type(schema).fields]
    key = tuple_key(types, positions)
    return lambda f: key(f.partition) + f.file_path.encode("utf-8")


def _plan_groups(
    io: FileIO,
    form: ManifestFormat,
    members: list[ManifestFile],
    positions: tuple[int, ...],
    *,
    target: int,
    rewrite_all: bool,
) -> list[ManifestGroup]:
    ranges: dict[str, Range] | None = {}
    if positions:
        ranges = manifest_ranges(form.spec, form.schema, members, positions[0])
    if ranges is None:  # a manifest without summaries may overlap any
        crowded = {m.manifest_path for m in members} if len(members) > 1 else set()
    else:
        crowded = overlapping(ranges)
    low, high = target * SMALL_MANIFEST_FRACTION, target * LARGE_MANIFEST_FRACTION
    chosen = {
        m.manifest_path
        for m in members
        if rewrite_all
        or not (low <= m.manifest_length <= high)
        or m.manifest_path in crowded
        or _has_dead_entries(m)
    }
    if not chosen:
        return []
    size = _entry_size(io, form, [m for m in members if m.manifest_path in chosen], positions)
    groups = []
    for cluster in _clusters(members, chosen, ranges):
        live = sum(_live_files(m) for m in cluster)
        group = ManifestGroup(form, tuple(cluster), positions, live, size, target)
        clean = not any(_has_dead_entries(m) for m in cluster)
        if len(cluster) == 1 and group.outputs <= 1 and clean:
            continue  # Java's rule: one manifest rewritten into one
        if (
            not rewrite_all
            and clean
            and group.outputs >= len(cluster)
            and not any(m.manifest_path in crowded for m in cluster)
        ):
            continue
        groups.append(group)
    return groups


def _clusters(
    members: list[ManifestFile], chosen: set[str], ranges: dict[str, Range] | None
) -> list[list[ManifestFile]]:
    """The chosen manifests in runs that no kept manifest separates, in range order: each
    run is rewritten on its own, so that no manifest it writes spans a kept one."""
    if not ranges:
        return [[m for m in members if m.manifest_path in chosen]]
    runs: list[list[ManifestFile]] = [[]]
    for m in sorted(members, key=lambda m: (ranges[m.manifest_path], m.manifest_path)):
        if m.manifest_path in chosen:
            runs[-1].append(m)
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if run]


def _entry_size(
    io: FileIO, form: ManifestFormat, chosen: list[ManifestFile], positions: tuple[int, ...]
) -> EntrySize:
    """Measured on live entries of the largest manifests (a few at most), in the order the
    rewrite writes them: sorting changes what neighbours an entry has, and so how well a
    block of entries compresses (entries of one commit share ids and name prefixes)."""
    largest = sorted((m for m in chosen if _live_files(m)), key=lambda m: -m.manifest_length)
    entries = (
        entry
        for m in largest[:SAMPLE_MANIFESTS]
        for entry in read_manifest(io, m, spec=form.spec, live_only=True)
    )
    sample = list(islice(entries, SAMPLE_ENTRIES))
    key = sort_key(form.spec, form.schema, positions)
    sample.sort(key=lambda e: key(e.data_file))
    return EntrySize.measure(io, form, sample)


def _live_files(m: ManifestFile) -> int:
    if m.added_files_count is None or m.existing_files_count is None:
        raise ValidationError(
            f"{m.manifest_path} has no file counts (a v1 manifest list); it cannot be rewritten"
        )
    return m.added_files_count + m.existing_files_count


def _has_dead_entries(m: ManifestFile) -> bool:
    """DELETED entries, or no live file at all: a rewrite drops them."""
    return bool(m.deleted_files_count) or _live_files(m) == 0
