"""The trash's records: JSON lines any machine with the store's credentials can read.

A run's record (`runs/<run>.jsonl`) is its header line, then one line per file it takes out
of the table:

    {"record": "icefloe.trash.run", "format": 1, "run": "...", "job": "expire_snapshots",
     "table": "db.events", "table-uuid": "...", "location": "s3://...", "removed-ms": ...,
     "snapshots": [<snapshot JSON>, ...], "statistics": [...], "partition-statistics": [...]}
    {"path": "s3://.../data/x.parquet", "trash": "s3://.../.icefloe-trash/...", "size": 1234,
     "kind": "data"}

It is written before the first file moves (what the run intends; see `icecore.trash`), and
never rewritten: what is in the trash is what the trash's listing shows, so a killed run's
record stays true of every file it names (in place, or in the trash). An expiry keeps in it
what the expiry drops from the metadata and a restore needs back: each expired snapshot as
the metadata held it, with its statistics and partition-statistics entries.

The deletion log (`purged/<run>.jsonl`) is a header (`"record": "icefloe.trash.purge"`, the
purging run, when) and one line per file the run deleted for good: trash files past the
window (with the run that trashed them and when) and, with a retention of `0s`, the files
deleted at once. It is written before the deletions and kept when the run records go: what
was purged, when, by which run survives the purge.

One small file per run, never appended to: object stores cannot append, and a file written
whole is never half-written (`FileIO.write_bytes`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icecore.errors import ValidationError

FORMAT = 1
RUN_RECORD = "icefloe.trash.run"
PURGE_RECORD = "icefloe.trash.purge"

# What a trashed file was to the table (expiry's kinds, then orphan removal's).
DATA, POSITION_DELETES, EQUALITY_DELETES = "data", "position-deletes", "equality-deletes"
MANIFEST, MANIFEST_LIST, STATISTICS, ORPHAN = "manifest", "manifest-list", "statistics", "orphan"


@dataclass(frozen=True)
class TrashEntry:
    """One file a run takes out of the table: where it was, where it goes, what it was."""

    path: str
    trash: str
    kind: str
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "trash": self.trash, "kind": self.kind}
        if self.size is not None:
            out["size"] = self.size
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TrashEntry:
        size = obj.get("size")
        return cls(str(obj["path"]), str(obj["trash"]), str(obj["kind"]), _int_or_none(size))


@dataclass(frozen=True)
class RunRecord:
    """What one run of a job took out of the table, and for expiry what it expired."""

    run: str
    job: str
    table: str
    table_uuid: str
    location: str
    removed_ms: int
    entries: tuple[TrashEntry, ...] = ()
    snapshots: tuple[dict[str, Any], ...] = ()  # as the metadata held them (JSON)
    statistics: tuple[dict[str, Any], ...] = ()
    partition_statistics: tuple[dict[str, Any], ...] = ()

    def header(self) -> dict[str, Any]:
        return {
            "record": RUN_RECORD,
            "format": FORMAT,
            "run": self.run,
            "job": self.job,
            "table": self.table,
            "table-uuid": self.table_uuid,
            "location": self.location,
            "removed-ms": self.removed_ms,
            "snapshots": list(self.snapshots),
            "statistics": list(self.statistics),
            "partition-statistics": list(self.partition_statistics),
        }

    def to_bytes(self) -> bytes:
        return _lines([self.header(), *(e.to_json() for e in self.entries)])

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> RunRecord:
        header, lines = _read(data, where, RUN_RECORD)
        try:
            return cls(
                run=str(header["run"]),
                job=str(header["job"]),
                table=str(header.get("table", "")),
                table_uuid=str(header["table-uuid"]),
                location=str(header.get("location", "")),
                removed_ms=int(header["removed-ms"]),
                entries=tuple(TrashEntry.from_json(line) for line in lines),
                snapshots=tuple(header.get("snapshots") or ()),
                statistics=tuple(header.get("statistics") or ()),
                partition_statistics=tuple(header.get("partition-statistics") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"{where}: not a trash record ({exc!r})") from None


@dataclass(frozen=True)
class PurgedFile:
    """One file deleted for good: from the trash (`run`, `removed_ms` say which run put it
    there and when) or at once (`trash` is None)."""

    path: str
    size: int | None
    run: str | None = None
    removed_ms: int | None = None
    trash: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"path": self.path, "size": self.size, "run": self.run}
        out["removed-ms"] = self.removed_ms
        if self.trash is not None:
            out["trash"] = self.trash
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PurgedFile:
        return cls(
            path=str(obj["path"]),
            size=_int_or_none(obj.get("size")),
            run=None if obj.get("run") is None else str(obj["run"]),
            removed_ms=_int_or_none(obj.get("removed-ms")),
            trash=None if obj.get("trash") is None else str(obj["trash"]),
        )


@dataclass(frozen=True)
class PurgeRecord:
    """The deletion log of one run: what it deleted for good, and when."""

    run: str
    job: str
    purged_ms: int
    retention_ms: int
    files: tuple[PurgedFile, ...] = field(default_factory=tuple)

    def to_bytes(self) -> bytes:
        header = {
            "record": PURGE_RECORD,
            "format": FORMAT,
            "run": self.run,
            "job": self.job,
            "purged-ms": self.purged_ms,
            "retention-ms": self.retention_ms,
        }
        return _lines([header, *(f.to_json() for f in self.files)])

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> PurgeRecord:
        header, lines = _read(data, where, PURGE_RECORD)
        try:
            return cls(
                run=str(header["run"]),
                job=str(header["job"]),
                purged_ms=int(header["purged-ms"]),
                retention_ms=int(header["retention-ms"]),
                files=tuple(PurgedFile.from_json(line) for line in lines),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"{where}: not a deletion log ({exc!r})") from None


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _lines(objects: Iterable[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objects).encode()


def _read(data: bytes, where: str, kind: str) -> tuple[dict[str, Any], Sequence[dict[str, Any]]]:
    try:
        objects = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{where}: not JSON lines ({exc})") from None
    if not objects or not isinstance(objects[0], dict) or objects[0].get("record") != kind:
        raise ValidationError(f"{where}: not an {kind} record")
    if int(objects[0].get("format", 0)) > FORMAT:
        raise ValidationError(
            f"{where}: written by a newer icefloe (format {objects[0]['format']}); upgrade"
        )
    return objects[0], objects[1:]
