"""Writing delete files grouped by an integer group id, each group one (spec, partition).

The rows to write carry a `_group` column: each task keeps a group's rows in files of their
own and reports each file's group as a value, and the group, not a directory name, says which
partition spec and partition tuple a file belongs to (`FileSet.groups`). That lets one Spark
write produce files for partitions of several specs (a table after a partition change) whose
values come from the files they replace or point at, not from recomputing transforms. A
group's files go under its partition's path, in the run's directory or hashed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from icecore.actions.live_files import PartitionKey
from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.metrics import MetricsConfig
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.types import NestedField
from spark_jobs.writing.files import GROUP, write_frame

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


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
) -> None:
    """`frame` has `file_path`, `pos` and `_group`; one sorted file (or more, split at
    `max_records`) per group per task (`RunFiles.grouped_files` describes them)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    rows = frame.select(*position_columns(F.col("file_path"), F.col("pos")), F.col(GROUP))
    rows = rows.repartition(F.col(GROUP)).sortWithinPartitions(GROUP, "file_path", "pos")
    write_frame(run, rows, FileSet.position_deletes(spec, (), name, groups=groups), max_records)


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
    file_set = FileSet.equality_deletes(name, key_fields, spec, (), metrics, groups=groups)
    write_frame(run, rows, file_set)
