"""The Iceberg Java side of the tests' merge-on-read writer: a long-lived Spark 3.5 driver
with iceberg-spark-runtime 1.10.2, run in the Spark 3.5 virtualenv (`venv.py`), never ours.
Standard library and PySpark 3.5 only: nothing of icefloe is importable there.

    python spark_side.py '{"jars": [...], "cores": 2, "memory": "1g", "conf": {...}}'

It answers one JSON line per JSON line on stdin (`process.py` is the other end), on a copy of
the stdout it started with: everything else the process prints, the JVM's included, goes to
stderr. Requests, by "op":

- "attach" {catalog, db, warehouse}: an Iceberg `JdbcCatalog` named `catalog` on the SQLite
  file `db`, the file icecore's `SqlCatalog` of the same name opens: catalog rows are keyed
  by that name, so the two see the same tables only when the names match. Loaded at once,
  so that it makes the file and its tables (see `IcebergJava.attach` for why).
- "create_table" {table, format_version, files, rows_per_file, partitions}: a merge-on-read
  table (id bigint, part int, v string) partitioned by `part`, written by Spark: `files`
  data files of `rows_per_file` consecutive ids each, file n in partition n % partitions.
- "delete" {table, column, keys}: Spark SQL's `DELETE FROM table WHERE column IN (keys)`;
  answers the snapshot it committed (found by this application's id in the snapshot summary,
  which Iceberg's Spark writes put there) or the exception, as Java raised it.
- "sql" {sql}: any statement; answers its rows. An empty line or end of input stops.

`iceberg_session` is the Spark 3.5 session of the Iceberg Java benchmarks too
(`bench/iceberg_java/java_side.py`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Iceberg's table properties that make Spark's DELETE, UPDATE and MERGE merge-on-read; on v2
# position deletes scoped to a partition (one file per partition and task), as Iceberg wrote
# them before 1.8 made `file` the default; v3 tables get deletion vectors whatever it says.
MERGE_ON_READ = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
V2_GRANULARITY = {"write.delete.granularity": "partition"}


def catalog_conf(name: str, db: str, warehouse: str) -> dict[str, str]:
    """Spark's settings for an Iceberg `JdbcCatalog` `name` on the SQLite file `db`.

    The catalog caches no table: each statement plans on the catalog's current metadata, as a
    writer must when other processes commit to its tables (with Iceberg's default cache, a
    table another process changed stays stale in Spark until its commit fails on it)."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{db}",
        f"{prefix}.jdbc.schema-version": "V1",
        # SQLite connection properties: write-ahead logging, as icecore opens the file, and
        # waiting for another process's write instead of failing at once with SQLITE_BUSY
        # (icecore waits as long: SQLITE_BUSY_TIMEOUT).
        f"{prefix}.jdbc.journal_mode": "WAL",
        f"{prefix}.jdbc.busy_timeout": "30000",
        f"{prefix}.warehouse": warehouse,
        f"{prefix}.cache-enabled": "false",
    }


