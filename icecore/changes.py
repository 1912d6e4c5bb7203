"""What changed in a catalog since a cursor: the new commits of every table, by any engine.

A maintenance service must react to the commits that other engines make (Spark, Flink,
Trino, PyIceberg, Kafka Connect) without looking at every table at every tick, and must not
react to its own commits: a compaction that set off the next compaction would run for ever.
`CatalogWatch.poll` asks the catalog for every table's version at once
(`Catalog.table_versions`: one query on a SQL catalog, conditional loads on a REST one), and
reads the new metadata JSON of the tables whose version moved, only that file: the commits
are told from their snapshot summaries (who committed, how many files of which kind and size
they added), never from manifests. icefloe's jobs sign their commits (`icefloe.job` in the
summary): they are `own` commits, and `due_reasons` looks at the others only.

The cursor is a JSON-serializable `{"db.table": "..."}` (about 140 bytes a table) that a
caller stores between polls, where it survives a restart (an Airflow trigger's kwargs are
fixed when the trigger is created: a state store); a watch built from it emits each commit
made since, none twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icecore.catalog.base import Catalog, Identifier, to_identifier
from icecore.errors import IcecoreError
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import (
    ADDED_DATA_FILES,
    ADDED_DELETE_FILES,
    ADDED_DVS,
    ADDED_EQUALITY_DELETE_FILES,
    ADDED_EQUALITY_DELETES,
    ADDED_FILES_SIZE,
    ADDED_POSITION_DELETE_FILES,
    APP_ID,
    BATCH_ID,
    ENGINE_NAME,
    ICEFLOE_JOB,
    Operation,
    Snapshot,
)

LOG = logging.getLogger(__name__)

_UNKNOWN = "-"  # a cursor field not known yet (see _Seen)


def _count(summary: Mapping[str, str], key: str) -> int:
    """A summary counter; absent or not a number (an engine's own format) counts as 0."""
    try:
        return max(int(summary.get(key, "0")), 0)
    except ValueError:
        return 0


@dataclass(frozen=True)
class CommitSeen:
    """One new snapshot of a table, as its summary tells it.

    `job` is the icefloe job that committed it (`icefloe.job`), None for another engine's
    commit; `batch_id` the icefloe ingest batch it committed (`icefloe.batch-id`: our ingest
    signs its commits so, not with `icefloe.job`, and publishes its own Asset event, so a
    caller may skip these too); `engine` and `app_id` are what Iceberg Java's engines write
    (`engine-name`, `app-id`; Spark: "spark" and its application id), None when the writer
    wrote none (PyIceberg). `added_files_size` covers data and delete files, as Java's
    summary does; `added_dvs` (v3 deletion vectors) are counted in `added_delete_files`
    but not in `added_position_delete_files`, as Java counts them.
    """

    snapshot_id: int
    timestamp_ms: int
    sequence_number: int
    operation: str | None
    engine: str | None
    app_id: str | None
    job: str | None
    batch_id: str | None = None
    added_data_files: int = 0
    added_files_size: int = 0
    added_delete_files: int = 0
    added_position_delete_files: int = 0
    added_dvs: int = 0
    added_equality_delete_files: int = 0
    added_equality_deletes: int = 0

    @property
    def own(self) -> bool:
        """An icefloe job's commit: it sets off no maintenance."""
        return self.job is not None

    @classmethod
    def of(cls, snapshot: Snapshot) -> CommitSeen:
        summary = snapshot.summary.properties if snapshot.summary else {}
        return cls(
            snapshot_id=snapshot.snapshot_id,
            timestamp_ms=snapshot.timestamp_ms,
            sequence_number=snapshot.sequence_number,
            operation=snapshot.operation.value if snapshot.operation else None,
            engine=summary.get(ENGINE_NAME),
            app_id=summary.get(APP_ID),
            job=summary.get(ICEFLOE_JOB),
            batch_id=summary.get(BATCH_ID),
            added_data_files=_count(summary, ADDED_DATA_FILES),
            added_files_size=_count(summary, ADDED_FILES_SIZE),
            added_delete_files=_count(summary, ADDED_DELETE_FILES),
            added_position_delete_files=_count(summary, ADDED_POSITION_DELETE_FILES),
            added_dvs=_count(summary, ADDED_DVS),
            added_equality_delete_files=_count(summary, ADDED_EQUALITY_DELETE_FILES),
            added_equality_deletes=_count(summary, ADDED_EQUALITY_DELETES),
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (an Airflow event's extra), `own` included."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["own"] = self.own
        return out


@dataclass(frozen=True)
class TableChange:
    """What one poll found for one table.

    `commits` are the snapshots added since the cursor, oldest first (a table `created`
    since: all its snapshots). A table `dropped` since has no location and no commits. A
    rename is the old name dropped and the new one created with `renamed_from` set, whose
    commits are only those since the cursor. A change made only of `own` commits has no
    `foreign_commits`: it sets nothing off. `commits_since_own` counts the snapshots of the
    current `main` since icefloe's last commit to it (as far as the metadata keeps them):
    commits pile up manifests between two maintenance runs, across polls.
    """

    identifier: Identifier
    metadata_location: str | None
    commits: tuple[CommitSeen, ...] = ()
    created: bool = False
    dropped: bool = False
    renamed_from: Identifier | None = None
    commits_since_own: int = 0

    @property
    def name(self) -> str:
        return ".".join(self.identifier)

    @property
    def foreign_commits(self) -> tuple[CommitSeen, ...]:
        """The commits of other engines (our ingest's too is `own`: it publishes its own
        event)."""
        return tuple(c for c in self.commits if not c.own)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.name,
            "metadata_location": self.metadata_location,
            "commits": [c.to_json() for c in self.commits],
            "created": self.created,
            "dropped": self.dropped,
            "renamed_from": ".".join(self.renamed_from) if self.renamed_from else None,
            "commits_since_own": self.commits_since_own,
        }


@dataclass(frozen=True)
class _Seen:
    """A table as the cursor knows it: its metadata location, and the highest sequence
    number and snapshot timestamp and the table UUID found there.

    Encoded `"<sequence> <timestamp> <uuid> <location>"`; the first three are `-` while only
    the location is known (a baseline records locations only: reading every table's metadata
    at once would cost a read per table; they are learnt from the old file when it moves).
    v2+ snapshots are new when their sequence number is higher; v1 ones (all numbered 0)
    when their timestamp is later.
    """

    location: str
    sequence_number: int | None = None
    timestamp_ms: int | None = None
    table_uuid: str | None = None

    @classmethod
    def of(cls, metadata: TableMetadata, location: str) -> _Seen:
        stamps = [s.timestamp_ms for s in metadata.snapshots]
        return cls(location, metadata.last_sequence_number, max(stamps, default=0),
                   metadata.table_uuid)  # fmt: skip

    def encode(self) -> str:
        fields = (self.sequence_number, self.timestamp_ms, self.table_uuid)
        return " ".join(_UNKNOWN if f is None else str(f) for f in fields) + " " + self.location

    @classmethod
    def decode(cls, key: str, text: str) -> _Seen:
        parts = text.split(" ", 3) if isinstance(text, str) else []
        try:
            if len(parts) != 4 or not parts[3]:
                raise ValueError("not '<sequence> <timestamp> <uuid> <location>'")
            if parts[0] == _UNKNOWN:
                return cls(parts[3])
            uuid = None if parts[2] == _UNKNOWN else parts[2]
            return cls(parts[3], int(parts[0]), int(parts[1]), uuid)
        except ValueError as exc:
            raise IcecoreError(f"watch cursor entry {key!r}: {text!r} is invalid: {exc}") from None

    @property
    def known(self) -> bool:
        return self.sequence_number is not None

    def is_new(self, snapshot: Snapshot) -> bool:
        if snapshot.sequence_number > 0 or (self.sequence_number or 0) > 0:
            return snapshot.sequence_number > (self.sequence_number or 0)
        return snapshot.timestamp_ms > (self.timestamp_ms or 0)


@dataclass(frozen=True)
class PollStats:
    """What the last poll cost: tables listed, metadata files read, seconds."""

    tables: int
    metadata_reads: int
    changes: int
    seconds: float


class CatalogWatch:
    """The commits made to a catalog's tables (or a namespace's) since a cursor.

    With `cursor=None` the first `poll` records the baseline and returns nothing: what was
    committed before a watch began is not news. A watch built from a saved `cursor` (also
    `{}`: the baseline of an empty catalog) returns exactly the commits made since, none
    twice. A table whose metadata cannot be read (gone, unreadable, malformed) is skipped
    for that poll with a warning and looked at again at the next one; a failure to list the
    catalog raises and leaves the cursor as it was. Save `cursor` once the changes are
    handled: a caller that dies in between gets them again from the saved one (at least
    once, never lost).

    A poll costs `Catalog.table_versions` plus one metadata file per table that moved (two
    the first time a table moves after a baseline: the file the baseline named is read for
    its sequence number and UUID). `last_poll` tells what the last one cost.
    """

    def __init__(
        self,
        catalog: Catalog,
        cursor: Mapping[str, str] | None = None,
        *,
        namespace: str | Iterable[str] | None = None,
    ) -> None:
        self.catalog = catalog
        self.namespace = None if namespace is None else to_identifier(namespace)
        self._seen: dict[str, _Seen] | None = None
        if cursor is not None:
            self._seen = {str(k): _Seen.decode(str(k), v) for k, v in cursor.items()}
        self.last_poll: PollStats | None = None
        self._reads = 0

    @property
    def cursor(self) -> dict[str, str]:
        """`{"db.table": "<sequence> <timestamp> <uuid> <metadata location>"}`, JSON as it is."""
        return {key: seen.encode() for key, seen in (self._seen or {}).items()}

    def poll(self) -> list[TableChange]:
        """The tables that changed since the last poll (or the cursor), by name."""
        started = time.perf_counter()
        self._reads = 0
        versions = self.catalog.table_versions(self.namespace)
        if self._seen is None:
            self._seen = {".".join(i): _Seen(location) for i, location in versions.items()}
            self._stats(versions, [], started)
            return []
        previous = self._seen
        current: dict[str, _Seen] = {}
        changes: list[TableChange] = []
        appeared: list[tuple[Identifier, str]] = []
        for identifier, location in versions.items():
            key = ".".join(identifier)
            seen = previous.get(key)
            if seen is None:
                appeared.append((identifier, location))
            elif seen.location == location:
                current[key] = seen
            else:
                change, now = self._moved(identifier, seen, location)
                current[key] = now
                if change is not None:
                    changes.append(change)
        listed = {".".join(i) for i in versions}
        gone = {key: seen for key, seen in previous.items() if key not in listed}
        for identifier, location in appeared:
            change, now = self._appeared(identifier, location, gone)
            if now is not None:
                current[".".join(identifier)] = now
            if change is not None:
                changes.append(change)
        for key in sorted(gone):
            changes.append(TableChange(to_identifier(key), None, dropped=True))
        self._seen = current
        self._stats(versions, changes, started)
        return sorted(changes, key=lambda c: c.name)

    def _stats(self, versions: Mapping[Any, Any], changes: list[Any], started: float) -> None:
        self.last_poll = PollStats(
            len(versions), self._reads, len(changes), time.perf_counter() - started
        )

    def _read(self, identifier: Identifier, location: str) -> TableMetadata | None:
        self._reads += 1
        try:
            return self.catalog.metadata_at(identifier, location)
        except (IcecoreError, OSError) as exc:
            LOG.warning(
                "%s: metadata %s cannot be read, the table is skipped this poll: %s",
                ".".join(identifier), location, exc,
            )  # fmt: skip
            return None

    def _moved(
        self, identifier: Identifier, seen: _Seen, location: str
    ) -> tuple[TableChange | None, _Seen]:
        """The change of a table whose location moved; the cursor entry to keep (the old
        one when the new metadata cannot be read, so that the next poll tries again)."""
        metadata = self._read(identifier, location)
        if metadata is None:
            return None, seen
        if not seen.known:
            seen = self._complete(identifier, seen, metadata)
        replaced = seen.known and seen.table_uuid != metadata.table_uuid
        if replaced:  # dropped and created again under the same name between two polls
            snapshots = list(metadata.snapshots)
        else:
            snapshots = [s for s in metadata.snapshots if seen.is_new(s)]
        change = _change(identifier, location, metadata, snapshots, created=replaced)
        return change, _Seen.of(metadata, location)

    def _complete(self, identifier: Identifier, seen: _Seen, metadata: TableMetadata) -> _Seen:
        """A baseline entry (location only) made whole from the metadata file it names; if
        that file is gone, from the new metadata's log, or else the newest snapshot only."""
        old = self._read(identifier, seen.location)
        if old is not None:
            return _Seen.of(old, seen.location)
        for entry in metadata.metadata_log:
            if entry.metadata_file == seen.location:  # its snapshots: those not later than it
                before = [s for s in metadata.snapshots if s.timestamp_ms <= entry.timestamp_ms]
                sequence = max((s.sequence_number for s in before), default=0)
                return _Seen(seen.location, sequence, entry.timestamp_ms, metadata.table_uuid)
        newest = max(metadata.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms),
                     default=None)  # fmt: skip
        LOG.warning(
            "%s: its previous metadata %s is gone: only its newest snapshot is taken as new",
            ".".join(identifier), seen.location,
        )  # fmt: skip
        if newest is None:
            return _Seen(seen.location, metadata.last_sequence_number, 0, metadata.table_uuid)
        return _Seen(
            seen.location,
            max(newest.sequence_number - 1, 0),
            newest.timestamp_ms - 1,
            metadata.table_uuid,
        )

    def _appeared(
        self, identifier: Identifier, location: str, gone: dict[str, _Seen]
    ) -> tuple[TableChange | None, _Seen | None]:
        """A table new to the cursor: renamed from a table gone this poll (same metadata
        location, or same table UUID; the gone one is marked so in `gone`, and still reported
        dropped by the caller), or created."""
        for key, old in gone.items():
            if old.location == location:
                gone[key] = _RENAMED
                moved = TableChange(
                    identifier, location, created=True, renamed_from=to_identifier(key)
                )
                return moved, old
        metadata = self._read(identifier, location)
        if metadata is None:
            return None, None  # not in the cursor: the next poll sees it as new again
        for key, old in gone.items():
            if old is _RENAMED:
                continue
            entry = old
            if not entry.known:  # a baseline entry: its file tells its UUID
                before = self._read(to_identifier(key), old.location)
                entry = gone[key] = _Seen.of(before, old.location) if before else old
            if entry.known and entry.table_uuid == metadata.table_uuid:
                gone[key] = _RENAMED
                new = [s for s in metadata.snapshots if entry.is_new(s)]
                renamed = _change(identifier, location, metadata, new, created=True, old=key)
                return renamed, _Seen.of(metadata, location)
        change = _change(identifier, location, metadata, list(metadata.snapshots), created=True)
        return change, _Seen.of(metadata, location)


_RENAMED = _Seen("")  # in `gone`: a table matched by a rename already


def _ordered(snapshots: Iterable[Snapshot]) -> tuple[CommitSeen, ...]:
    ordered = sorted(snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms, s.snapshot_id))
    return tuple(CommitSeen.of(s) for s in ordered)


