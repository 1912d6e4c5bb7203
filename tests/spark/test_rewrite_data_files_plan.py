"""Compaction planning without Spark: candidates, groups, output file counts, which delete
files a commit may drop."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from icecore.actions.file_sizes import FileSizeBounds
from icecore.actions.rewrite_data_files import (
    CompactionPlan,
    FileGroup,
    PlanRules,
    group_tasks,
    plan_compaction,
)
from icecore.errors import ValidationError
from icecore.expressions import equal
from icecore.io import FileIO
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.scan import FileScanTask
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from spark_jobs.rewrite_data_files.in_tasks import rewrite_in_tasks
from spark_jobs.rewrite_data_files.job import plan_rules
from tests.support.committing import CatalogTable, sqlite_catalog

MB = 1024 * 1024


def _file(
    name: str,
    size: int,
    *,
    records: int = 100,
    partition: tuple = (0,),
    spec_id: int = 0,
    content: FileContent = FileContent.DATA,
) -> DataFile:
    return DataFile(
        file_path=f"/t/{name}.parquet",
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=records,
        file_size_in_bytes=size,
        content=content,
        spec_id=spec_id,
        equality_ids=[1] if content == FileContent.EQUALITY_DELETES else None,
    )


def _task(f: DataFile, *deletes: DataFile, seq: int = 1) -> FileScanTask:
    return FileScanTask(f, seq, tuple(deletes))


SIZES = FileSizeBounds.of(100 * MB, None, None)


def rules(output_spec_id: int = 0, **options: object) -> PlanRules:
    return plan_rules(RewriteDataFilesOptions("db.t", **options), SIZES, output_spec_id)  # type: ignore[arg-type]


OPTIONS = rules()


def test_small_files_group_per_partition_and_min_input_files() -> None:
    small = [_task(_file(f"a{i}", 10 * MB)) for i in range(5)]
    few = [_task(_file(f"b{i}", 10 * MB, partition=(1,))) for i in range(2)]
    right = [_task(_file("c", 100 * MB, partition=(2,)))]
    groups = group_tasks([*small, *few, *right], OPTIONS)
    assert [(g.partition, len(g.tasks)) for g in groups] == [((0,), 5)]
    # Two small files are rewritten when they hold more than a target's worth of bytes.
    bigger = [_task(_file(f"d{i}", 60 * MB, partition=(3,))) for i in range(2)]
    assert [len(g.tasks) for g in group_tasks(bigger, OPTIONS)] == [2]


def test_deletes_old_specs_and_rewrite_all_select_single_files() -> None:
    ok = _file("ok", 100 * MB, records=1000)
    eq = _file("eq", 1 * MB, records=400, content=FileContent.EQUALITY_DELETES)
    assert len(group_tasks([_task(ok, eq)], OPTIONS)) == 1  # ratio 0.4 >= 0.3
    small_eq = _file("eq2", 1 * MB, records=10, content=FileContent.EQUALITY_DELETES)
    assert group_tasks([_task(ok, small_eq)], OPTIONS) == []
    threshold = rules(delete_file_threshold=1)
    assert len(group_tasks([_task(ok, small_eq)], threshold)) == 1
    old_spec = _file("old", 100 * MB, spec_id=0)
    assert len(group_tasks([_task(old_spec)], rules(output_spec_id=1))) == 1
    assert group_tasks([_task(old_spec)], OPTIONS) == []
    everything = rules(rewrite_all=True)
    assert len(group_tasks([_task(ok)], everything)) == 1


def test_max_group_size_splits_groups() -> None:
    tasks = [_task(_file(f"a{i}", 40 * MB)) for i in range(6)]
    options = rules(max_file_group_size_bytes=100 * MB, min_input_files=2)
    groups = group_tasks(tasks, options)
    assert sorted(len(g.tasks) for g in groups) == [2, 2, 2]


def test_output_files_follow_iceberg() -> None:
    assert SIZES.output_files(10 * MB) == 1
    assert SIZES.output_files(250 * MB) == 3  # remainder 50 MB < min 75 MB, avg 125 > 110
    assert SIZES.output_files(205 * MB) == 2  # remainder 5 MB folds into two files
    assert SIZES.output_files(290 * MB) == 3  # remainder 90 MB > min: its own file
    with pytest.raises(ValidationError, match="min-file-size-bytes 200 must lie between 0 and"):
        FileSizeBounds.of(100, 200, None)
    with pytest.raises(ValidationError, match="max-file-size-bytes 50 must be at least the target"):
        FileSizeBounds.of(100, None, 50)


def test_delete_files_dropped_only_when_every_target_is_replaced() -> None:
    a, b, c = (_file(n, MB) for n in "abc")
    pos = _file("pos", MB, content=FileContent.POSITION_DELETES)
    glob = _file("glob", MB, content=FileContent.EQUALITY_DELETES)
    g1 = FileGroup(0, 0, (0,), [_task(a, pos, glob), _task(b, glob)])
    g2 = FileGroup(1, 0, (1,), [_task(c, glob)])
    plan = CompactionPlan(
        1,
        1,
        [g1, g2],
        {pos.file_path: {a.file_path}, glob.file_path: {a.file_path, b.file_path, c.file_path}},
    )
    assert [d.file_path for d in plan.removable_deletes([g1])] == [pos.file_path]
    both = {d.file_path for d in plan.removable_deletes([g1, g2])}
    assert both == {pos.file_path, glob.file_path}
    # Partial progress: the second commit drops the global delete, the first replaced a, b.
    later = plan.removable_deletes([g2], [a.file_path, b.file_path])
    assert [d.file_path for d in later] == [glob.file_path]


class _CountingIO(FileIO):
    """icecore's FileIO, counting whole-file reads by location (how Avro files are read)."""

    def __init__(self, properties: dict[str, str]) -> None:
        super().__init__(properties)
        self.reads: Counter[str] = Counter()

    def read_bytes(self, location: str) -> bytes:
        self.reads[location] += 1
        return super().read_bytes(location)


