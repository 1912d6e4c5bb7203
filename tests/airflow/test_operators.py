"""The job operators: their command lines checked by the jobs' own parsers, and real runs
inside `dag.test()` against real tables: results in XCom, runs recorded, the ingest asset
event, and a failure carrying the job's one-line cause.

The ingest + compaction DAG runs its jobs on the session's warm Spark Connect server (the
deployment's default); the failing job pays for a real spark-submit (local[2]), the shape
whose cause travels through spark-submit's result file.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from icefloe_airflow.assets import INGEST_ALIAS, fleet_asset, table_asset
from icefloe_airflow.health_history import bytes_rewritten_per_day, table_checks
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.operators import (
    ConvertEqualityDeletesOperator,
    ExpireSnapshotsOperator,
    IngestOperator,
    RemoveOrphanFilesOperator,
    RewriteDataFilesOperator,
    RewritePositionDeletesOperator,
    TableHealthOperator,
)
from icefloe_airflow.operators.base import (
    launcher,
    package_zip,
)
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.state import MaintenanceStore
from sqlalchemy import select

from icecore.catalog import SqlCatalog
from icecore.jobs import JOBS, JobOptions
from icecore.jobs.argv import parse_job_args
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from tests.support.catalogs import (
    POSTGRES_URI,
    forget_catalog,
    postgres_unavailable,
    unique_catalog_name,
)
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

START = datetime(2024, 1, 1, tzinfo=UTC)
SMALL_SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))


def parse(operator: Any, warehouse: Path) -> Any:
    """The operator's command line as the job itself parses it: the job's options."""
    options = operator.checked_options({})
    args = operator.build_application_args(IcebergHook(operator.iceberg_conn_id), options)
    assert args[0] == operator.job  # main.py <job> ...
    parsed = parse_job_args(JOBS[operator.job], args[1:])
    catalog = parsed.catalog
    assert (catalog.warehouse, catalog.name, catalog.uri) == (str(warehouse), "default", None)
    assert isinstance(parsed.options, JobOptions)
    return parsed.options


# Command lines ---------------------------------------------------------------------------


def test_options_become_the_jobs_flags(iceberg_connection: Path) -> None:
    operator = RewriteDataFilesOperator(
        task_id="compact",
        table="db.events",
        options={
            "strategy": "sort",
            "sort_order": "id desc nulls last",
            "target_file_size_bytes": "2MB",
            "partial-progress.enabled": True,
            "rewrite-all": True,
            "use_starting_sequence_number": "false",
            "where": None,
            "max-attempts": False,
        },
    )
    args = parse(operator, iceberg_connection)
    assert args.table == "db.events"
    assert (args.strategy, args.sort_order, args.target_file_size_bytes) == (
        "sort",
        "id desc nulls last",
        2 * 1024 * 1024,
    )
    assert (args.partial_progress_enabled, args.rewrite_all) == (True, True)
    assert args.use_starting_sequence_number is False
    assert (args.where, args.max_attempts) == (None, 4)  # None/False: the default stays
    assert operator.name == "icefloe-rewrite_data_files"


def test_options_from_a_json_string_and_policy_retention(iceberg_connection: Path) -> None:
    policy = MaintenancePolicy.from_mapping({"max_snapshot_age": "30m", "retain_last": 3})
    expire = ExpireSnapshotsOperator(
        task_id="expire",
        table="db.events",
        options=json.dumps({**policy.job_options("expire_snapshots"), "snapshot_ids": [1, 2]}),
    )
    args = parse(expire, iceberg_connection)
    assert (args.older_than, args.retain_last, args.min_age) == ("30m", 3, 1_800_000)
    assert args.snapshot_ids == [1, 2]
    orphans = RemoveOrphanFilesOperator(
        task_id="orphans",
        table="db.events",
        options=MaintenancePolicy().job_options("remove_orphan_files"),
        name="nightly-orphans",
    )
    args = parse(orphans, iceberg_connection)
    assert (args.older_than, args.min_age) == ("3d", 86_400_000)  # the job's floor stays
    assert orphans.name == "nightly-orphans"
    hourly = MaintenancePolicy.from_mapping({"orphan_older_than": "2h"})
    orphans.options = hourly.job_options("remove_orphan_files")
    args = parse(orphans, iceberg_connection)
    assert (args.older_than, args.min_age) == ("2h", 7_200_000)  # the policy lowers it


def test_ingest_arguments(iceberg_connection: Path) -> None:
    operator = IngestOperator(
        task_id="ingest",
        table="db.events",
        source="/in/batch.csv",
        mode="cdc",
        key=["id", "region"],
        op_column="change",
        batch_id="2024-01-07",
        create=True,
        partition_by="day(ts), bucket(16, id)",
        sort_by="ts",
        merge_schema=True,
        properties={"write.parquet.compression-codec": "snappy", "format-version": "2"},
        source_format="csv",
        source_options={"header": "true", "delimiter": ";"},
    )
    args = parse(operator, iceberg_connection)
    assert (args.source, args.mode, args.key, args.op_column) == (
        "/in/batch.csv",
        "cdc",
        ["id", "region"],
        "change",
    )
    assert (args.batch_id, args.create, args.merge_schema) == ("2024-01-07", True, True)
    assert (args.partition_by, args.sort_by, args.source_format) == (
        "day(ts), bucket(16, id)",
        "ts",
        "csv",
    )
    assert args.properties == {"write.parquet.compression-codec": "snappy", "format-version": "2"}
    assert args.source_options == {"header": "true", "delimiter": ";"}
    defaults = IngestOperator(task_id="i2", table="db.events", source="/in")
    args = parse(defaults, iceberg_connection)
    assert (args.mode, args.create, args.key) == ("append", False, [])
    assert defaults.batch_id == "{{ dag.dag_id }}/{{ run_id }}/{{ task.task_id }}"
    assert INGEST_ALIAS in defaults.outlets


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"table": "db.other"}, "set by the operator"),
        ({"catalog_uri": "sqlite://"}, "set by the operator"),
        ({"bad flag": 1}, "has no option 'bad flag'"),
        ({"where": {"id": 1}}, "--where: expected a filter"),
    ],
)
def test_bad_options_are_refused(
    iceberg_connection: Path, options: dict[str, Any], message: str
) -> None:
    from airflow.sdk.exceptions import AirflowException  # noqa: PLC0415

    operator = RewritePositionDeletesOperator(task_id="t", table="db.events", options=options)
    with pytest.raises(AirflowException, match=message):
        operator.checked_options({})


def test_managed_arguments_cannot_be_passed() -> None:
    with pytest.raises(TypeError, match="sets application itself"):
        ConvertEqualityDeletesOperator(task_id="t", table="db.t", application="x.py")


def test_job_files_and_package_zip(tmp_path: Path) -> None:
    assert launcher().name == "main.py" and launcher().read_text().startswith('"""')
    first = package_zip(tmp_path)
    stamp = first.stat().st_mtime_ns
    assert package_zip(tmp_path) == first and first.stat().st_mtime_ns == stamp  # cached
    names = set(zipfile.ZipFile(first).namelist())
    assert {"icecore/__init__.py", "spark_jobs/main.py", "spark_jobs/ingest/job.py"} <= names
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary left behind