def _change(
    identifier: Identifier,
    location: str,
    metadata: TableMetadata,
    snapshots: list[Snapshot],
    *,
    created: bool,
    old: str | None = None,
) -> TableChange | None:
    """None for a change without new snapshots (a property or schema update): nothing to
    maintain, and the cursor moves on silently. `old`: the name a renamed table had."""
    if not snapshots and not created:
        return None
    return TableChange(
        identifier,
        location,
        _ordered(snapshots),
        created=created,
        renamed_from=None if old is None else to_identifier(old),
        commits_since_own=_since_own(metadata),
    )


def _since_own(metadata: TableMetadata) -> int:
    """Snapshots of `main` after the last one an icefloe job committed."""
    head = metadata.refs.get(MAIN_BRANCH)
    count = 0
    for snapshot in metadata.ancestors_of(head.snapshot_id) if head else ():
        if snapshot.summary is not None and snapshot.summary.get(ICEFLOE_JOB) is not None:
            break
        count += 1
    return count


@dataclass(frozen=True)
class DueThresholds:
    """When another engine's commits may make maintenance due, from their summaries alone.

    A filter before the real decision (the table's health report, which reads manifests):
    it must never hold back a change that can cross a threshold of the table's policy, so
    each count is of what the commits added, and one of them reaching its minimum is enough.
    `small_file_bytes`: a data file below this size is small (the policy's
    `min_target_size_ratio x target size`); a commit's data files are taken as small when
    its added bytes per added file are below it (the summary has no per-file sizes).
    `min_commits`: commits to `main` since icefloe's last (`TableChange.commits_since_own`;
    each adds manifests, so this stands for the policy's manifest count; None: not a
    reason by itself).
    """

    small_file_bytes: int
    min_small_files: int = 1
    min_delete_files: int = 1
    min_equality_delete_files: int = 1
    min_commits: int | None = None

    def __post_init__(self) -> None:
        counts = (self.min_small_files, self.min_delete_files, self.min_equality_delete_files)
        if self.small_file_bytes < 0 or min(counts) < 1 or (self.min_commits or 1) < 1:
            raise IcecoreError(
                f"due thresholds must be positive counts and a size >= 0, got {self!r}"
            )


