"""Cheap real tables and DAG loading for the Airflow tests.

Tables with small files, equality deletes and position deletes are CDC batches laid out as the
ingestion job lays them out and committed without Spark (tests/spark/delete_tables.commit_cdc:
a fiftieth of an in-process ingestion, which is test_ingest_*'s subject, not these tests').
The DAGs under test then run their jobs as a warm Spark Connect server's clients or, for the
shapes that need one, through real spark-submits (their settings:
`tests.support.spark.spark_conf_dir`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.catalog import Catalog
from icecore.table import Table
from tests.spark.delete_tables import commit_cdc, create
from tests.support.batches import CdcLog, Rows
from tests.support.reader import scan_rows


def ingest_cdc(
    catalog: Catalog,
    table: str,
    batches: int,
    *,
    size: int = 30,
    seed: int = 1,
    partition_by: str | None = None,
) -> CdcLog:
    """`batches` CDC commits into `table` (created on the first), as the ingestion job
    commits them."""
    log = CdcLog(seed)
    if not catalog.table_exists(table):
        create(catalog, partition_by, name=table)
    for _ in range(batches):
        commit_cdc(catalog.load_table(table), log.batch(size))
    return log


def write_cdc_parquet(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    """A CDC batch as a Parquet file, the way an upstream system would drop it."""
    schema = pa.schema(
        [("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("us")), ("op", pa.string())]
    )
    columns = list(zip(*rows, strict=True))
    pq.write_table(pa.table([list(c) for c in columns], schema=schema), path)
    return path


def table_rows(table: Table) -> Rows:
    """The table's live rows (id, v, ts micros), read by the naive spec reader."""
    return Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))


def load_dag(path: Path, dag_id: str) -> Any:
    """Parse a DAG file like the DAG processor does; fail on any import error."""
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415 (after conftest's env)

    bag = DagBag(dag_folder=str(path))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag(dag_id)
    assert dag is not None, f"{dag_id} not in {sorted(bag.dag_ids)}"
    return dag


def task_states(dag_run: Any) -> dict[str, str]:
    """task_id -> final state of a finished `dag.test()` run."""
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def task_result(dag_run: Any, task_id: str) -> Any:
    """The `return_value` XCom a task of the run pushed."""
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id)
