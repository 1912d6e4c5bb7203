"""The benchmark table: a v2 table shaped like one Spark has been writing into for a while.

At scale 1 the `main` branch has 2,000 manifests (1,800 data, 200 delete) listing 500,000
live data files and 50,000 live position delete files, committed by ten snapshots whose day
windows overlap, so partitions hold files of several sequence numbers. Position deletes are
mostly file-scoped (`file_path` lower bound == upper bound, as Iceberg writers produce);
0.5% are partition-scoped with a path range, so a newer data file falling in the range must
*not* get the older delete. The last snapshot also rewrites some first-snapshot manifests as
an overwrite would (EXISTING entries plus DELETED ones), and some position deletes still
point at the removed files: they must apply to nothing.

PyIceberg 0.12 refuses equality deletes in `plan_files`, so they live on a side branch,
`cdc`: per-partition equality deletes, one global one (unpartitioned spec), and newer data
files those deletes must not touch. Only icecore plans `cdc`.

The oracle applies the spec's "Scan Planning" rules to what the generator wrote, without
reading any metadata back, and records a digest of every (data file, sorted delete files)
pair: a planner is right only if it reproduces that digest.
"""

from __future__ import annotations

import json
import random
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from digest import Tally
from table_files import (
    BUCKETS,
    FIRST_DAY,
    SCHEMA,
    SNAPSHOTS,
    SPEC,
    UNPARTITIONED_SPEC,
    FileFactory,
    Layout,
    split,
)

from icecore.io import FileIO
from icecore.spec.manifest import DataFile, EntryStatus, FileContent, ManifestEntry, ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestFile, ManifestListWriter
from icecore.spec.metadata import TableMetadata, write_table_metadata
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary

# Bump when the generated table changes, so cached tables of an older shape are not reused.
GENERATOR_VERSION = 2
CDC_BRANCH = "cdc"
DAYS_PER_SNAPSHOT = 10  # each commit writes a 10-day window ...
DAY_STEP = 5  # ... starting 5 days after the previous one's: windows overlap by half


@dataclass
class _Truth:
    """What was written, for the oracle: never read back from the table."""

    data: dict[str, tuple[tuple, int]] = field(default_factory=dict)  # path: partition, seq
    removed: set[str] = field(default_factory=set)
    # (path, content, spec id, partition, seq, file_path lower bound, upper bound)
    deletes: list[tuple[str, FileContent, int, tuple, int, str | None, str | None]] = field(
        default_factory=list
    )

    def oracle(self, live_data: Iterable[str], live_deletes: Iterable[int]) -> dict[str, Any]:
        """The spec's rules, applied literally: every path bound is compared."""
        position: dict[tuple, list[tuple[int, str, str, str]]] = defaultdict(list)
        equality: dict[tuple, list[tuple[int, str]]] = defaultdict(list)
        global_equality: list[tuple[int, str]] = []
        for i in live_deletes:
            path, content, spec_id, partition, seq, lower, upper = self.deletes[i]
            if content is FileContent.POSITION_DELETES:
                assert lower is not None and upper is not None
                position[(spec_id, partition)].append((seq, lower, upper, path))
            elif spec_id == UNPARTITIONED_SPEC.spec_id:
                global_equality.append((seq, path))
            else:
                equality[(spec_id, partition)].append((seq, path))
        tally = Tally()
        too_old = 0  # (data file, delete file) pairs only the sequence numbers keep apart
        for path in live_data:
            partition, seq = self.data[path]
            key = (SPEC.spec_id, partition)
            matching = [(s, d) for s, lo, hi, d in position.get(key, ()) if lo <= path <= hi]
            applied = [d for s, d in matching if seq <= s]
            too_old += len(matching) - len(applied)
            for s, d in [*equality.get(key, ()), *global_equality]:
                if seq < s:
                    applied.append(d)
                else:
                    too_old += 1
            tally.add(path, applied)
        return {**tally.result(), "pairs_excluded_by_sequence_number": too_old}


@dataclass
class _Commit:
    """One snapshot being written: its numbers and the manifests it adds."""

    seq: int
    snapshot_id: int
    commit_id: str  # Spark's query id, in file names
    counts: SummaryCounts = field(default_factory=SummaryCounts)
    new: list[ManifestFile] = field(default_factory=list)


