"""A compaction bin's task (`icecore.data.bin_rewrite`): its reading thread. The rewrite of
bins itself runs in every bin-pack compaction of the Spark job tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from icecore.data.bin_rewrite import prefetched


def test_prefetched_reading_keeps_order_errors_and_stops_with_the_writer() -> None:
    """The task's reader runs on a thread of its own (`bin_rewrite.prefetched`): batches come
    in order, a read error reaches the writer, and a writer that fails stops the reader."""
    assert list(prefetched(iter(range(1_000)), depth=3)) == list(range(1_000))

    def failing() -> Iterator[int]:
        yield 1
        raise OSError("bad-file.parquet: truncated")

    with pytest.raises(OSError, match="bad-file"):
        list(prefetched(failing()))

    produced: list[int] = []

    def endless() -> Iterator[int]:
        n = 0
        while True:
            produced.append(n)
            yield n
            n += 1

    reading = prefetched(endless(), depth=2)
    assert next(reading) == 0
    reading.close()  # the writer stopped: the reader thread must end, not run forever
    settled = len(produced)
    assert settled <= 5
    threading.Event().wait(0.3)
    assert len(produced) == settled
