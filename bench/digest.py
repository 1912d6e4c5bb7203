"""An order-independent digest of a scan plan, shared by the oracle and the planner children.

Stdlib only: a planner's child process must not import the other planner's dependencies, or
its peak RSS would not be its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from hashlib import blake2b
from typing import Any

_MOD = 1 << 128


class Tally:
    """Counts tasks and task-delete pairs, and sums a hash of each (data file, deletes) pair.

    The sum does not depend on the order tasks arrive in (PyIceberg plans manifests in
    threads), but any missing, extra or changed pair changes it.
    """

    def __init__(self) -> None:
        self.tasks = 0
        self.pairs = 0
        self._sum = 0

    def add(self, data_path: str, delete_paths: Iterable[str]) -> None:
        deletes = sorted(delete_paths)
        self.tasks += 1
        self.pairs += len(deletes)
        text = "\0".join([data_path, *deletes]).encode("utf-8")
        self._sum = (self._sum + int.from_bytes(blake2b(text, digest_size=16).digest())) % _MOD

    def result(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "pairs": self.pairs, "digest": f"{self._sum:032x}"}
