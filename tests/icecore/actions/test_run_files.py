"""The files of a run (`icecore.actions.run_files`) as its writing tasks make them
(`icecore.data.parquet_writer.TaskWriter`, as the jobs' Spark tasks and the driver's threads
run it): each lies under the path Java gives its partition, never below a directory of the
job's own (`_group=`); its task reports its group and partition values, which are all the
driver uses; files of failed attempts are deleted."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.parquet_writer import TaskWriter, WritePlan
from icecore.data.task_reports import kept_files, written_batch
from icecore.spec.manifest import FileContent
from icecore.spec.schema import Schema
from icecore.spec.terms import parse_partition_spec
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from tests.support.committing import sqlite_catalog

DAY = 19_723  # 2024-01-01


@pytest.fixture
def run(tmp_path: Path) -> RunFiles:
    """The files of a job run on a table partitioned by `v` and `day(ts)`."""
    schema = Schema(
        (
            NestedField(1, "id", LongType()),
            NestedField(2, "v", StringType()),
            NestedField(3, "ts", TimestampType()),
        )
    )
    spec = parse_partition_spec("v, day(ts)", schema)
    table = sqlite_catalog(tmp_path).create_table("db.t", schema, spec=spec)
    return RunFiles(table.io, table.metadata, "test")


def _plan(run: RunFiles, file_set: FileSet, max_records: int | None) -> WritePlan:
    return run.write_plan(file_set, max_records=max_records)


def _positions(writer: TaskWriter, count: int) -> pa.Table:
    return pa.table({"file_path": ["f"] * count, "pos": list(range(count))}, writer.schema)


def _written(run: RunFiles, file_set: FileSet, plan: WritePlan, writer: TaskWriter) -> None:
    reported = written_batch(writer.close()).to_pylist()
    run.add(file_set, kept_files(run.io, plan.location, reported))


def test_a_groups_files_go_under_its_partition_path_with_the_group_reported(run: RunFiles) -> None:
    spec = run.metadata.spec()
    groups = {7: (spec.spec_id, ("a b/c=d", DAY)), 8: (spec.spec_id, (None, DAY + 1))}
    file_set = FileSet.position_deletes(spec, groups=groups)
    plan = _plan(run, file_set, max_records=2)
    writer = TaskWriter(plan, run.io)
    writer.add(_positions(writer, 3), group=7)
    writer.add(_positions(writer, 1), group=8)
    _written(run, file_set, plan, writer)

    files = run.grouped_files()
    assert sorted((g, f.record_count) for f, g in files) == [(7, 1), (7, 2), (8, 1)]
    schema = run.metadata.schema()
    paths = set()
    for f, group in files:
        assert (f.spec_id, f.partition) == groups[group]
        assert f.content == FileContent.POSITION_DELETES
        directory = f.file_path.rsplit("/", 1)[0]
        assert directory == f"{plan.location}/{spec.partition_path(f.partition, schema)}"
        assert Path(f.file_path).is_file()
        paths.add(directory.removeprefix(plan.location))
    # Java's partitionToPath: values URL-encoded, null as `null`, a day as a date.
    assert paths == {"/v=a+b%2Fc%3Dd/ts_day=2024-01-01", "/v=null/ts_day=2024-01-02"}


def test_partition_values_from_the_rows_are_reported_as_values(run: RunFiles) -> None:
    """Rows with partition columns (Spark's string renderings): the reported values, not
    the path, give the manifest's partition tuple."""
    file_set = FileSet.position_deletes(run.metadata.spec(), ["v", "ts_day"])
    plan = _plan(run, file_set, max_records=None)
    writer = TaskWriter(plan, run.io)
    writer.add(_positions(writer, 2), values=("x", "2024-01-01"))
    writer.add(_positions(writer, 1), values=(None, "2023-12-31"))
    reported = written_batch(writer.close()).to_pylist()
    assert {(r["group"], r["partition"]) for r in reported} == {
        (None, '["x", "2024-01-01"]'),
        (None, '[null, "2023-12-31"]'),
    }
    run.add(file_set, kept_files(run.io, plan.location, reported))
    assert {f.partition for f in run.files()} == {(None, DAY - 1), ("x", DAY)}


def test_files_of_failed_attempts_are_deleted_below_partition_paths(run: RunFiles) -> None:
    spec = run.metadata.spec()
    file_set = FileSet.position_deletes(spec, groups={1: (spec.spec_id, ("x", DAY))})
    plan = _plan(run, file_set, max_records=None)
    failed = TaskWriter(plan, run.io)  # an attempt whose report never arrives
    failed.add(_positions(failed, 1), group=1)
    stray = failed.close()[0][0]
    writer = TaskWriter(plan, run.io)
    writer.add(_positions(writer, 1), group=1)
    _written(run, file_set, plan, writer)
    [(kept, _)] = run.grouped_files()
    assert Path(kept.file_path).is_file() and not Path(stray).exists()
    assert Path(stray).parent == Path(kept.file_path).parent
