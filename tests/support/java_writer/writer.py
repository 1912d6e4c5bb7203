"""The merge-on-read writer on a timer: Iceberg Java's DELETEs, one batch of keys each, every
`interval` seconds (or back to back while a DELETE takes longer), beside whatever the test
runs meanwhile."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable, Sequence
from types import TracebackType

from .outcomes import DeleteOutcome, WriterResult
from .process import IcebergJava


def key_batches(keys: Iterable[int], size: int, count: int, seed: int) -> list[list[int]]:
    """`count` disjoint batches of `size` keys drawn from `keys` by `seed`: every DELETE
    deletes rows (of deleted keys, Java commits an empty snapshot), spread over the table."""
    pool = sorted(keys)
    if size * count > len(pool):
        raise ValueError(f"{count} batches of {size} keys need {size * count}, not {len(pool)}")
    random.Random(seed).shuffle(pool)
    return [sorted(pool[n * size : (n + 1) * size]) for n in range(count)]


class MergeOnReadWriter:
    """Deletes `batches[n]` on tick n (a thread of the test's process driving the Java
    process), until the batches run out or `stop()`. A DELETE that fails (a concurrent commit
    of ours made it invalid) is recorded and the writer goes on with the next batch.

        with java.writer(table.identifier, batches) as writer:
            writer.wait_for_commits(3)
            ...  # our job, concurrently
        writer.result.deleted_keys
    """

    def __init__(
        self,
        java: IcebergJava,
        table: str,
        batches: Sequence[Sequence[int]],
        *,
        column: str = "id",
        interval: float = 0.5,
    ) -> None:
        self.java = java
        self.table = table
        self.batches = [list(b) for b in batches]
        self.column = column
        self.interval = interval
        self._outcomes: list[DeleteOutcome] = []
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._started = 0.0
        self._result: WriterResult | None = None

    def start(self) -> MergeOnReadWriter:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="iceberg-java-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 300.0) -> WriterResult:
        """Stop after the DELETE in flight; the run's result."""
        if self._result is None:
            self._stopping.set()
            assert self._thread is not None, "stop() before start()"
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"the Java writer's DELETE did not end in {timeout:.0f} s")
            if self._failure is not None:
                raise RuntimeError("the Java writer failed") from self._failure
            ended = max((o.started + o.seconds for o in self._outcomes), default=self._started)
            self._result = WriterResult(tuple(self._outcomes), ended - self._started)
        return self._result

    @property
    def result(self) -> WriterResult:
        if self._result is None:
            raise RuntimeError("the writer is still running: stop() it first")
        return self._result

    @property
    def commits(self) -> int:
        """How many DELETEs committed so far."""
        with self._changed:
            return sum(o.committed for o in self._outcomes)

    def wait_for_commits(self, count: int, timeout: float = 120.0) -> None:
        """Block until `count` DELETEs committed (or the writer ended: then fail)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(o.committed for o in self._outcomes) < count:
                finished = self._thread is None or not self._thread.is_alive()
                left = deadline - time.monotonic()
                if finished or left <= 0:
                    outcomes = [str(o.error) if o.error else o.snapshot_id for o in self._outcomes]
                    raise RuntimeError(f"{count} commits expected; the writer's: {outcomes}")
                self._changed.wait(min(left, 1.0))

    def __enter__(self) -> MergeOnReadWriter:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        due = self._started
        try:
            for batch in self.batches:
                if self._stopping.wait(max(0.0, due - time.monotonic())):
                    break
                due = time.monotonic() + self.interval
                outcome = self.java.delete(self.table, batch, self.column)
                with self._changed:
                    self._outcomes.append(outcome)
                    self._changed.notify_all()
        except BaseException as exc:  # the process died: stop() raises it
            self._failure = exc
        finally:
            with self._changed:
                self._changed.notify_all()
