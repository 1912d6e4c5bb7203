"""Row lineage through compaction: on a v3 table every row keeps its `_row_id` and
`_last_updated_sequence_number` when `rewrite_data_files` moves it into a new file.

The table is built by the ingestion job (two appends, an upsert and a delete: equality
deletes) plus a deletion vector committed with icecore. Each live row's lineage is taken
before and after from two readers: DuckDB's `iceberg_scan`, which exposes both as virtual
columns (PyIceberg 0.12 does not), and `_lineage_in_files` below, which applies the spec's
rules to the live data files. A second compaction then rewrites files that already carry
the columns, with new rows beside them. A v2 table's compaction writes no lineage columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.data.arrow_schema import FIELD_ID_KEY
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.scan import snapshot_manifests
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.manifest_list import ManifestContent
from icecore.spec.metadata_columns import ROW_LINEAGE
from icecore.spec.schema import Schema
from icecore.spec.terms import parse_partition_spec
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from icecore.table import Table
from spark_jobs.reading.parquet_files import read_parquet
from spark_jobs.rewrite_data_files import run as compact
from tests.support.batches import Model, batch, feed
from tests.support.duckdb import connect

TABLE = "db.lineage"
ROW_ID, LAST_UPDATED = 2147483540, 2147483539
SCHEMA = Schema(
    (
        NestedField(1, "id", LongType()),
        NestedField(2, "v", StringType()),
        NestedField(3, "ts", TimestampType()),
    )
)
Lineage = dict[tuple[int, str], tuple[int, int]]  # (id, v) -> (_row_id, last updated seq)


def _create(catalog: SqlCatalog, version: int) -> None:
    catalog.create_namespace("db")
    catalog.create_table(
        TABLE,
        SCHEMA,
        spec=parse_partition_spec("bucket(2, id)", SCHEMA),
        properties={"format-version": str(version)},
    )


def _columns_by_id(path: str) -> dict[int, str]:
    schema = pq.read_schema(path)
    return {int(f.metadata[FIELD_ID_KEY]): f.name for f in schema if f.metadata}


def _lineage_in_files(table: Table, live: set[tuple[int, str]]) -> Lineage:
    """The spec's lineage of the `live` rows ((id, v) is unique in these tables), from the
    live data files: a non-null value in the file, else `first_row_id + pos` and the data
    sequence number. Deletes are not applied: only rows in `live` are kept."""
    out: Lineage = {}
    for task in table.scan().plan_files():
        data = pq.read_table(task.file.file_path)
        names = _columns_by_id(task.file.file_path)
        n = data.num_rows

        def column(field_id: int, data: Any = data, names: dict[int, str] = names) -> list[Any]:
            name = names.get(field_id)
            return data.column(name).to_pylist() if name else [None] * data.num_rows

        first, seq = task.file.first_row_id, task.data_sequence_number
        assert first is not None
        ids, vs, row_ids, seqs = column(1), column(2), column(ROW_ID), column(LAST_UPDATED)
        for pos in range(n):
            key = (ids[pos], vs[pos])
            if key in live:
                row_id = row_ids[pos] if row_ids[pos] is not None else first + pos
                out[key] = (row_id, seqs[pos] if seqs[pos] is not None else seq)
    return out


def _lineage_by_duckdb(table: Table) -> Lineage:
    con = connect()
    try:
        got = con.execute(
            "SELECT id, v, _row_id, _last_updated_sequence_number "
            f"FROM iceberg_scan('{table.metadata_location}')"
        ).fetchall()
    finally:
        con.close()
    out = {(i, v): (r, s) for i, v, r, s in got}
    assert len(out) == len(got)
    return out


def _checked_lineage(table: Table, model: Model) -> Lineage:
    """Each live row's lineage, the same from DuckDB and from the files, with unique ids."""
    by_duckdb = _lineage_by_duckdb(table)
    assert set(by_duckdb) == {(i, v) for i, v, _ in model.rows}
    assert _lineage_in_files(table, set(by_duckdb)) == by_duckdb
    row_ids = [r for r, _ in by_duckdb.values()]
    assert len(set(row_ids)) == len(row_ids)
    assert table.metadata.next_row_id is not None and max(row_ids) < table.metadata.next_row_id
    return by_duckdb


