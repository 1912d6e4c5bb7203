"""icefloe's trash: no file snapshot expiry or orphan removal takes out of a table is gone at
once; it is kept for the table's `icefloe.trash.retention` (3 days; `0s` deletes at once),
then purged by the next run of either job, and until then can be put back.

- `layout`: where a table's trash lives (`<location>/.icefloe-trash/<table uuid>/`) and why
  there, and the name each file takes in it;
- `records`: the runs' records and the deletion log, JSON lines on the store itself, so any
  machine with the store's credentials reads them (the `icefloe` command needs no Airflow);
- `trash`: recording a run before its moves, listing, purging, reconciling a killed run,
  putting files back;
- `snapshots`: what restoring an expired snapshot needs back, found in the trash.

What it costs, per store: a move is a rename on local disks, HDFS and ADLS Gen2 with a
hierarchical namespace (metadata only, whatever the size); on S3, GCS and Azure without a
hierarchical namespace a server-side copy then a delete (one COPY request per file on S3, a
rewrite on GCS: no byte leaves the store, but each trashed file is stored twice for a moment
and once, in the trash, for the window). `FileIO.move` has the details.
"""

from icecore.trash.layout import TRASH_DIRECTORY, TrashLayout, new_run_id
from icecore.trash.records import PurgedFile, PurgeRecord, RunRecord, TrashEntry
from icecore.trash.trash import (
    Purge,
    PutBack,
    RunSummary,
    Trash,
    TrashedFile,
    TrashSummary,
    purged_files,
    read_summary,
    run_time_ms,
)

__all__ = [
    "TRASH_DIRECTORY",
    "Purge",
    "PurgeRecord",
    "PurgedFile",
    "PutBack",
    "RunRecord",
    "RunSummary",
    "Trash",
    "TrashEntry",
    "TrashLayout",
    "TrashSummary",
    "TrashedFile",
    "new_run_id",
    "purged_files",
    "read_summary",
    "run_time_ms",
]