def test_planning_reads_each_manifest_once(tmp_path: Path) -> None:
    """With a row filter, with deletes: the plan and its delete sequence numbers come from one
    read of each manifest (issue 16: delete manifests were read two or three times)."""
    t = CatalogTable.create(sqlite_catalog(tmp_path), "once")
    for cat in ("a", "b"):
        for i in range(3):
            f = t.data([{"id": i, "cat": cat, "v": i}], name=f"{cat}{i}")
            t.table.new_fast_append().append_file(f).commit()
    t.table.new_row_delta().add_deletes(t.position_deletes([(t["a0"].file_path, 0)])).commit()
    t.table.new_row_delta().add_deletes(
        t.equality_deletes([{"id": 1, "cat": "b"}], ["id"])
    ).commit()
    io = _CountingIO(t.table.io.properties)
    table = Table(t.table.identifier, t.table.metadata, io, t.table.catalog)
    options = RewriteDataFilesOptions(table="db.once", rewrite_all=True)
    rules = plan_rules(options, FileSizeBounds.of(512 * MB, None, None), 0)
    plan = plan_compaction(table, rules, row_filter=equal("cat", "a"))

    assert {Path(f.file_path).stem for g in plan.groups for f in g.data_files} == {"a0", "a1", "a2"}
    assert len(plan.delete_sequence_numbers) == 2
    manifests = [p for p in io.reads if not Path(p).name.startswith("snap-")]
    assert manifests and all(io.reads[p] == 1 for p in manifests), io.reads


@pytest.mark.parametrize(("ids", "message"), [((), "has no equality ids"), ((9,), "not top-level")])
def test_equality_keys_the_tasks_cannot_read_are_refused_before_spark(
    ids: tuple[int, ...], message: str
) -> None:
    """A key column nested in a struct (or none at all) is refused in the driver with the
    delete file's name, before any task would fail on it."""
    data = DataFile("s3://b/t/data/a.parquet", FileFormat.PARQUET, (), 10, 1_000)
    delete = DataFile(
        "s3://b/t/data/eq.parquet", FileFormat.PARQUET, (), 1, 100,
        content=FileContent.EQUALITY_DELETES, equality_ids=list(ids),
    )  # fmt: skip
    group = FileGroup(0, 0, (), [FileScanTask(data, 1, (delete,))])
    schema = Schema((NestedField(1, "id", LongType()),))
    with pytest.raises(ValidationError, match=rf"eq\.parquet.*{message}|{message}.*eq\.parquet"):
        rewrite_in_tasks(
            None,  # type: ignore[arg-type] - refused before Spark is used
            [group],
            run=None,  # type: ignore[arg-type]
            file_set=None,  # type: ignore[arg-type]
            table_schema=schema,
            output_files={0: 1},
            max_records=None,
            lineage=False,
        )
