"""A catalog of many tables written from metadata alone (no Spark, no data files), each in a
known state, for the fleet's tests and benchmark.

The files the manifests list are never written: health reads metadata only. Every tenth table
is due for a known reason with a known benefit (the ranking's formula applied to the numbers
written here, not to anything read back), some set their policy in table properties, some
are disabled:

    kind            due jobs                            benefit
    healthy         -                                   -
    small           rewrite_data_files (N >= 12 small)  N - 1 excess files
    deletes         rewrite_position_deletes (D >= 12)  D files + D x 4 KiB / 8 MiB
    equality        convert_equality_deletes (E < 12)   4 E + E x 50 keys / 1,000
    expire          expire_snapshots (10 days old)      1
    lowered         rewrite_data_files: 6 small files, `icefloe.minor.file-count=4`   5
    manifests       rewrite_manifests: M > 20 data manifests of one big file each,
                    `icefloe.manifests.max-data-count=20`  M - 1 (a few KB each: one after)
    raised          -  (20 small files, `icefloe.minor.file-count=50`)
    disabled        -  (40 small files, `icefloe.maintenance.enabled=false`)

With a state store, every table gets a successful `remove_orphan_files` an hour ago (the
fleet has been running), so orphan removal is not due anywhere.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from icecore.catalog import SqlCatalog, catalog_from_settings
from icecore.io import FileIO
from icecore.spec.manifest import DataFile, FileContent, FileFormat, ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestFile, ManifestListWriter
from icecore.spec.metadata import TableMetadata, write_table_metadata
from icecore.spec.partitioning import UNPARTITIONED
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary
from icecore.spec.types import LongType, NestedField, StringType

MIB = 1024 * 1024
SCHEMA = Schema(
    (NestedField(1, "id", LongType(), required=True), NestedField(2, "data", StringType())),
    schema_id=0,
)
DELETE_FILE_BYTES = 4096
EQUALITY_KEYS = 50
DAY_MS = 86_400_000
DUE_KINDS = ("small", "deletes", "equality", "expire", "lowered", "manifests")


@dataclass
class FleetTruth:
    """What was written: each table's kind, the due ones' jobs, benefit and rewrite bytes."""

    warehouse: Path
    kinds: dict[str, str] = field(default_factory=dict)
    due: dict[str, list[str]] = field(default_factory=dict)
    benefit: dict[str, float] = field(default_factory=dict)
    rewrite_bytes: dict[str, int] = field(default_factory=dict)

    def tables_of(self, kind: str) -> list[str]:
        return sorted(t for t, k in self.kinds.items() if k == kind)


def _data(path: str, size: int, records: int) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, (), records, size)


class _Writer:
    """Writes one table's metadata: data in snapshot 1, deletes in snapshot 2."""

    def __init__(self, location: str, now_ms: int) -> None:
        self.io = FileIO()
        self.location = location
        self.now_ms = now_ms
        self.snapshots: list[Snapshot] = []
        self.manifests: list[ManifestFile] = []

    def _manifest(self, files: list[DataFile], snapshot_id: int, n: int) -> ManifestFile:
        content = FileContent.DATA if files[0].content == FileContent.DATA else None
        kind = ManifestContent.DATA if content is not None else ManifestContent.DELETES
        path = f"{self.location}/metadata/m{n}-{uuid.uuid4().hex}.avro"
        writer = ManifestWriter(self.io, path, UNPARTITIONED, SCHEMA, snapshot_id, content=kind)
        for f in files:
            writer.add(f)
        return writer.close()

    def commit(self, files: list[DataFile], age_ms: int, manifests: int = 1) -> list[ManifestFile]:
        """One snapshot adding `files`, listed in `manifests` manifests; returns those."""
        seq = len(self.snapshots) + 1
        snapshot_id = seq * 1000 + 7
        parent = self.snapshots[-1] if self.snapshots else None
        counts = SummaryCounts()
        for f in files:
            counts.added_file(int(f.content), f.record_count, f.file_size_in_bytes)
        new = [
            self._manifest(files[i::manifests], snapshot_id, seq * 10_000 + i)
            for i in range(manifests)
        ]
        list_path = f"{self.location}/metadata/snap-{snapshot_id}-{uuid.uuid4().hex}.avro"
        writer = ManifestListWriter(
            self.io, list_path, snapshot_id, parent and parent.snapshot_id, seq
        )
        writer.add_all([*new, *self.manifests])
        self.manifests = writer.close()
        operation = Operation.APPEND if files[0].content == FileContent.DATA else Operation.DELETE
        self.snapshots.append(
            Snapshot(
                snapshot_id=snapshot_id,
                timestamp_ms=self.now_ms - age_ms,
                manifest_list=list_path,
                parent_snapshot_id=parent and parent.snapshot_id,
                sequence_number=seq,
                summary=build_summary(operation, counts, parent),
                schema_id=0,
            )
        )
        return new

    def finish(self, properties: Mapping[str, str]) -> str:
        head = self.snapshots[-1]
        metadata = TableMetadata(
            format_version=2,
            table_uuid=str(uuid.uuid4()),
            location=self.location,
            last_sequence_number=head.sequence_number,
            last_updated_ms=head.timestamp_ms,
            last_column_id=2,
            schemas=(SCHEMA,),
            current_schema_id=0,
            partition_specs=(UNPARTITIONED,),
            default_spec_id=0,
            last_partition_id=999,
            properties=dict(properties),
            current_snapshot_id=head.snapshot_id,
            snapshots=tuple(self.snapshots),
            refs={MAIN_BRANCH: SnapshotRef(head.snapshot_id, SnapshotRefType.BRANCH)},
        )
        path = f"{self.location}/metadata/00001-{uuid.uuid4()}.metadata.json"
        write_table_metadata(self.io, path, metadata)
        return path


