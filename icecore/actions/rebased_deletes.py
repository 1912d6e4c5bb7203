"""The position delete files a compaction writes on format v2 when it rebases deletes other
writers committed meanwhile (`icecore.commit.rebase`; v3 takes deletion vectors instead).

One file per new data file, scoped to it (its `file_path` bounds name that file alone), as
Iceberg Java's writers scope deletes at `write.delete.granularity=file`: a later compaction
of that data file drops the delete file with it, and no reader opens it for any other file.
They are written as every job's files are (`RunFiles`, the task writer: the table's Parquet
settings and location provider, full metrics), in the driver: a rebase writes a handful of
rows per concurrent commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.metrics import decode
from icecore.data.parquet_writer import TaskWriter
from icecore.data.task_reports import Written
from icecore.spec.manifest import DataFile

if TYPE_CHECKING:
    from icecore.table import Table


class PositionDeleteWriter:
    """Writes a rebase's deletes as position delete files, one per data file."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def write(
        self, positions: Mapping[str, np.ndarray], data_files: Mapping[str, DataFile]
    ) -> list[DataFile]:
        if not positions:
            return []
        metadata = self.table.metadata
        targets = [data_files[path] for path in positions]
        groups = {i: (f.spec_id, tuple(f.partition)) for i, f in enumerate(targets)}
        file_set = FileSet.position_deletes(metadata.spec(), groups=groups)
        run = RunFiles(self.table.io, metadata, "rebased-deletes")
        writer = TaskWriter(run.write_plan(file_set), self.table.io)
        try:
            for group, target in enumerate(targets):
                pos = np.asarray(positions[target.file_path], dtype=np.int64)
                paths = pa.array([target.file_path] * len(pos), pa.string())
                writer.add(pa.table([paths, pa.array(pos)], schema=writer.schema), group=group)
            reported = writer.close()
        except BaseException:
            writer.abort()
            raise
        run.add(
            file_set,
            {
                location: Written(group, None, decode(json.loads(metrics)))
                for location, group, _, metrics, _ in reported
            },
        )
        return run.files()
