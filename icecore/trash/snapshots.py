"""What restoring an expired snapshot needs back, and where each piece is now.

An expiry drops a snapshot from the metadata; its run's record keeps the snapshot as the
metadata held it, with its statistics entries (`icecore.trash.records`). Restoring it needs
every file it reaches: its manifest list, the manifests that lists, the data and delete files
live in those manifests, and its statistics files. Each is either still live (another
snapshot kept it), or in the trash (this expiry's run or any other: a file may have been
trashed again by a later orphan removal, after a restore cut short), or gone: purged past
the window, which the deletion log says. The manifest list and manifests are read wherever
they are, in place or in the trash, so nothing is moved before the plan is known to be
complete: a restore that cannot be whole moves nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from icecore.errors import FileError, ValidationError
from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import read_manifest
from icecore.spec.metadata import TableMetadata
from icecore.spec.snapshots import Snapshot
from icecore.trash.records import PurgeRecord, RunRecord
from icecore.trash.trash import Trash, TrashedFile

_CHECK_THREADS = 16
_EXAMPLES = 3


class SnapshotNotInTrash(ValidationError):
    """No record of the trash keeps the snapshot, or files it needs are gone."""


@dataclass(frozen=True)
class SnapshotRestore:
    """An expired snapshot and the trashed files it needs back (the others are live)."""

    snapshot: Snapshot
    statistics: tuple[dict[str, Any], ...]
    partition_statistics: tuple[dict[str, Any], ...]
    run: str  # the expiry that removed it
    from_trash: tuple[TrashedFile, ...]
    live: int  # files it needs that are in place


def expired_snapshot(records: Mapping[str, RunRecord], snapshot_id: int) -> RunRecord | None:
    """The latest record that expired `snapshot_id`."""
    found = [
        r for r in records.values() if any(s.get("snapshot-id") == snapshot_id for s in r.snapshots)
    ]
    return max(found, key=lambda r: (r.removed_ms, r.run)) if found else None


def plan_snapshot_restore(
    trash: Trash, metadata: TableMetadata, snapshot_id: int
) -> SnapshotRestore:
    """Every file `snapshot_id` needs, found live or in the trash; `SnapshotNotInTrash`
    when the trash does not keep it or a file it needs is gone (nothing is moved)."""
    records, _, problems = trash.records()
    record = expired_snapshot(records, snapshot_id)
    if record is None:
        unread = f" ({len(problems)} trash records could not be read)" if problems else ""
        raise SnapshotNotInTrash(
            f"snapshot {snapshot_id} of {trash.table} is not in its trash: not expired by "
            f"icefloe, or purged after icefloe.trash.retention{unread}"
        )
    obj = next(s for s in record.snapshots if s.get("snapshot-id") == snapshot_id)
    snapshot = Snapshot.from_json(obj)
    by_path: dict[str, TrashedFile] = {}
    for item in trash.contents(records):  # sorted by run: the latest copy wins
        by_path[item.path] = item
    _check_schema(metadata, snapshot, trash.table)

    statistics = tuple(s for s in record.statistics if s.get("snapshot-id") == snapshot_id)
    partition_statistics = tuple(
        s for s in record.partition_statistics if s.get("snapshot-id") == snapshot_id
    )
    needed = _reached(trash.io, metadata, snapshot, by_path, trash.table)
    needed += [str(s["statistics-path"]) for s in (*statistics, *partition_statistics)]
    needed = list(dict.fromkeys(needed))
    trashed = [by_path[p] for p in needed if p in by_path]
    elsewhere = [p for p in needed if p not in by_path]
    gone = [p for p, there in zip(elsewhere, _exist(trash.io, elsewhere), strict=True) if not there]
    if gone:
        raise SnapshotNotInTrash(_gone(trash, snapshot_id, gone))
    return SnapshotRestore(
        snapshot=snapshot,
        statistics=statistics,
        partition_statistics=partition_statistics,
        run=record.run,
        from_trash=tuple(trashed),
        live=len(elsewhere),
    )


def _check_schema(metadata: TableMetadata, snapshot: Snapshot, table: str) -> None:
    schemas = {s.schema_id for s in metadata.schemas}
    if snapshot.schema_id is not None and snapshot.schema_id not in schemas:
        raise SnapshotNotInTrash(
            f"snapshot {snapshot.snapshot_id} of {table} was written with schema "
            f"{snapshot.schema_id}, which the table no longer has"
        )


def _reached(
    io: FileIO,
    metadata: TableMetadata,
    snapshot: Snapshot,
    trashed: Mapping[str, TrashedFile],
    table: str,
) -> list[str]:
    """The snapshot's manifest list, manifests, and the files live in them, each read where
    it is now (in place, or its copy in the trash)."""

    def where(path: str) -> str:
        return trashed[path].trash if path in trashed else path

    reading = snapshot
    if snapshot.manifest_list is not None:
        reading = replace(snapshot, manifest_list=where(snapshot.manifest_list))
    elif snapshot.manifests:
        reading = replace(snapshot, manifests=tuple(where(m) for m in snapshot.manifests))
    specs = metadata.specs_by_id()
    try:
        manifests = snapshot_manifests(io, reading)
        needed = [snapshot.manifest_list] if snapshot.manifest_list else []
        for manifest in manifests:
            original = manifest.manifest_path
            if snapshot.manifests is not None:  # v1 inline: read from where it is now
                original = next(m for m in snapshot.manifests if where(m) == original)
            if manifest.partition_spec_id not in specs:
                raise SnapshotNotInTrash(
                    f"snapshot {snapshot.snapshot_id} of {table} has files of partition spec "
                    f"{manifest.partition_spec_id}, which the table no longer has"
                )
            needed.append(original)
            entries = read_manifest(
                io,
                replace(manifest, manifest_path=where(original)),
                spec=specs[manifest.partition_spec_id],
                include_metrics=False,
                live_only=True,
            )
            needed.extend(e.data_file.file_path for e in entries)
    except FileError as exc:
        raise SnapshotNotInTrash(
            f"cannot restore snapshot {snapshot.snapshot_id} of {table}: {exc}"
        ) from None
    return needed


def _exist(io: FileIO, paths: Sequence[str]) -> list[bool]:
    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=min(_CHECK_THREADS, len(paths))) as pool:
        return list(pool.map(io.exists, paths))


def _gone(trash: Trash, snapshot_id: int, gone: Sequence[str]) -> str:
    """Why the snapshot cannot come back, with what the deletion log says of its files."""
    purged = _purges(trash, gone)
    examples = "; ".join(
        f"{p} (purged by {purged[p].run})" if p in purged else p for p in gone[:_EXAMPLES]
    )
    more = f" and {len(gone) - _EXAMPLES} more" if len(gone) > _EXAMPLES else ""
    return (
        f"cannot restore snapshot {snapshot_id} of {trash.table}: {len(gone)} file(s) it needs "
        f"are gone: {examples}{more}; nothing was moved"
    )


def _purges(trash: Trash, paths: Iterable[str]) -> dict[str, PurgeRecord]:
    wanted = set(paths)
    found: dict[str, PurgeRecord] = {}
    for listed in trash.io.list_prefix(trash.layout.purged):
        try:
            log = PurgeRecord.from_bytes(trash.io.read_bytes(listed.location), listed.location)
        except (FileError, ValidationError):
            continue
        found.update({f.path: log for f in log.files if f.path in wanted})
    return found
