"""The commit loop every table change shares (Java's `PendingUpdate` + `SnapshotProducer.commit`).

An update turns a base TableMetadata into a new one (`_apply`) and the catalog swaps the
table's metadata pointer only if nobody else moved it meanwhile. On a lost swap the table is
refreshed and the update re-applied to the new base: `_apply` re-validates against whatever
was committed in between and raises `CommitConflictError` when the rules forbid going on.
Files an update wrote but did not end up in the committed metadata are deleted by
`_cleanup`, except when the catalog cannot tell whether the swap happened.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from icecore.errors import CommitFailedError, CommitStateUnknownError
from icecore.spec.metadata import TableMetadata
from icecore.spec.properties import (
    COMMIT_MAX_RETRY_WAIT_MS,
    COMMIT_MIN_RETRY_WAIT_MS,
    COMMIT_NUM_RETRIES,
    COMMIT_TOTAL_RETRY_TIME_MS,
)

if TYPE_CHECKING:
    from icecore.table import Table


class TableUpdate(ABC):
    """One change to one table, committed with `commit()`."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.attempts = 0

    @abstractmethod
    def _apply(self, base: TableMetadata) -> TableMetadata:
        """The new metadata for `base`; may write files, must be safe to call again."""

    def _cleanup(self, committed: TableMetadata | None) -> None:  # noqa: B027 - optional hook
        """Delete files written by `_apply` that `committed` does not use (None: failure)."""

    def apply(self) -> TableMetadata:
        """The metadata this update would commit against the table's current state."""
        return self._apply(self.table.metadata)

    def commit(self) -> TableMetadata:
        base = self.table.metadata
        props = base.properties
        retries = COMMIT_NUM_RETRIES.read(props)
        min_wait = COMMIT_MIN_RETRY_WAIT_MS.read(props)
        max_wait = COMMIT_MAX_RETRY_WAIT_MS.read(props)
        deadline = time.monotonic() + COMMIT_TOTAL_RETRY_TIME_MS.read(props) / 1000
        try:
            while True:
                self.attempts += 1
                updated = self._apply(base)
                try:
                    committed = self.table.commit_metadata(base, updated)
                    break
                except CommitFailedError:
                    if self.attempts > retries or time.monotonic() > deadline:
                        raise
                    wait_ms = min(max_wait, min_wait * 2 ** (self.attempts - 1))
                    time.sleep(wait_ms * random.uniform(0.5, 1.0) / 1000)
                    base = self.table.refresh().metadata
        except CommitStateUnknownError:
            raise
        except Exception:
            self._cleanup(None)
            raise
        self._cleanup(committed)
        return committed