def _delete_with_a_dv(table: Table, model: Model) -> None:
    """A deletion vector removing positions 0 and 2 of the largest live data file."""
    task = max(table.scan().plan_files(), key=lambda t: t.file.record_count)
    data = pq.read_table(task.file.file_path).to_pylist()
    puffin = f"{table.metadata.location}/data/lineage-dv.puffin"
    (written,) = write_dvs(table.io, puffin, {task.file.file_path: [0, 2]})
    dv = DataFile(
        file_path=puffin,
        file_format=FileFormat.PUFFIN,
        partition=task.file.partition,
        record_count=written.record_count,
        file_size_in_bytes=written.file_size_in_bytes,
        content=FileContent.POSITION_DELETES,
        referenced_data_file=task.file.file_path,
        content_offset=written.content_offset,
        content_size_in_bytes=written.content_size_in_bytes,
        spec_id=task.file.spec_id,
    )
    table.new_row_delta().add_deletes(dv).commit()
    gone = {(data[p]["id"], data[p]["v"]) for p in (0, 2)}
    model.rows = [r for r in model.rows if (r[0], r[1]) not in gone]


def _compact(spark: SparkSession, catalog: SqlCatalog, **options: Any) -> Table:
    result = compact(
        spark, catalog, RewriteDataFilesOptions(table=TABLE, rewrite_all=True, **options)
    )
    assert result.added_data_files > 0 and not result.failed_groups
    return catalog.load_table(TABLE)


def _added_entries(table: Table) -> list[dict[str, Any]]:
    """The raw manifest records (fastavro, no inheritance) the current snapshot added."""
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    out = []
    for manifest in snapshot_manifests(table.io, snapshot):
        if manifest.content != ManifestContent.DATA:
            continue
        with open(manifest.manifest_path, "rb") as f:
            for record in fastavro.reader(f):
                assert isinstance(record, dict)
                if record["status"] == 1 and record["snapshot_id"] == snapshot.snapshot_id:
                    out.append(record)
    return out


def _same_rows_for_pyiceberg(table: Table, model: Model) -> None:
    scanned = StaticTable.from_metadata(table.metadata_location or "").scan().to_arrow()
    assert scanned.column_names == ["id", "v", "ts"]
    assert sorted(
        zip(*(scanned.column(n).to_pylist() for n in ("id", "v")), strict=True)
    ) == sorted((i, v) for i, v, _ in model.rows)


