"""Killing a job between "its files are written" and "its commit landed", every time.

A job writes its files first and commits last; a test that kills it when the first new file
appears races the commit on a fast or loaded machine. `commits_held` takes SQLite's write
lock on the warehouse's catalog for the block: the job still reads the table (WAL lets
readers on) and writes its files, but its commit waits on the lock (the catalog's busy
timeout, 30 s), so a kill made inside the block always lands before the commit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icecore.catalog.sql import SQLITE_FILE


@contextlib.contextmanager
def commits_held(warehouse: Path) -> Iterator[None]:
    """No commit to `<warehouse>/catalog.db` lands until the block ends."""
    lock = sqlite3.connect(warehouse / SQLITE_FILE, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        yield
    finally:
        lock.close()  # rolls the empty transaction back


def kill_once_written(
    process: subprocess.Popen[bytes], written: Callable[[], bool], what: str, timeout: float = 240
) -> str:
    """SIGKILL the job's process group as soon as `written()` holds; its stderr."""
    deadline = time.monotonic() + timeout
    while not written():
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the job ended before it wrote {what}: {err.decode()[-3000:]}")
        assert time.monotonic() < deadline, f"no {what} written in {timeout:.0f} s"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, err.decode()[-3000:]
    return err.decode()
