"""The Iceberg Java side of `bench/iceberg_java_benchmark.py`; runs on PySpark 3.5.9 with
iceberg-spark-runtime 1.10.2, in the Spark 3.5 virtual environment
(`tests/support/java_writer/venv.py`), never ours.

    python java_side.py build   '{"jars": [...], "db": ..., "warehouse": ..., "rows": N, ...}'
    python java_side.py compact '{"jars": [...], "db": ..., "warehouse": ..., "table": ...}'

`build` writes the twin tables with Iceberg Java (Spark SQL's merge-on-read DELETE and UPDATE
for position deletes; a `RowDelta` of equality-delete files for the other twin); `compact`
runs Iceberg's own `rewrite_data_files` procedure with `rewrite-all`, in a cold process. The
session and its catalog are the tests' Java writer's (`spark_side.py`, standard library and
PySpark only, imported from its directory: icefloe's packages are not installed here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support" / "java_writer"))
from spark_side import catalog_conf, iceberg_session

FILES = 100
EQUALITY_FILES = 20


def session(args: dict) -> SparkSession:
    return iceberg_session(
        args["jars"],
        memory=args.get("driver_memory", "4g"),
        conf=catalog_conf("lake", args["db"], args["warehouse"]),
    )


def rows(spark: SparkSession, count: int):
    return spark.range(count).select(
        F.col("id"),
        F.concat(F.lit("name-"), (F.col("id") % 100_000).cast("string")).alias("name"),
        F.timestamp_micros(F.lit(1_700_000_000_000_000) + F.col("id") * 1_000).alias("ts"),
        (F.col("id") * 0.25).alias("amount"),
    )


MOR = (
    "'format-version'='2', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.spark.fanout.enabled'='true', "
    "'write.distribution-mode'='none'"
)


def build_position_deleted(spark: SparkSession, name: str, count: int) -> None:
    spark.sql(
        f"CREATE TABLE lake.bench.{name} (id bigint, name string, ts timestamp, amount double) "
        f"USING iceberg PARTITIONED BY (bucket(4, id)) TBLPROPERTIES ({MOR})"
    )
    # 25 tasks x 4 buckets = 100 data files.
    rows(spark, count).repartition(FILES // 4).writeTo(f"lake.bench.{name}").append()
    spark.sql(f"DELETE FROM lake.bench.{name} WHERE id % 10 = 3")
    spark.sql(f"UPDATE lake.bench.{name} SET amount = amount + 1 WHERE id % 100 = 7")


def build_equality_deleted(spark: SparkSession, name: str, count: int, workdir: Path) -> None:
    spark.sql(
        f"CREATE TABLE lake.bench.{name} (id bigint, name string, ts timestamp, amount double) "
        f"USING iceberg TBLPROPERTIES ({MOR})"
    )
    rows(spark, count).repartition(FILES).writeTo(f"lake.bench.{name}").append()
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, f"lake.bench.{name}"
    )
    ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    ids[0] = 1  # the `id` column's field id
    delta = table.newRowDelta()
    keys = [k for k in range(11, count, 100)]  # 1% of the keys
    field = pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})
    for n in range(EQUALITY_FILES):
        path = workdir / f"{name}-eq-{n:02d}.parquet"
        pq.write_table(pa.table([pa.array(keys[n::EQUALITY_FILES], pa.int64())],
                                schema=pa.schema([field])), path)  # fmt: skip
        delete = (
            jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
            .ofEqualityDeletes(ids)
            .withPath(str(path))
            .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(path.stat().st_size)
            .withRecordCount(len(keys[n::EQUALITY_FILES]))
            .build()
        )
        delta.addDeletes(delete)
    delta.commit()


def main() -> None:
    command, args = sys.argv[1], json.loads(sys.argv[2])
    spark = session(args)
    if command == "build":
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
        twins = args.get("twins", ["pos", "eq"])  # bench/connect_benchmark.py needs eq only
        for side in ("java", "ours") if "pos" in twins else ():
            build_position_deleted(spark, f"pos_{side}", args["rows"])
        # A third equality-deleted copy for our convert_equality_deletes.
        for side in ("java", "ours", "convert") if "eq" in twins else ():
            build_equality_deleted(spark, f"eq_{side}", args["rows"], Path(args["workdir"]))
    elif command == "compact":
        spark.sql(
            f"CALL lake.system.rewrite_data_files(table => 'bench.{args['table']}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
    spark.stop()


if __name__ == "__main__":
    main()
