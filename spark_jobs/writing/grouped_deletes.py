"""Writing delete files grouped by an integer group id, each group one (spec, partition).

The rows to write carry a `_group` column, a partition column of the write: each task keeps a
group's rows in files of their own and reports each file's group directory (`_group=7`), and
the group, not a directory name, says which partition spec and partition tuple a file belongs
to. That lets one Spark write produce files for partitions of several specs (a table after a
partition change) whose values come from the files they replace or point at, not from
recomputing transforms. In the default layout the group is a directory of the run's
(`_group=7/`); with hashed locations a group's files go under its partition's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from icecore.data.metrics import MetricsConfig
from icecore.spec.manifest import DataFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.types import NestedField
from spark_jobs.common.errors import JobError
from spark_jobs.reading.live_files import PartitionKey
from spark_jobs.writing.files import GROUP, FileSet, RunFiles
from spark_jobs.writing.layout import PartitionLayout

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_GROUP_PREFIX = f"{GROUP}="


class GroupLayout(PartitionLayout):
    """A layout of one `_group` directory level; partition values come from the groups."""

    def __init__(self, groups: Mapping[int, PartitionKey]) -> None:
        self.groups = dict(groups)

    @property
    def names(self) -> list[str]:
        return [GROUP]

    @property
    def is_partitioned(self) -> bool:
        return True

    def partition_paths(self, metadata: TableMetadata) -> dict[str, str]:
        schema = metadata.schema()
        return {
            f"{_GROUP_PREFIX}{index}": metadata.spec_by_id(spec_id).partition_path(values, schema)
            for index, (spec_id, values) in self.groups.items()
        }

    def partition_of(self, relative_path: str) -> tuple[Any, ...]:
        return self.groups[group_of(relative_path)][1]


def group_of(directory: str) -> int:
    """The group of a file from the directories its task reported (`_group=7`, maybe with
    partition directories below, and the file name)."""
    for part in directory.split("/"):
        if part.startswith(_GROUP_PREFIX) and part[len(_GROUP_PREFIX) :].isdigit():
            return int(part[len(_GROUP_PREFIX) :])
    raise JobError(f"{directory}: written outside a {GROUP}= directory")


def position_columns(path: Column, pos: Column) -> list[Column]:
    """`file_path` and `pos` with their reserved field ids, non-nullable (required)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.schema import FIELD_ID_KEY  # noqa: PLC0415 (Spark work only)

    return [
        F.coalesce(path, F.lit("")).alias(
            DELETE_FILE_PATH.name, metadata={FIELD_ID_KEY: DELETE_FILE_PATH.field_id}
        ),
        F.coalesce(pos.cast("long"), F.lit(0).cast("long")).alias(
            DELETE_FILE_POS.name, metadata={FIELD_ID_KEY: DELETE_FILE_POS.field_id}
        ),
    ]


def write_position_deletes(
    run: RunFiles,
    frame: DataFrame,
    spec: PartitionSpec,
    groups: Mapping[int, PartitionKey],
    *,
    max_records: int | None = None,
    name: str = "position-deletes",
) -> list[DataFile]:
    """`frame` has `file_path`, `pos` and `_group`; one sorted file (or more, split at
    `max_records`) per group per task. Returns nothing until `finish` describes them."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    rows = frame.select(*position_columns(F.col("file_path"), F.col("pos")), F.col(GROUP))
    rows = rows.repartition(F.col(GROUP)).sortWithinPartitions(GROUP, "file_path", "pos")
    run.write(rows, FileSet.position_deletes(spec, GroupLayout(groups), name), max_records)
    return []


def write_equality_deletes(
    run: RunFiles,
    frame: DataFrame,
    spec: PartitionSpec,
    *,
    key_fields: Sequence[NestedField],
    groups: Mapping[int, PartitionKey],
    name: str,
    metrics: MetricsConfig,
) -> None:
    """`frame` has the key columns and `_group`; one file per group."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    rows = frame.repartition(F.col(GROUP))
    run.write(rows, FileSet.equality_deletes(name, key_fields, spec, GroupLayout(groups), metrics))


def finish(run: RunFiles, groups: Mapping[int, PartitionKey]) -> list[tuple[DataFile, int]]:
    """Every file the run wrote, with its spec id set from its group, and the group."""
    out = []
    for f in run.files():
        group = group_of(run.directory_of(f.file_path))
        spec_id, partition = groups[group]
        out.append((dataclasses.replace(f, spec_id=spec_id, partition=partition), group))
    return out
