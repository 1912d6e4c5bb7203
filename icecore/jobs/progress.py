"""Progress lines a person reads in a job's log: what was planned, what finished, how fast.

The jobs log through Python's `logging` under `icefloe.<job>` (stderr, one line each); the
JSON result stays the last line on stdout. `Progress` counts finished units of work (file
groups) and logs `3 of 12 groups written: 5 files, 1.2 GB, 80.0 MB/s` as each finishes.
"""

from __future__ import annotations

import logging
import threading
import time

from icecore.jobs.grammar import describe_size as size

__all__ = ["Progress", "size"]


class Progress:
    """Counts finished parts of `total` and logs each (thread-safe: groups finish in a pool)."""

    def __init__(self, log: logging.Logger, total: int, what: str) -> None:
        self.log = log
        self.total = total
        self.what = what
        self.done = 0
        self.bytes = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def finished(self, parts: int, files: int, written_bytes: int) -> None:
        with self._lock:
            self.done += parts
            self.bytes += written_bytes
            seconds = max(time.monotonic() - self.started, 1e-3)
            self.log.info(
                "%d of %d %s written: %d files, %s, %s/s",
                self.done,
                self.total,
                self.what,
                files,
                size(written_bytes),
                size(self.bytes / seconds),
            )
