"""What every metadata-only update shares: it is replayed, not merged, after a lost swap.

Metadata-only updates write no files, so a retry costs nothing but the replay: the calls the
user made (add this column, move that branch) run again against the refreshed metadata and are
validated there. A call that no longer makes sense on the new state (the column it renames was
renamed meanwhile, the branch it creates now exists) is a `CommitConflictError`, never a silent
change of what the user asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from icecore.commit.update import TableUpdate
from icecore.errors import CommitConflictError, NotFoundError, ValidationError
from icecore.spec.metadata import TableMetadata

if TYPE_CHECKING:
    from icecore.table import Table

T = TypeVar("T")


class ReplayedUpdate(TableUpdate):
    """A `TableUpdate` whose `_apply` rebuilds everything from the base it is given.

    Errors raised against the metadata the update was created from are the caller's mistakes
    (`ValidationError`); the same errors raised against a refreshed base mean a concurrent
    commit got in the way, and become `CommitConflictError`.
    """

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._start = table.metadata

    def _on(self, base: TableMetadata, build: Callable[[TableMetadata], T]) -> T:
        if base is self._start:
            return build(base)
        try:
            return build(base)
        except CommitConflictError:
            raise
        except (ValidationError, NotFoundError) as exc:
            raise CommitConflictError(
                f"{self.table.name}: {exc} (the table changed concurrently; it is now at "
                f"{base.metadata_location})"
            ) from exc