def write_table(location: str, kind: str, size: int, now_ms: int) -> tuple[str, dict, tuple]:
    """One table of `kind` (`size` scales its problem); returns its metadata location, its
    properties, and its (due jobs, benefit, rewrite bytes) by construction."""
    w = _Writer(location, now_ms)
    properties: dict[str, str] = {}
    big = [_data(f"{location}/data/big-{i}.parquet", 400 * MIB, 1_000_000) for i in range(4)]
    hour = 3_600_000
    if kind in ("healthy", "deletes", "equality"):
        w.commit(big, age_ms=2 * hour)
    if kind == "deletes":
        n = 12 + size
        deletes = [
            DataFile(
                f"{location}/data/pos-{i}.parquet",
                FileFormat.PARQUET,
                (),
                10,
                DELETE_FILE_BYTES,
                content=FileContent.POSITION_DELETES,
                referenced_data_file=big[i % 4].file_path,
            )
            for i in range(n)
        ]
        w.commit(deletes, age_ms=hour)
        return (w.finish(properties), properties,
                (["rewrite_position_deletes"], n + n * DELETE_FILE_BYTES / (8 * MIB),
                 n * DELETE_FILE_BYTES))  # fmt: skip
    if kind == "equality":
        n = 1 + size % 11
        deletes = [
            DataFile(
                f"{location}/data/eq-{i}.parquet",
                FileFormat.PARQUET,
                (),
                EQUALITY_KEYS,
                DELETE_FILE_BYTES,
                content=FileContent.EQUALITY_DELETES,
                equality_ids=[1],
            )
            for i in range(n)
        ]
        w.commit(deletes, age_ms=hour)
        benefit = 4 * n + n * EQUALITY_KEYS / 1000
        return (
            w.finish(properties),
            properties,
            (["convert_equality_deletes"], benefit, n * DELETE_FILE_BYTES),
        )
    if kind == "healthy":
        return w.finish(properties), properties, ([], 0.0, 0)
    if kind == "expire":
        w.commit(big[:2], age_ms=10 * DAY_MS)
        w.commit(big[2:], age_ms=hour)
        return w.finish(properties), properties, (["expire_snapshots"], 1.0, 0)
    if kind == "manifests":  # a streaming writer's table: a manifest per commit
        properties["icefloe.manifests.max-data-count"] = "20"
        n = 21 + size % 10
        files = [_data(f"{location}/data/m-{i}.parquet", 400 * MIB, 1_000_000) for i in range(n)]
        written = w.commit(files, age_ms=hour, manifests=n)
        saved = float(n - 1)  # they add up to far less than 8 MiB: one manifest after
        return (
            w.finish(properties),
            properties,
            (["rewrite_manifests"], saved, sum(m.manifest_length for m in written)),
        )
    count = {"small": 12 + size, "lowered": 6, "raised": 20, "disabled": 40}[kind]
    small = [_data(f"{location}/data/s-{i}.parquet", MIB, 1000) for i in range(count)]
    w.commit(small, age_ms=hour)
    if kind == "lowered":
        properties["icefloe.minor.file-count"] = "4"
    elif kind == "raised":
        properties["icefloe.minor.file-count"] = "50"
    elif kind == "disabled":
        properties["icefloe.maintenance.enabled"] = "false"
    if kind in ("small", "lowered"):
        return (
            w.finish(properties),
            properties,
            (["rewrite_data_files"], float(count - 1), count * MIB),
        )
    return w.finish(properties), properties, ([], 0.0, 0)


