"""What the Java writer's DELETEs did: each one's commit or exception, and a run's sum."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JavaError:
    """An exception Java raised: its class and message, and its causes' (outermost first)."""

    java_class: str
    message: str
    causes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, answer: dict[str, Any]) -> JavaError:
        causes = tuple((c, m) for c, m in answer.get("causes", ()))
        return cls(answer["class"], answer["message"], causes)

    @property
    def root(self) -> tuple[str, str]:
        """The innermost cause, which says why (Spark wraps a failed commit)."""
        return self.causes[-1] if self.causes else (self.java_class, self.message)

    def __str__(self) -> str:
        root_class, root_message = self.root
        outer = f" (in {self.java_class})" if self.causes else ""
        return f"{root_class}: {root_message.splitlines()[0] if root_message else ''}{outer}"


@dataclass(frozen=True)
class DeleteOutcome:
    """One `DELETE ... WHERE id IN (keys)`: the snapshot it committed, or Java's exception."""

    keys: tuple[int, ...]
    started: float  # time.monotonic() when it was sent
    seconds: float
    # None with an error (Java commits a snapshot even for a DELETE that matches no row).
    snapshot_id: int | None = None
    error: JavaError | None = None

    @property
    def committed(self) -> bool:
        return self.error is None and self.snapshot_id is not None


@dataclass(frozen=True)
class WriterResult:
    """A run of the writer: every DELETE's outcome, in order, over `seconds`."""

    outcomes: tuple[DeleteOutcome, ...]
    seconds: float

    @property
    def committed(self) -> tuple[DeleteOutcome, ...]:
        return tuple(o for o in self.outcomes if o.committed)

    @property
    def failed(self) -> tuple[DeleteOutcome, ...]:
        return tuple(o for o in self.outcomes if o.error is not None)

    @property
    def deleted_keys(self) -> frozenset[int]:
        """The keys of the committed DELETEs: the rows a reader must no longer see."""
        return frozenset(k for o in self.committed for k in o.keys)

    @property
    def snapshot_ids(self) -> tuple[int, ...]:
        return tuple(o.snapshot_id for o in self.committed if o.snapshot_id is not None)

    @property
    def commits_per_second(self) -> float:
        return len(self.committed) / self.seconds if self.seconds else 0.0

    def errors(self) -> Counter[str]:
        """How often each failure happened, by its root cause's class and first line."""
        return Counter(str(o.error) for o in self.failed)

    def summary(self) -> dict[str, Any]:
        """For a test's or a benchmark's report."""
        durations = sorted(o.seconds for o in self.outcomes) or [0.0]
        return {
            "deletes": len(self.outcomes),
            "committed": len(self.committed),
            "failed": len(self.failed),
            "seconds": round(self.seconds, 2),
            "commits_per_second": round(self.commits_per_second, 2),
            "delete_seconds_median": round(durations[len(durations) // 2], 3),
            "errors": dict(self.errors()),
        }