def test_health_operator_reports_due_jobs(iceberg_connection: Path) -> None:
    from airflow.sdk.exceptions import AirflowException  # noqa: PLC0415

    catalog, _ = small_files_table(iceberg_connection, files=3)
    catalog.close()
    policy = '{"minor_file_count": 3, "retain_last": 2}'  # as a rendered template gives it
    out = TableHealthOperator(task_id="h", table="db.events", policy=policy).execute({})
    assert out["table"] == "db.events"
    assert [d["job"] for d in out["due"]] == ["rewrite_data_files", "remove_orphan_files"]
    assert "category=a: 3 small files >= 3" in out["due"][0]["reason"]
    assert (out["health"]["data_files"], out["health"]["small_files"]) == (3, 3)
    assert out["policy"]["retain_last"] == 2
    assert 0 < out["score"] < 100
    # Every point lost is said, and the points add up to the score.
    assert out["score"] == 100 - sum(p["points"] for p in out["penalties"])
    assert out["penalties"][0]["text"].startswith("-25: 3 small files in category=a")
    json.dumps(out)  # XCom-ready
    # The check is in the health history the Iceberg page charts.
    hook = IcebergHook()
    store = hook.state_store()
    try:
        [check] = table_checks(store.engine, store.catalog_name, "db.events")
    finally:
        hook.close()
    assert (check.score, check.due) == (out["score"], [d["job"] for d in out["due"]])
    assert check.inputs["source"] == "health task"
    assert check.inputs["penalties"] == out["penalties"]
    assert (check.number("data_files"), check.number("small_files")) == (3, 3)
    with pytest.raises(AirflowException, match=r"policy for db.events: .*\['minor'\]"):
        TableHealthOperator(task_id="h", table="db.events", policy={"minor": 1}).execute({})