def kind_of(index: int) -> str:
    """Every tenth table due (cycling through the due kinds); a few others with policy in
    their properties."""
    if index % 10 == 0:
        return DUE_KINDS[(index // 10) % len(DUE_KINDS)]
    if index % 10 == 3 and index % 30 == 3:
        return "raised"
    if index % 10 == 7 and index % 30 == 7:
        return "disabled"
    return "healthy"


def make_fleet_catalog(
    warehouse: Path, count: int, *, namespaces: int = 10, state_uri: str | None = None
) -> FleetTruth:
    """`count` tables over `namespaces` namespaces (`ns00`, ...) in the SQLite catalog
    `warehouse/catalog.db` (the jobs' `--warehouse` default)."""
    catalog = catalog_from_settings(warehouse=warehouse)
    assert isinstance(catalog, SqlCatalog)
    truth = FleetTruth(warehouse)
    now_ms = int(time.time() * 1000)
    try:
        for n in range(namespaces):
            catalog.create_namespace(f"ns{n:02d}")
        for index in range(count):
            name = f"ns{(index // 10) % namespaces:02d}.t{index:04d}"
            kind = kind_of(index)
            add_table(catalog, truth, name, kind, size=index // 10, now_ms=now_ms)
    finally:
        catalog.close()
    if state_uri is not None:
        record_orphan_runs(state_uri, list(truth.kinds), now_ms - 3_600_000)
    return truth


def add_table(
    catalog: SqlCatalog, truth: FleetTruth, name: str, kind: str, *, size: int, now_ms: int
) -> None:
    """Write and register one table. The catalog's placement check reads every other
    table's metadata (quadratic over a thousand tables), so the row is added directly; the
    tables' locations are distinct by construction."""
    namespace, _, table = name.partition(".")
    location = f"{truth.warehouse}/{namespace}/{table}"
    metadata_location, _properties, (due, benefit, rewrite) = write_table(
        location, kind, size, now_ms
    )
    catalog._swap((namespace, table), None, metadata_location)
    truth.kinds[name] = kind
    if due:
        truth.due[name] = due
        truth.benefit[name] = benefit
        truth.rewrite_bytes[name] = rewrite


def record_orphan_runs(state_uri: str, tables: list[str], finished_ms: int) -> None:
    """A successful remove_orphan_files on each table, finished at `finished_ms`."""
    from icefloe_airflow.state import RUNS, MaintenanceStore  # noqa: PLC0415
    from sqlalchemy import insert  # noqa: PLC0415

    store = MaintenanceStore.open(state_uri)
    try:
        rows = [
            {
                "catalog_name": store.catalog_name,
                "table_name": t,
                "job": "remove_orphan_files",
                "state": "success",
                "started_at_ms": finished_ms - 60_000,
                "finished_at_ms": finished_ms,
            }
            for t in tables
        ]
        with store.engine.begin() as conn:
            conn.execute(insert(RUNS), rows)
    finally:
        store.close()
