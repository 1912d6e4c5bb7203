"""What a Spark task's Python worker needs around icecore's task code: low per-task overhead,
FileIO clients reused across tasks, the task's number.

Before every task, PySpark's worker calls `importlib.invalidate_caches()` (it may have been
sent new `--py-files`). On CPython 3.11 and 3.12 that makes every zip importer on `sys.path`
re-read its archive's whole directory at once, and PySpark puts `pyspark.zip` and py4j's zip
there: about 0.2 s a task on a 2-core machine, a third of a compaction's Python time once
table files are read and written in the tasks. A zip importer that re-reads its directory
only when the archive changed (size or modification time) keeps the meaning of the call.
"""

from __future__ import annotations

import json
import os
import sys
import zipimport
from collections.abc import Mapping

from icecore.io import FileIO


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns


class _ChangedZipImporter(zipimport.zipimporter):
    """A zip importer whose `invalidate_caches` re-reads the archive only when it changed."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._stamp = _stamp(self.archive)

    def invalidate_caches(self) -> None:
        stamp = _stamp(self.archive)
        if stamp != self._stamp:
            self._stamp = stamp
            super().invalidate_caches()


def cheap_cache_invalidation() -> None:
    """Swap this worker's zip importers for ones that re-read only changed archives."""
    for entry, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter:
            try:
                sys.path_importer_cache[entry] = _ChangedZipImporter(entry)
            except zipimport.ZipImportError:
                continue


_IO: dict[str, FileIO] = {}  # per Python worker: one client per set of properties


def worker_io(properties: Mapping[str, str]) -> FileIO:
    """The worker's FileIO for these properties, built once: a task reuses the clients (and
    their connections) the worker's earlier tasks opened."""
    key = json.dumps(dict(properties), sort_keys=True)
    return _IO.get(key) or _IO.setdefault(key, FileIO(properties))


def task_partition() -> int:
    """The Spark task's partition id, which starts the names of the files it writes; 0 in the
    driver's own threads (work done there never imports pyspark, which a Spark task's worker
    always has loaded)."""
    if "pyspark" not in sys.modules:
        return 0
    from pyspark import TaskContext  # noqa: PLC0415 (loaded already)

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