def iceberg_session(
    jars: list[str],
    *,
    master: str = "local[*]",
    memory: str = "4g",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A Spark 3.5 session with Iceberg's runtime and SQL extensions, no UI, errors-only log."""
    builder = (
        SparkSession.builder.master(master)
        .appName("iceberg-java")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", memory)
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Driver:
    """The requests above, on one session."""

    OPS = frozenset({"attach", "create_table", "delete", "sql"})

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.app_id = spark.sparkContext.applicationId
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._iceberg = jvm.org.apache.iceberg
        self._reported: set[int] = set()  # snapshots answered already

    def attach(self, catalog: str, db: str, warehouse: str) -> dict[str, Any]:
        for key, value in catalog_conf(catalog, db, warehouse).items():
            self.spark.conf.set(key, value)
        self.spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()  # Spark loads it now
        return {}

    def create_table(
        self, table: str, format_version: int, files: int, rows_per_file: int, partitions: int
    ) -> dict[str, Any]:
        namespace = table.rsplit(".", 1)[0]
        properties = {"format-version": str(format_version), **MERGE_ON_READ}
        if format_version == 2:
            properties.update(V2_GRANULARITY)
        listed = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        self.spark.sql(
            f"CREATE TABLE {table} (id bigint, part int, v string) USING iceberg "
            f"PARTITIONED BY (part) TBLPROPERTIES ({listed})"
        )
        # One range slice per task, one partition value per slice: a data file each.
        frame = self.spark.range(0, files * rows_per_file, 1, files).select(
            F.col("id"),
            ((F.col("id") / rows_per_file).cast("bigint") % partitions).cast("int").alias("part"),
            F.concat(F.lit("v"), F.col("id").cast("string")).alias("v"),
        )
        frame.writeTo(table).option("distribution-mode", "none").append()
        snapshot_id = int(self._table(table).currentSnapshot().snapshotId())
        self._reported.add(snapshot_id)
        return {"snapshot_id": snapshot_id}

    def delete(self, table: str, column: str, keys: list[int]) -> dict[str, Any]:
        started_ms = int(time.time() * 1000)
        try:
            self.spark.sql(f"DELETE FROM {table} WHERE {column} IN ({', '.join(map(str, keys))})")
        except Exception as exc:  # Java's, through Py4J: recorded, the writer goes on
            return {"error": _java_error(exc)}
        return {"snapshot_id": self._committed_since(table, started_ms)}

    def sql(self, sql: str) -> dict[str, Any]:
        return {"rows": [list(row) for row in self.spark.sql(sql).collect()]}

    def _table(self, table: str) -> Any:
        spark3util = self._iceberg.spark.Spark3Util
        return spark3util.loadIcebergTable(self.spark._jsparkSession, table)

    def _committed_since(self, table: str, started_ms: int) -> int | None:
        """The snapshot this application committed since `started_ms`: one DELETE at a time
        commits here, whatever others commit meanwhile (even one matching no row commits)."""
        snapshots = list(self._table(table).snapshots())
        for snapshot in reversed(snapshots):
            if snapshot.timestampMillis() < started_ms - 1000:  # clocks to the millisecond
                break
            snapshot_id = int(snapshot.snapshotId())
            ours = snapshot.summary().get("spark.app.id") == self.app_id
            if ours and snapshot_id not in self._reported:
                self._reported.add(snapshot_id)
                return snapshot_id
        return None


def _java_error(exc: Exception) -> dict[str, Any]:
    """The Java exception's class and message, and its causes' (the root one says why)."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if throwable is None:
        return {"class": type(exc).__name__, "message": str(exc)[:2000], "causes": []}
    chain: list[list[str]] = []
    while throwable is not None and len(chain) < 10:
        chain.append([throwable.getClass().getName(), str(throwable.getMessage())[:2000]])
        throwable = throwable.getCause()
    return {"class": chain[0][0], "message": chain[0][1], "causes": chain[1:]}


def main() -> None:
    settings = json.loads(sys.argv[1])
    replies = os.fdopen(os.dup(1), "w")  # the answers' channel, before the JVM inherits fd 1
    os.dup2(2, 1)
    spark = iceberg_session(
        settings["jars"],
        master=f"local[{settings['cores']}]",
        memory=settings["memory"],
        conf={
            "spark.sql.shuffle.partitions": str(settings["cores"]),
            "spark.default.parallelism": str(settings["cores"]),
            **settings["conf"],
        },
    )
    driver = Driver(spark)
    ready = {"spark": spark.version, "app_id": driver.app_id}
    replies.write(json.dumps({"ready": ready}) + "\n")
    replies.flush()
    for line in sys.stdin:
        if not line.strip():
            break
        request = json.loads(line)
        op = request.pop("op")
        try:
            if op not in Driver.OPS:
                raise ValueError(f"no such request: {op!r}")
            answer = getattr(driver, op)(**request)
        except Exception as exc:  # a bad request or a failed statement: the caller raises
            answer = {"failed": _java_error(exc)}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()
    spark.stop()


if __name__ == "__main__":
    main()
