"""Where a table's trash lives, and the name each removed file takes in it.

    <table location>/.icefloe-trash/<table uuid>/
        runs/<run>.jsonl        the run's record, written before its first move
        runs/<run>.done         written once its moves are over (a killed run has none)
        files/<run>/in/<path>   a file of the table location, at its path below it
        files/<run>/out/<scheme>/<authority>/<path>   a file elsewhere (`write.data.path`)
        purged/<run>.jsonl      the deletion log: what the run purged or deleted, and when
        summary.json            files and bytes per run, for the health check and the page

Why there:
- The directory is hidden (its name starts with `.`), so no orphan removal takes the trash
  for orphans: icefloe's skips hidden names (`icecore.orphans.is_hidden`), and so does
  Iceberg Java's `DeleteOrphanFiles` (`FileSystemWalker` drops any path with a component
  starting with `.` or `_` below the listed directory, `_key=value` partition directories
  of the table's specs excepted; `.icefloe-trash` has no `=`). No reader opens it: readers
  open the files metadata names, and metadata never names a trashed file.
- It sits under the table location, on the same store and usually the same bucket and
  prefix as the files it takes, so moving a file there is a rename where the store has one,
  and a server-side copy inside one bucket where it does not.
- It is keyed by the table's uuid: two tables sharing a parent location, or even one
  location, never see each other's trash; a table nested inside another keeps its trash in
  its own location, which the outer table's orphan removal skips twice over (hidden, and
  another table's tree).

A file's name in the trash encodes its original location (`in/` below the table location,
`out/` with its scheme and authority otherwise), so even without its record a trashed file
says where it came from. Run ids start with the UTC time (`20240107T031500Z-<job>-<hex>`):
sorted names are chronological.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from icecore.errors import ValidationError
from icecore.io.locations import is_within, split_location
from icecore.spec.metadata import TableMetadata

TRASH_DIRECTORY = ".icefloe-trash"
_INSIDE, _OUTSIDE = "in", "out"
_NO_AUTHORITY = "-"


def new_run_id(job: str, now_ms: int) -> str:
    """`20240107T031500Z-expire_snapshots-1a2b3c4d`: its time, its job, and enough randomness
    that two runs of one second never share a directory."""
    stamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{job}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class TrashLayout:
    """The trash of one table: its root and every name inside it."""

    table_location: str
    table_uuid: str

    @classmethod
    def of(cls, metadata: TableMetadata) -> TrashLayout:
        if not metadata.table_uuid:
            raise ValidationError(f"table at {metadata.location} has no uuid: it has no trash")
        return cls(metadata.location.rstrip("/"), metadata.table_uuid)

    @property
    def root(self) -> str:
        return f"{self.table_location}/{TRASH_DIRECTORY}/{self.table_uuid}"

    @property
    def files(self) -> str:
        return f"{self.root}/files"

    @property
    def runs(self) -> str:
        return f"{self.root}/runs"

    @property
    def purged(self) -> str:
        return f"{self.root}/purged"

    @property
    def summary(self) -> str:
        return f"{self.root}/summary.json"

    def record(self, run: str) -> str:
        return f"{self.runs}/{run}.jsonl"

    def done(self, run: str) -> str:
        return f"{self.runs}/{run}.done"

    def purge_log(self, run: str) -> str:
        return f"{self.purged}/{run}.jsonl"

    def run_files(self, run: str) -> str:
        return f"{self.files}/{run}"

    def trash_location(self, run: str, original: str) -> str:
        """Where run `run` puts the file at `original`."""
        if is_within(original, self.table_location):
            below = split_location(original).path[
                len(split_location(self.table_location).path.rstrip("/")) :
            ]
            return f"{self.run_files(run)}/{_INSIDE}/{below.strip('/')}"
        scheme, authority, path = split_location(original)
        return (
            f"{self.run_files(run)}/{_OUTSIDE}/{scheme or 'file'}/"
            f"{authority or _NO_AUTHORITY}/{path.lstrip('/')}"
        )

    def run_of(self, trash_location: str) -> str | None:
        """The run whose directory holds a listed trash file, or None for anything else."""
        split, files = split_location(trash_location).path, split_location(self.files).path
        if not split.startswith(files + "/"):
            return None
        return split[len(files) + 1 :].split("/", 1)[0] or None

    def original_of(self, trash_location: str) -> str | None:
        """The original location a trash file's name encodes (spelled with the table
        location's scheme and authority for `in/`), or None when it encodes none."""
        run = self.run_of(trash_location)
        if run is None:
            return None
        base = split_location(self.run_files(run)).path
        rest = split_location(trash_location).path[len(base) + 1 :]
        side, _, tail = rest.partition("/")
        if side == _INSIDE and tail:
            return f"{self.table_location}/{tail}"
        if side == _OUTSIDE:
            parts = tail.split("/", 2)
            if len(parts) == 3:
                scheme, authority, path = parts
                if scheme == "file":
                    return (
                        f"/{path}" if authority == _NO_AUTHORITY else f"file://{authority}/{path}"
                    )
                authority = "" if authority == _NO_AUTHORITY else authority
                return f"{scheme}://{authority}/{path}"
        return None