# Real spark-submit in dag.test() -----------------------------------------------------------


def small_files_table(warehouse: Path, files: int) -> tuple[SqlCatalog, list[int]]:
    """db.events: `files` one-row Parquet files in partition a, registered in the catalog."""
    table = LocalTable.create(
        warehouse / "db" / "events", PSCHEMA, spec_of(("category", "identity", "category"))
    )
    ids = list(range(files))
    table.commit(
        add=[
            table.write_data([{"id": i, "category": "a", "ts": 1_700_000_000_000_000 + i}])
            for i in ids
        ]
    )
    catalog = SqlCatalog("default", warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.register_table("db.events", table.metadata_location)
    return catalog, ids


def write_batch(path: Path, ids: Sequence[int]) -> Path:
    ts = pa.array(
        [datetime.fromtimestamp(1_700_000_000 + i, tz=UTC) for i in ids],
        pa.timestamp("us", tz="UTC"),
    )
    batch = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": pa.array(["a"] * len(ids), pa.string()),
            "ts": ts,
        }
    )
    pq.write_table(batch, path)
    return path


def xcom(dag_id: str, run_id: str, task_id: str) -> Any:
    from airflow.models.xcom import XComModel  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run_id, key="return_value", task_ids=task_id, dag_ids=dag_id)
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def asset_events(uri: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        events = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
        ).all()
        return [dict(e.extra or {}) for e in events]


@pytest.fixture
def store(iceberg_connection: Path) -> Iterator[MaintenanceStore]:
    hook = IcebergHook()
    yield hook.state_store()
    hook.close()


@pytest.mark.usefixtures("jobs_on_connect")
def test_ingest_then_compact_in_a_dag_run(
    run_dag: Callable[..., Any], iceberg_connection: Path, tmp_path: Path, store: MaintenanceStore
) -> None:
    from airflow.sdk import DAG  # noqa: PLC0415

    catalog, ids = small_files_table(iceberg_connection, files=5)
    source = write_batch(tmp_path / "batch.parquet", [100, 101, 102])
    with DAG(
        "icefloe_test_ingest_compact",
        schedule=None,
        start_date=START,
        params={"table": "db.events"},
    ) as dag:
        ingest = IngestOperator(task_id="ingest", table="db.events", source=str(source))
        compact = RewriteDataFilesOperator(
            task_id="compact", table="{{ params.table }}", options={"min-input-files": 2}
        )
        health = TableHealthOperator(
            task_id="health", table="db.events", policy={"minor_file_count": 3}
        )
        ingest >> compact >> health
    run = run_dag(dag)
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]

    ingested = xcom(dag.dag_id, run.run_id, "ingest")
    assert (ingested["status"], ingested["rows"]) == ("committed", 3)
    assert ingested["batch_id"] == f"{dag.dag_id}/{run.run_id}/ingest"  # rendered default
    events = asset_events(table_asset("db.events").uri)
    assert [(e["table"], e["rows"], e["status"]) for e in events] == [("db.events", 3, "committed")]
    fleet = asset_events(fleet_asset("iceberg_default").uri)  # what a `schedule: asset` fleet sees
    assert ("db.events", 3, "committed") in [(e["table"], e["rows"], e["status"]) for e in fleet]

    compacted = xcom(dag.dag_id, run.run_id, "compact")
    assert compacted["rewritten_data_files"] == 6  # 5 small files + the ingested one
    assert compacted["added_data_files"] == 1
    table = catalog.load_table("db.events")
    files = list(table.scan().plan_files())
    assert len(files) == 1 and files[0].file.record_count == len(ids) + 3

    runs = store.last_runs("db.events")
    assert {job: r.state for job, r in runs.items()} == {
        "ingest": "success",
        "rewrite_data_files": "success",
    }
    assert runs["rewrite_data_files"].result == compacted
    # Its bytes went to the run's own column, which the page's chart sums.
    days = bytes_rewritten_per_day(store.engine, store.catalog_name, "db.events", days=2)
    assert sum(b for _, b in days) == compacted["rewritten_bytes"] > 0
    assert (runs["ingest"].dag_id, runs["ingest"].run_id) == (dag.dag_id, run.run_id)
    assert store.lock_holder("db.events") is None  # released after the job

    checked = xcom(dag.dag_id, run.run_id, "health")
    assert checked["table"] == "db.events"
    assert checked["health"]["data_files"] == 1
    assert checked["health"]["data_records"] == len(ids) + 3
    assert [d["job"] for d in checked["due"]] == ["remove_orphan_files"]  # never ran
    assert checked["policy"]["minor_file_count"] == 3
    # Each job recorded the table's health when it ended, then the health task did: the
    # page's charts have a point per step.
    history = table_checks(store.engine, store.catalog_name, "db.events")
    assert [(c.inputs["source"], c.number("data_files")) for c in history] == [
        ("job", 6),  # after the ingest: 5 small files + the batch's
        ("job", 1),  # after the compaction
        ("health task", 1),
    ]
    assert history[-1].score == checked["score"]
    catalog.close()