class _Generator:
    def __init__(self, root: Path, layout: Layout, seed: int) -> None:
        self.io = FileIO()
        self.location = str(root / "table")
        self.layout = layout
        self.rng = random.Random(seed)
        self.files = FileFactory(self.location, self.rng)
        self.truth = _Truth()
        self.by_partition: dict[tuple, list[str]] = defaultdict(list)
        self.pools: dict[int, list[str]] = {}  # data paths added by each sequence number
        self.snapshots: list[Snapshot] = []
        self.manifest_count = 0

    def _new_id(self) -> int:
        return self.rng.getrandbits(62) + 1

    def _start(self, seq: int) -> _Commit:
        return _Commit(seq, self._new_id(), str(uuid.UUID(int=self.rng.getrandbits(128))))

    def _window(self, seq: int) -> list[tuple[int, int]]:
        """The partitions commit `seq` writes into."""
        first = FIRST_DAY + (seq - 1) * DAY_STEP
        days = range(first, first + DAYS_PER_SNAPSHOT)
        return [(day, bucket) for day in days for bucket in range(BUCKETS)]

    def _write_manifest(
        self, c: _Commit, files: Sequence[DataFile], spec: PartitionSpec = SPEC
    ) -> None:
        self.manifest_count += 1
        path = f"{self.location}/metadata/{c.commit_id}-m{self.manifest_count}.avro"
        deletes = files[0].content != FileContent.DATA
        content = ManifestContent.DELETES if deletes else ManifestContent.DATA
        writer = ManifestWriter(self.io, path, spec, SCHEMA, c.snapshot_id, content=content)
        for f in files:
            writer.add(f)
            c.counts.added_file(int(f.content), f.record_count, f.file_size_in_bytes)
        c.new.append(writer.close())

    def _record_data(self, files: Iterable[DataFile], seq: int) -> None:
        pool = self.pools.setdefault(seq, [])
        for f in files:
            self.truth.data[f.file_path] = (f.partition, seq)
            self.by_partition[f.partition].append(f.file_path)
            pool.append(f.file_path)

    def _record_delete(self, f: DataFile, seq: int, bounds: tuple[str, str] | None) -> None:
        lower, upper = bounds or (None, None)
        self.truth.deletes.append(
            (f.file_path, f.content, f.spec_id, f.partition, seq, lower, upper)
        )

    def _commit(
        self,
        c: _Commit,
        parent: Snapshot | None,
        carried: Sequence[ManifestFile],
        operation: Operation,
    ) -> tuple[Snapshot, list[ManifestFile]]:
        parent_id = parent.snapshot_id if parent else None
        list_path = f"{self.location}/metadata/snap-{c.snapshot_id}-1-{c.commit_id}.avro"
        writer = ManifestListWriter(self.io, list_path, c.snapshot_id, parent_id, c.seq)
        writer.add_all(c.new)  # Java lists the commit's own manifests first
        writer.add_all(carried)
        manifests = writer.close()
        snapshot = Snapshot(
            snapshot_id=c.snapshot_id,
            timestamp_ms=1_704_067_200_000 + c.seq * 3_600_000,
            manifest_list=list_path,
            parent_snapshot_id=parent_id,
            sequence_number=c.seq,
            summary=build_summary(operation, c.counts, parent),
            schema_id=SCHEMA.schema_id,
        )
        self.snapshots.append(snapshot)
        return snapshot, manifests

    def _add_data(
        self, c: _Commit, n_files: int, n_manifests: int, rewritable: int = 0
    ) -> list[list[ManifestEntry]]:
        """Write a commit's data manifests. The first `rewritable` also get files a later
        overwrite removes; their entries are returned for that rewrite."""
        window = self._window(c.seq)
        files = sorted(
            (self.files.data_file(self.rng.choice(window), c.commit_id) for _ in range(n_files)),
            key=lambda f: (f.partition, f.file_path),
        )
        entries = []
        start = 0
        for i, size in enumerate(split(n_files, n_manifests)):
            chunk = files[start : start + size]
            start += size
            if i < rewritable:
                partition = chunk[-1].partition if chunk else window[0]
                doomed = [
                    self.files.data_file(partition, c.commit_id)
                    for _ in range(self.layout.removed_per_rewritten_manifest)
                ]
                self.truth.removed.update(f.file_path for f in doomed)
                chunk += doomed
                entries.append(
                    [
                        ManifestEntry(EntryStatus.ADDED, c.snapshot_id, c.seq, c.seq, f)
                        for f in chunk
                    ]
                )
            self._write_manifest(c, chunk)
            self._record_data(chunk, c.seq)
        return entries

    def _add_position_deletes(
        self, c: _Commit, n_files: int, n_partition_scoped: int, n_manifests: int
    ) -> None:
        rng = self.rng
        # Updates hit recent data: targets come from this commit and the two before it.
        targets = [p for s in range(max(1, c.seq - 2), c.seq + 1) for p in self.pools[s]]
        deletes = []
        for _ in range(n_files - n_partition_scoped):
            target = rng.choice(targets)
            partition = self.truth.data[target][0]
            deletes.append((self.files.position_delete(partition, target, target, c.commit_id),
                            (target, target)))  # fmt: skip
        for _ in range(n_partition_scoped):
            partition = self.truth.data[rng.choice(self.pools[c.seq])][0]
            paths = sorted(self.by_partition[partition])
            j = rng.randrange(len(paths))
            bounds = paths[j], paths[min(j + 2, len(paths) - 1)]
            deletes.append((self.files.position_delete(partition, *bounds, c.commit_id), bounds))
        rng.shuffle(deletes)
        for f, bounds in deletes:
            self._record_delete(f, c.seq, bounds)
        start = 0
        for size in split(n_files, n_manifests):
            self._write_manifest(c, [f for f, _ in deletes[start : start + size]])
            start += size

    def _rewrite(self, c: _Commit, entries: list[ManifestEntry]) -> None:
        """An overwrite's rewrite of one manifest: removed files DELETED, the rest EXISTING."""
        self.manifest_count += 1
        path = f"{self.location}/metadata/{c.commit_id}-m{self.manifest_count}.avro"
        writer = ManifestWriter(self.io, path, SPEC, SCHEMA, c.snapshot_id)
        for entry in entries:
            f = entry.data_file
            if f.file_path in self.truth.removed:
                writer.delete(entry)
                c.counts.removed_file(int(f.content), f.record_count, f.file_size_in_bytes)
            else:
                writer.existing(entry)
        c.new.append(writer.close())

    def _main_branch(self) -> tuple[Snapshot, list[ManifestFile]]:
        layout = self.layout
        data_files = split(layout.data_files, SNAPSHOTS)
        data_manifests = split(layout.data_manifests, SNAPSHOTS)
        delete_files = split(layout.delete_files, SNAPSHOTS)
        delete_manifests = split(layout.delete_manifests, SNAPSHOTS)
        scoped = split(layout.partition_scoped_deletes, SNAPSHOTS)
        parent: Snapshot | None = None
        listed: list[ManifestFile] = []
        rewritable: list[list[ManifestEntry]] = []
        originals: set[str] = set()
        for i in range(SNAPSHOTS):
            c = self._start(seq=i + 1)
            if c.seq == 1:
                rewritable = self._add_data(
                    c, data_files[i], data_manifests[i], layout.rewritten_manifests
                )
                originals = {m.manifest_path for m in c.new[: len(rewritable)]}
            else:
                self._add_data(c, data_files[i], data_manifests[i])
            self._add_position_deletes(c, delete_files[i], scoped[i], delete_manifests[i])
            carried = listed
            if c.seq == SNAPSHOTS:
                for entries in rewritable:
                    self._rewrite(c, entries)
                carried = [m for m in listed if m.manifest_path not in originals]
            operation = Operation.APPEND if c.seq == 1 else Operation.OVERWRITE
            parent, listed = self._commit(c, parent, carried, operation)
        assert parent is not None
        return parent, listed

    def _cdc_branch(
        self, main: Snapshot, listed: list[ManifestFile]
    ) -> tuple[Snapshot, list[ManifestFile]]:
        """Two commits past `main`: equality deletes, then newer data and more deletes."""
        rng, layout, files = self.rng, self.layout, self.files
        window = self._window(SNAPSHOTS)
        c = self._start(seq=SNAPSHOTS + 1)
        eq = [files.equality_delete(p, SPEC.spec_id, c.commit_id) for p in window]
        for f in eq:
            self._record_delete(f, c.seq, None)
        self._write_manifest(c, eq)
        first, listed = self._commit(c, main, listed, Operation.OVERWRITE)

        c = self._start(seq=SNAPSHOTS + 2)
        data = [
            files.data_file(rng.choice(window), c.commit_id) for _ in range(layout.cdc_data_files)
        ]
        self._record_data(data, c.seq)
        eq = [
            files.equality_delete(rng.choice(window), SPEC.spec_id, c.commit_id)
            for _ in range(layout.cdc_equality_deletes)
        ]
        global_eq = files.equality_delete((), UNPARTITIONED_SPEC.spec_id, c.commit_id)
        for f in [*eq, global_eq]:
            self._record_delete(f, c.seq, None)
        self._write_manifest(c, data)
        self._write_manifest(c, eq)
        self._write_manifest(c, [global_eq], UNPARTITIONED_SPEC)
        return self._commit(c, first, listed, Operation.OVERWRITE)

    def run(self) -> tuple[str, dict[str, Any]]:
        main, main_manifests = self._main_branch()
        main_data = [p for p in self.truth.data if p not in self.truth.removed]
        main_deletes = range(len(self.truth.deletes))
        cdc, cdc_manifests = self._cdc_branch(main, main_manifests)
        cdc_data = [p for p in self.truth.data if p not in self.truth.removed]
        metadata = TableMetadata(
            format_version=2,
            table_uuid=str(uuid.UUID(int=self.rng.getrandbits(128))),
            location=self.location,
            last_sequence_number=max(s.sequence_number for s in self.snapshots),
            last_updated_ms=max(s.timestamp_ms for s in self.snapshots),
            last_column_id=max(f.field_id for f in SCHEMA.fields),
            schemas=(SCHEMA,),
            current_schema_id=SCHEMA.schema_id,
            partition_specs=(SPEC, UNPARTITIONED_SPEC),
            default_spec_id=SPEC.spec_id,
            last_partition_id=SPEC.last_assigned_field_id,
            properties={"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"},
            current_snapshot_id=main.snapshot_id,
            snapshots=tuple(self.snapshots),
            refs={
                MAIN_BRANCH: SnapshotRef(main.snapshot_id, SnapshotRefType.BRANCH),
                CDC_BRANCH: SnapshotRef(cdc.snapshot_id, SnapshotRefType.BRANCH),
            },
        )
        name = f"00001-{uuid.UUID(int=self.rng.getrandbits(128))}.metadata.json"
        metadata_path = f"{self.location}/metadata/{name}"
        write_table_metadata(self.io, metadata_path, metadata)
        return metadata_path, {
            MAIN_BRANCH: {
                **_counts(main_manifests),
                "expected": self.truth.oracle(main_data, main_deletes),
            },
            CDC_BRANCH: {
                **_counts(cdc_manifests),
                "expected": self.truth.oracle(cdc_data, range(len(self.truth.deletes))),
            },
        }


def _counts(manifests: Sequence[ManifestFile]) -> dict[str, int]:
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]

    def live(ms: list[ManifestFile]) -> int:
        return sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in ms)

    return {
        "manifests": len(manifests),
        "data_manifests": len(data),
        "delete_manifests": len(deletes),
        "live_data_files": live(data),
        "live_delete_files": live(deletes),
    }


def ensure_table(workdir: Path, scale: float, seed: int) -> tuple[str, dict[str, Any]]:
    """The table for `scale` and `seed` under `workdir`, generated unless already complete.

    `table.json` is written last, so a directory without it is a half-written table from an
    interrupted run and is regenerated.
    """
    root = workdir / f"table-v{GENERATOR_VERSION}-scale{scale:g}-seed{seed}"
    marker = root / "table.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        return info["metadata"], info
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    metadata_path, info = _Generator(root.resolve(), Layout(scale), seed).run()
    info = {"metadata": metadata_path, "scale": scale, "seed": seed, **info}
    marker.write_text(json.dumps(info, indent=2))
    return metadata_path, info