def due_reasons(change: TableChange, thresholds: DueThresholds) -> tuple[str, ...]:
    """Why `change` may make the table's maintenance due (empty: it cannot). Only the
    commits of other engines count: icefloe's own never set off maintenance. Nor do the
    files of another engine's `replace` (its own compaction: it rearranges files and
    changes no data), though the commit counts towards `min_commits`."""
    commits = change.foreign_commits
    writes = [c for c in commits if c.operation != Operation.REPLACE.value]
    small = sum(c.added_data_files for c in writes if _small_files(c, thresholds))
    deletes = sum(c.added_delete_files for c in writes)
    equality = sum(c.added_equality_delete_files for c in writes)
    reasons = []
    if small >= thresholds.min_small_files:
        reasons.append(f"{small} small data file(s) added")
    if deletes >= thresholds.min_delete_files:
        reasons.append(f"{deletes} delete file(s) added")
    if equality >= thresholds.min_equality_delete_files:
        reasons.append(f"{equality} equality delete file(s) added")
    piled = change.commits_since_own
    if commits and thresholds.min_commits is not None and piled >= thresholds.min_commits:
        reasons.append(f"{piled} commit(s) since the last maintenance, each adding manifests")
    return tuple(reasons)


def _small_files(commit: CommitSeen, thresholds: DueThresholds) -> bool:
    files = commit.added_data_files + commit.added_delete_files
    if commit.added_data_files == 0:
        return False
    if commit.added_files_size == 0:  # no sizes in the summary: assume the worst
        return True
    return commit.added_files_size / files < thresholds.small_file_bytes