def test_compaction_keeps_every_rows_lineage_on_v3(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    _create(catalog, 3)
    model = Model()
    feed(spark, catalog, TABLE, mode="append", rows=batch(0, 24, tag="a"), model=model)
    feed(spark, catalog, TABLE, mode="append", rows=batch(24, 24, tag="b"), model=model)
    feed(spark, catalog, TABLE, mode="upsert", rows=batch(4, 8, tag="u"), model=model)
    feed(spark, catalog, TABLE, mode="delete", rows=batch(30, 4, tag="d"), model=model)
    table = catalog.load_table(TABLE)
    _delete_with_a_dv(table, model)
    table.refresh()
    before = _checked_lineage(table, model)
    # Upserted rows are new rows (equality deletes): later sequence numbers and ids.
    assert len({s for _, s in before.values()}) == 3
    next_row_id = table.metadata.next_row_id
    assert next_row_id is not None

    table = _compact(spark, catalog)
    assert table.metadata.schema().fields == SCHEMA.fields
    assert _checked_lineage(table, model) == before
    added = _added_entries(table)
    assert added and all(e["data_file"]["first_row_id"] is None for e in added)
    for entry in added:
        path = entry["data_file"]["file_path"]
        assert _columns_by_id(path) == {
            1: "id",
            2: "v",
            3: "ts",
            ROW_ID: "_row_id",
            LAST_UPDATED: "_last_updated_sequence_number",
        }
        bounds = dict((kv["key"], kv["value"]) for kv in entry["data_file"]["lower_bounds"])
        assert ROW_ID in bounds  # described like any column, as Java's writer does
    # The new files took a fresh range of ids (which none of their rows uses).
    compacted_next_row_id = table.metadata.next_row_id
    assert compacted_next_row_id is not None and compacted_next_row_id > next_row_id
    _same_rows_for_pyiceberg(table, model)

    # New rows take fresh ids above every old one; a second compaction, sorting (rows change
    # positions), reads the carried columns back (and the new file's inherited values) and
    # keeps them all.
    feed(spark, catalog, TABLE, mode="append", rows=batch(100, 6, tag="n"), model=model)
    table = catalog.load_table(TABLE)
    now = _checked_lineage(table, model)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    new = {k: v for k, v in now.items() if k not in before}
    assert len(new) == 6 and {k: now[k] for k in before} == before
    assert min(r for r, _ in new.values()) >= compacted_next_row_id
    assert {s for _, s in new.values()} == {snapshot.sequence_number}
    table = _compact(spark, catalog, strategy="sort", sort_order="v desc")
    assert _checked_lineage(table, model) == now
    _same_rows_for_pyiceberg(table, model)


def test_compaction_of_a_v2_table_writes_no_lineage(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    _create(catalog, 2)
    model = Model()
    feed(spark, catalog, TABLE, mode="append", rows=batch(0, 10, tag="a"), model=model)
    feed(spark, catalog, TABLE, mode="append", rows=batch(10, 10, tag="b"), model=model)
    table = _compact(spark, catalog)
    assert table.metadata.format_version == 2
    for task in table.scan().plan_files():
        assert _columns_by_id(task.file.file_path) == {1: "id", 2: "v", 3: "ts"}
    _same_rows_for_pyiceberg(table, model)


def test_a_column_named_like_a_lineage_column_fails_the_v3_compaction(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    catalog.create_namespace("db")
    schema = Schema((NestedField(1, "id", LongType()), NestedField(2, "_row_id", LongType())))
    table = catalog.create_table(TABLE, schema, properties={"format-version": "3"})
    for n in range(2):
        path = Path(table.metadata.location) / "data" / f"f{n}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table(
                {"id": [n], "_row_id": [n]},
                schema=pa.schema(
                    [
                        pa.field("id", pa.int64(), metadata={FIELD_ID_KEY: "1"}),
                        pa.field("_row_id", pa.int64(), metadata={FIELD_ID_KEY: "2"}),
                    ]
                ),
            ),
            path,
        )
        table.new_fast_append().append_file(
            DataFile(
                file_path=str(path),
                file_format=FileFormat.PARQUET,
                partition=(),
                record_count=1,
                file_size_in_bytes=path.stat().st_size,
            )
        ).commit()
    with pytest.raises(JobError, match="row lineage column"):
        compact(spark, catalog, RewriteDataFilesOptions(table=TABLE, rewrite_all=True))


def test_rows_of_files_from_before_an_upgrade_take_fresh_ids(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    """A compaction planned from a v2 snapshot of an upgraded table: its files have no
    `first_row_id`, so their rows have no lineage to carry (null, as Java reads them) and
    the new files' rows inherit fresh ids from the commit, each a different one."""
    _create(catalog, 2)
    model = Model()
    feed(spark, catalog, TABLE, mode="append", rows=batch(0, 10, tag="a"), model=model)
    feed(spark, catalog, TABLE, mode="append", rows=batch(10, 10, tag="b"), model=model)
    table = catalog.load_table(TABLE)
    table.update_properties().set("format-version", "3").commit()
    planned = table.metadata.current_snapshot()
    assert planned is not None
    table = _compact(spark, catalog)
    assert table.metadata.format_version == 3
    after = _checked_lineage(table, model)
    # Inherited from the new files, which keep the planning snapshot's sequence number.
    assert {s for _, s in after.values()} == {planned.sequence_number}


def test_files_without_field_ids_have_no_lineage_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Without field ids columns are matched by name, but a `_row_id` there is not lineage."""
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": [1, 2], "_row_id": [7, 8]}), path)
    frame = read_parquet(
        spark, [(str(path), path.stat().st_size)], [SCHEMA.fields[0], *ROW_LINEAGE], {}
    )
    assert sorted(tuple(r) for r in frame.collect()) == [(1, None, None), (2, None, None)]