@pytest.fixture
def catalog_connection(
    iceberg_connection: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[IcebergHook]:
    """`iceberg_default` as Airflow's own Iceberg provider defines it (type `iceberg`, the
    catalog's properties in its extras), to a SQL catalog: PostgreSQL (a catalog name of its
    own) when a server answers, so the job gets its catalog URI from the environment; else
    SQLite. Its runs go to the test's own state store (`iceberg_connection`)."""
    warehouse = str(iceberg_connection)
    extra = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": warehouse}
    if postgres_unavailable() is None:
        extra.update(uri=POSTGRES_URI, catalog_name=unique_catalog_name())
    connection = json.dumps({"conn_type": "iceberg", "extra": extra})
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_DEFAULT", connection)
    hook = IcebergHook()
    yield hook
    forget_catalog(hook.get_catalog())  # type: ignore[arg-type]
    hook.close()


@pytest.mark.spark_submit
def test_failed_job_raises_its_cause_and_is_recorded(
    run_dag: Callable[..., Any], catalog_connection: IcebergHook
) -> None:
    """A job that fails inside Spark: its one-line cause is the task's error and the run's
    record; a table that does not exist is refused before anything starts or is recorded.
    The connection is an `iceberg` one: the job reached the table through it."""
    from airflow.sdk import DAG  # noqa: PLC0415

    catalog = catalog_connection.get_catalog(create=True)
    catalog.create_namespace("db")
    catalog.create_table("db.empty", SMALL_SCHEMA)
    with DAG("icefloe_test_failure", schedule=None, start_date=START) as dag:
        ExpireSnapshotsOperator(
            task_id="expire",
            table="db.empty",
            options={"snapshot_ids": [123456789]},
            retries=0,
        )
        ExpireSnapshotsOperator(task_id="missing", table="db.missing", retries=0)
        TableHealthOperator(task_id="health", table="db.empty")
    run = run_dag(dag)
    assert run.state == "failed"
    assert xcom(dag.dag_id, run.run_id, "health")["health"]["data_files"] == 0
    store = catalog_connection.state_store()
    [failed] = store.recent_runs("db.empty")
    assert (failed.job, failed.state, failed.result) == ("expire_snapshots", "failed", None)
    assert failed.error is not None
    assert failed.error.startswith("expire_snapshots failed on db.empty: ")
    assert "123456789" in failed.error
    assert store.lock_holder("db.empty") is None
    assert store.recent_runs("db.missing") == []  # refused before spark-submit, unrecorded
    assert "db.missing" not in store.tables()
