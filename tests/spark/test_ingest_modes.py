"""Append and overwrite, schema evolution, retries of a batch, and bad input.

Bad input must fail before anything is committed, and leave no files of the failed run in
the table directory; a batch id must never be committed twice, whether the retry comes
after the first run finished or races it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import DataFrame, SparkSession

from icecore.actions.batch_ids import BatchAlreadyCommitted, guard_batch
from icecore.catalog import SqlCatalog
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import IngestOptions
from icecore.table import Table
from spark_jobs.ingest import run as ingest
from spark_jobs.schema import spark_schema

SCHEMA = "id long, region string, v string"


def _rows(table: Table) -> Counter[tuple]:
    assert table.metadata_location is not None
    arrow = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    names = arrow.column_names

    def frozen(value: object) -> object:
        return tuple(value.items()) if isinstance(value, dict) else value

    return Counter(tuple(frozen(r[n]) for n in names) for r in arrow.to_pylist())


def _frame(spark: SparkSession, rows: list[tuple], schema: str = SCHEMA) -> DataFrame:
    return spark.createDataFrame(rows, schema)


def _files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


def test_overwrite_replaces_the_partitions_it_touches(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    create = IngestOptions(
        table="db.o", create=True, partition_by="identity(region)", sort_by="id desc"
    )
    first = [(1, "eu", "a"), (2, "eu", "b"), (3, "us", "c"), (4, "us", "d")]
    ingest(spark, catalog, create, source=_frame(spark, first))
    result = ingest(
        spark,
        catalog,
        IngestOptions(table="db.o", mode="overwrite"),
        source=_frame(spark, [(5, "us", "e"), (6, "us", "f"), (7, "us", "g")]),
    )
    assert result.operation == "overwrite"
    table = catalog.load_table("db.o")
    assert _rows(table) == Counter(
        [(1, "eu", "a"), (2, "eu", "b"), (5, "us", "e"), (6, "us", "f"), (7, "us", "g")]
    )
    # The sort order is applied within files and recorded.
    order = table.metadata.sort_order()
    us_files = [task.file for task in table.scan().plan_files() if task.file.partition == ("us",)]
    assert [f.sort_order_id for f in us_files] == [order.order_id]
    ids = pq.read_table(us_files[0].file_path).column("id").to_pylist()
    assert ids == [7, 6, 5]


def test_overwrite_of_an_unpartitioned_table_replaces_everything(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    ingest(
        spark, catalog, IngestOptions(table="db.u", create=True), _frame(spark, [(1, "eu", "a")])
    )
    ingest(
        spark,
        catalog,
        IngestOptions(table="db.u", mode="overwrite"),
        _frame(spark, [(2, "us", "b")]),
    )
    assert _rows(catalog.load_table("db.u")) == Counter([(2, "us", "b")])


def test_merge_schema_adds_columns_and_renamed_columns_read_by_id(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    ingest(
        spark, catalog, IngestOptions(table="db.m", create=True), _frame(spark, [(1, "eu", "a")])
    )
    wider = _frame(
        spark,
        [(2, "us", "b", 7, (1.5, "x"))],
        f"{SCHEMA}, extra int, info struct<p: double, q: string>",
    )
    with pytest.raises(JobError, match="'extra' is not in the table"):
        ingest(spark, catalog, IngestOptions(table="db.m"), source=wider)
    result = ingest(spark, catalog, IngestOptions(table="db.m", merge_schema=True), source=wider)
    assert result.columns_added == ["extra", "info"]
    table = catalog.load_table("db.m")
    table.update_schema().rename_column("v", "value").commit()
    table = catalog.load_table("db.m")
    renamed = _frame(
        spark,
        [(3, "eu", "c", None, None)],
        "id long, region string, value string, extra int, info struct<p: double, q: string>",
    )
    ingest(spark, catalog, IngestOptions(table="db.m"), source=renamed)
    table = catalog.load_table("db.m")
    assert _rows(table) == Counter(
        [
            (1, "eu", "a", None, None),
            (2, "us", "b", 7, (("p", 1.5), ("q", "x"))),
            (3, "eu", "c", None, None),
        ]
    )
    # Spark reads every file by field id too: the old files' `v` is today's `value`, and
    # files from before `extra` existed read it as null.
    paths = [task.file.file_path for task in table.scan().plan_files()]
    back = spark.read.schema(spark_schema(table.metadata.schema().fields)).parquet(*paths)
    assert sorted((r["id"], r["value"], r["extra"]) for r in back.collect()) == [
        (1, "a", None),
        (2, "b", 7),
        (3, "c", None),
    ]


def test_a_batch_is_committed_once(spark: SparkSession, catalog: SqlCatalog) -> None:
    options = IngestOptions(table="db.b", create=True, batch_id="2024-01-07")
    first = ingest(spark, catalog, options, source=_frame(spark, [(1, "eu", "a")]))
    stale = catalog.load_table("db.b")
    again = ingest(spark, catalog, options, source=_frame(spark, [(1, "eu", "a")]))
    assert again.to_dict() == {
        "table": "db.b",
        "mode": "append",
        "batch_id": "2024-01-07",
        "status": "already-committed",
        "snapshot_id": first.snapshot_id,
    }
    assert _rows(catalog.load_table("db.b")) == Counter([(1, "eu", "a")])

    # A second run racing the first: it checked before the first committed, and its commit
    # finds the batch in the refreshed table.
    other = ingest(
        spark,
        catalog,
        IngestOptions(table="db.b", batch_id="later"),
        source=_frame(spark, [(2, "eu", "b")]),
    )
    assert other.status == "committed"
    racing = catalog.load_table("db.b")
    head = racing.metadata.current_snapshot()
    assert head is not None
    append = guard_batch(stale.new_append(), "later")
    for task in racing.scan().plan_files():
        append.append_file(task.file)
    with pytest.raises(BatchAlreadyCommitted) as raised:
        append.commit()
    assert raised.value.snapshot_id == head.snapshot_id
    assert catalog.load_table("db.b").metadata.current_snapshot_id == head.snapshot_id


def _assert_untouched(catalog: SqlCatalog, name: str, before: Table, warehouse: Path) -> None:
    after = catalog.load_table(name)
    assert after.metadata_location == before.metadata_location
    data = Path(before.metadata.location) / "data"
    leftovers = {p for p in _files_under(data) if "/ingest-" in f"/{p}"}
    committed = {
        Path(task.file.file_path).relative_to(data).as_posix() for task in after.scan().plan_files()
    }
    assert leftovers == committed  # nothing but committed files under ingest run directories


def test_bad_input_fails_clearly_and_commits_nothing(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path, tmp_path: Path
) -> None:
    ingest(
        spark,
        catalog,
        IngestOptions(table="db.bad", create=True, partition_by="identity(region)"),
        source=_frame(spark, [(1, "eu", "a")]),
    )
    before = catalog.load_table("db.bad")
    cases = [
        (
            IngestOptions(table="db.bad"),
            _frame(spark, [("x", "eu", "a")], "id string, region string, v string"),
            "column 'id' is long in the table but string in the source",
        ),
        (
            IngestOptions(table="db.bad", mode="upsert", key=["missing"]),
            _frame(spark, [(1, "eu", "a")]),
            "key column 'missing' is missing from the source",
        ),
        (
            IngestOptions(table="db.bad", mode="cdc", key=["id"]),
            _frame(
                spark,
                [(1, "eu", "a", "I"), (2, "eu", "b", "X"), (3, "eu", None, None)],
                f"{SCHEMA}, op string",
            ),
            "holds values other than I, U, D: 'X', None",
        ),
        (
            IngestOptions(table="db.bad", mode="cdc", key=["id"]),
            _frame(spark, [], f"{SCHEMA}, op string"),
            "the source is empty",
        ),
        (
            IngestOptions(table="db.bad", mode="upsert"),
            _frame(spark, [(1, "eu", "a")]),
            "needs --key: table db.bad has no identifier fields",
        ),
    ]
    for options, source, message in cases:
        with pytest.raises(JobError, match=message.replace("(", r"\(")):
            ingest(spark, catalog, options, source=source)
        _assert_untouched(catalog, "db.bad", before, warehouse)

    # An empty Parquet file as the source of an append: nothing written, nothing committed.
    empty = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([], pa.int64()),
                "region": pa.array([], pa.string()),
                "v": pa.array([], pa.string()),
            }
        ),
        empty,
    )
    with pytest.raises(JobError, match="the source is empty"):
        ingest(spark, catalog, IngestOptions(table="db.bad", source=str(empty)))
    _assert_untouched(catalog, "db.bad", before, warehouse)


def test_files_are_sized_toward_the_target_file_size(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    """The second batch knows the table's bytes per row and rolls files at the target."""
    rows = [(i, "eu", f"value-{i}") for i in range(3000)]
    target = {"write.target-file-size-bytes": "8192"}
    first = ingest(
        spark,
        catalog,
        IngestOptions(table="db.sized", create=True, properties=target),
        _frame(spark, rows).coalesce(1),
    )
    assert first.data_files == 1  # nothing to estimate from yet
    second = ingest(
        spark, catalog, IngestOptions(table="db.sized"), _frame(spark, rows).coalesce(1)
    )
    per_row = first.bytes_written / 3000
    assert second.data_files >= 3000 * per_row // 8192
    assert second.data_files > 1
