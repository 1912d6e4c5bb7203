"""`FileIO`: reading, writing, listing, moving and deleting files at Iceberg locations.

Every table file icecore and the jobs touch goes through here, so this is where object-store
semantics are made right once: listings bounded by the directory, bulk deletes, moves that
never replace a file and never lose one, retries of throttled and dropped requests, writes
that become visible only when complete, and errors that name the file but never a credential.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import pyarrow as pa
from pyarrow import fs as pafs

from icecore.errors import FileError
from icecore.io import filesystems, local, s3client
from icecore.io.locations import Location, Store, parse, split_location
from icecore.io.output import OutputFile
from icecore.io.properties import Redactor
from icecore.io.retry import RetryPolicy

DELETE_THREADS = 16
_COMPARE_BLOCK = 8 * 1024 * 1024
_COPY_BLOCK = 8 * 1024 * 1024

T = TypeVar("T")


class ListedFile(NamedTuple):
    """One file found by `FileIO.list_prefix`.

    `mtime_ms` is the file's (object's) last-modified time, or None when the filesystem does
    not report one; callers that delete by age must then leave the file alone.
    """

    location: str
    size: int
    mtime_ms: int | None


class PendingUpload(NamedTuple):
    """A multipart upload begun and neither completed nor aborted (S3).

    A writer killed mid-upload (SIGKILL, a lost executor or node) cannot abort its own upload:
    the parts stay stored, and billed, invisible to every listing and reader, until someone
    aborts it (or a bucket lifecycle rule does). `initiated_ms` is when it began, None when
    the store does not say; whoever aborts by age must then leave it alone.
    """

    location: str
    upload_id: str
    initiated_ms: int | None


@dataclass(frozen=True)
class _Resolved:
    location: Location
    filesystem: pafs.FileSystem

    @property
    def path(self) -> str:
        return self.location.path

    def to_location(self, fs_path: str) -> str:
        return self.location.to_location(fs_path)


class FileIO:
    """Reads, writes, lists and deletes files at Iceberg locations.

    `properties` are catalog/table properties with Iceberg's names (see `icecore.io.properties`):
    `s3.*`, `gcs.*`, `adls.*`, `hdfs.user`. Anything absent falls back to the SDK's own defaults
    (environment variables, instance credentials). `retry` says how often an operation that
    failed for a passing reason (throttling, 5xx, a dropped connection) is tried again.
    Filesystems are cached per store and bucket, so a job touching thousands of files builds
    one client.
    """

    def __init__(
        self, properties: Mapping[str, str] | None = None, *, retry: RetryPolicy | None = None
    ) -> None:
        self.properties: dict[str, str] = dict(properties or {})
        self.retry = retry or RetryPolicy()
        self._redactor = Redactor(self.properties)
        self._filesystems: dict[tuple[str, str], pafs.FileSystem] = {}
        self._s3: s3client.S3Client | None = None
        self._no_rename: set[tuple[str, str]] = set()  # Azure accounts without renames
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileIO({self._redactor.properties(self.properties)!r})"

    def resolve(self, location: str) -> tuple[pafs.FileSystem, str]:
        """The filesystem holding `location` and the path to hand to it."""
        resolved = self._resolve(location)
        return resolved.filesystem, resolved.path

    # Reading

    def open_input(self, location: str) -> pa.NativeFile:
        """A seekable binary file; Parquet and Avro readers need random access. Opening is
        retried; reads through the file rely on the SDK's own retries."""
        resolved = self._resolve(location)
        return self._call(
            resolved,
            "cannot open for reading",
            lambda: resolved.filesystem.open_input_file(resolved.path),
        )

    def read_bytes(self, location: str) -> bytes:
        """The whole file, read again from the start if a read fails for a passing reason."""
        resolved = self._resolve(location)

        def read() -> bytes:
            with resolved.filesystem.open_input_file(resolved.path) as f:
                return f.read()

        return self._call(resolved, "cannot read", read)

    def exists(self, location: str) -> bool:
        return self._info(self._resolve(location)).type != pafs.FileType.NotFound

    def size(self, location: str) -> int:
        info = self._info(self._resolve(location))
        if info.type == pafs.FileType.NotFound:
            raise FileError(location, "file not found")
        if info.type != pafs.FileType.File:
            raise FileError(location, "is not a file")
        return int(info.size)

    # Writing

    def open_output(self, location: str, overwrite: bool = False) -> OutputFile:
        """A binary file to write, visible at `location` only once closed (see `OutputFile`);
        refuses to replace an existing file unless `overwrite`.

        Metadata, manifest lists and manifests are immutable once a commit may point at them,
        so clobbering one corrupts the table; the default is the safe one. On local disks the
        check is atomic (exclusive create). Object stores offer no such primitive through
        pyarrow, so there the check is best effort: commit atomicity belongs to the catalog.
        """
        return self._output(self._resolve(location), overwrite)

    def write_bytes(self, location: str, data: bytes, overwrite: bool = False) -> None:
        """Write `data` as the whole file, retrying a write that failed for a passing reason.

        A failed attempt may still have committed (the store did it, the answer was lost), so
        a retry that finds the file does not refuse: it accepts the file if it holds exactly
        `data`, which is then the write it was asked for, done once."""
        resolved = self._resolve(location)
        attempts = 0

        def write() -> None:
            nonlocal attempts
            attempts += 1
            if attempts > 1 and not overwrite and self._holds(resolved, data):
                return
            with self._output(resolved, overwrite) as f:
                f.write(data)

        self.retry.call(write, self._redact, f"write {location}")

    # Listing

    def list_prefix(self, location: str) -> Iterator[ListedFile]:
        """Every file under the directory `location`, at any depth, as a location spelled
        with the caller's scheme and authority.

        The prefix is a directory, not a raw key prefix: listing `s3://b/db/t` must never
        return `s3://b/db/t_backup/...`, since orphan-file removal deletes what it lists
        (pyarrow lists the key prefix `db/t/`, slash included, and pages through results).
        A directory that does not exist lists nothing. A failed listing is retried whole, so
        a file is never listed twice.
        """
        resolved = self._resolve(location)
        path = resolved.path.rstrip("/") or resolved.path
        selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
        infos = self._call(
            resolved, "cannot list", lambda: resolved.filesystem.get_file_info(selector)
        )
        for info in infos:
            if info.type == pafs.FileType.File:
                mtime_ns = info.mtime_ns
                yield ListedFile(
                    resolved.to_location(info.path),
                    int(info.size),
                    None if mtime_ns is None else mtime_ns // 1_000_000,
                )

    # Deleting

    def delete(self, location: str, missing_ok: bool = False) -> None:
        """Delete one file. A missing file is an error unless `missing_ok`: expiring snapshots
        may race with another cleanup, but a caller deleting a file it just listed should know
        when something else got there first. A retry that finds the file gone counts the
        earlier attempt as having deleted it."""
        resolved = self._resolve(location)
        attempts = 0

        def delete() -> None:
            nonlocal attempts
            attempts += 1
            try:
                resolved.filesystem.delete_file(resolved.path)
            except FileNotFoundError:
                if not missing_ok and attempts == 1:
                    raise FileError(location, "cannot delete: file not found") from None

        self._call(resolved, "cannot delete", delete)

    def delete_many(
        self, locations: Iterable[str], threads: int = DELETE_THREADS
    ) -> dict[str, str]:
        """Delete every location; returns location -> why, for those still there afterwards
        (empty when all are gone). A missing file counts as deleted. Nothing is raised for a
        single file: cleanup after a commit must go on past one that cannot be deleted.

        Snapshot expiry and orphan-file removal delete thousands of files after a commit. On
        S3 keys go in `DeleteObjects` batches of 1,000 (one request instead of 1,000, and no
        empty "directory" markers left behind), and a key spelled two ways (`s3://b/k`,
        `s3a://b/k`) is deleted once and reported under each spelling; elsewhere, where
        pyarrow offers one delete per call, `threads` files at a time.
        """
        failed: dict[str, str] = {}
        by_bucket: dict[str, dict[str, list[str]]] = {}
        others: list[str] = []
        for location in dict.fromkeys(locations):
            try:
                parsed = self._resolve(location).location
            except FileError as exc:
                failed[location] = exc.problem
                continue
            if parsed.store is Store.S3 and parsed.key and s3client.available():
                keys = by_bucket.setdefault(parsed.bucket, {})
                keys.setdefault(parsed.key, []).append(location)
            else:
                others.append(location)
        for bucket, keys in by_bucket.items():
            for key, why in self._s3_client().delete_keys(bucket, list(keys)).items():
                failed.update(dict.fromkeys(keys[key], self._redact(why)))
        if others:
            with ThreadPoolExecutor(max_workers=max(1, min(threads, len(others)))) as pool:
                outcomes = pool.map(self._delete_quietly, others)
                for location, why in zip(others, outcomes, strict=True):
                    if why is not None:
                        failed[location] = why
        return failed

    def _delete_quietly(self, location: str) -> str | None:
        """Why `location` could not be deleted, or None: one file's failure, whatever the
        SDK raised, must not stop the other deletions."""
        try:
            self.delete(location, missing_ok=True)
        except FileError as exc:
            return exc.problem
        except Exception as exc:
            return self._redact(f"{type(exc).__name__}: {exc}")
        return None

    # Moving

    def move(self, source: str, target: str, *, fresh_target: bool = False) -> None:
        """Move one file to `target`, byte for byte; never replaces a file at `target`.

        The cheapest safe way the store has (the trash's cost, `icecore.trash`):
        - local disks: a hard link, then the old name unlinked (`icecore.io.local`);
        - HDFS and ADLS Gen2 with a hierarchical namespace: the store's own rename;
        - S3, GCS, Azure without a hierarchical namespace: a server-side copy (no byte goes
          through this process; S3 `CopyObject`, multipart above 5 GB; GCS rewrite; Azure
          copy-from-URL), then the source deleted;
        - between stores: read and written, then the source deleted.
        A copy is complete before the source goes, so a kill leaves the file at the source,
        at the target, or at both, never at neither. A retry that finds the source gone and
        the target there counts the move done. `fresh_target` says the caller made `target` a
        name nobody else uses (a new directory of its own), which saves the object stores'
        existence check; elsewhere the no-replace check is atomic anyway.
        """
        failed = self.move_many([(source, target)], fresh_targets=fresh_target)
        if failed:
            raise FileError(source, failed[source])

    def move_many(
        self,
        moves: Iterable[tuple[str, str]],
        threads: int = DELETE_THREADS,
        *,
        fresh_targets: bool = False,
    ) -> dict[str, str]:
        """Move every (source, target) as `move` does, `threads` at a time; returns source ->
        why for the moves that did not happen. Nothing is raised for one file: a cleanup must
        go on past one it cannot move. On S3 the sources of the copies that landed go in
        `DeleteObjects` batches, as `delete_many` deletes."""
        pairs = list(dict.fromkeys(moves))
        if not pairs:
            return {}
        failed: dict[str, str] = {}
        copied: list[tuple[str, str]] = []  # S3: copied, the source to delete in bulk

        def one(pair: tuple[str, str]) -> tuple[str, str | None, bool]:
            source, target = pair
            try:
                bulk = self._move_one(source, target, fresh_targets)
            except FileError as exc:
                if self._moved_before(source, target):
                    return source, None, False
                return source, exc.problem, False
            except Exception as exc:
                return source, self._redact(f"{type(exc).__name__}: {exc}"), False
            return source, None, bulk

        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(pairs)))) as pool:
            for (source, why, bulk), pair in zip(pool.map(one, pairs), pairs, strict=True):
                if why is not None:
                    failed[source] = why
                elif bulk:
                    copied.append(pair)
        if copied:
            not_deleted = self.delete_many([source for source, _ in copied], threads)
            failed.update(
                {
                    s: f"copied to {t}, but the source is left: {not_deleted[s]}"
                    for s, t in copied
                    if s in not_deleted
                }
            )
        return failed

    def same_content(self, a: str, b: str) -> bool:
        """Whether both files exist and hold the same bytes (read in blocks, both sizes
        checked first): how a move or restore cut short tells a finished copy from another
        file."""
        first, second = self._info(self._resolve(a)), self._info(self._resolve(b))
        if first.type != pafs.FileType.File or second.type != pafs.FileType.File:
            return False
        if first.size != second.size:
            return False
        with self.open_input(a) as left, self.open_input(b) as right:
            while True:
                block = left.read(_COMPARE_BLOCK)
                if block != right.read(_COMPARE_BLOCK):
                    return False
                if not block:
                    return True

    def _moved_before(self, source: str, target: str) -> bool:
        """A failed move whose source is gone and whose target is there: an earlier attempt
        (or another mover) did it."""
        try:
            return not self.exists(source) and self.exists(target)
        except FileError:
            return False

    def _move_one(self, source: str, target: str, fresh_target: bool) -> bool:
        """Move one file; True when it was copied on S3 and its source is still to delete."""
        src, dst = self._resolve(source), self._resolve(target)
        store = src.location.store
        if store is Store.LOCAL and dst.location.store is Store.LOCAL:
            self._move_local(src, dst)
            return False
        if not fresh_target and self._info(dst).type != pafs.FileType.NotFound:
            raise FileError(target, "already exists; refusing to replace it")
        # One service copies server-side: any two buckets of S3 or GCS, one Azure account or
        # HDFS name node.
        same_store = store is dst.location.store and (
            store in (Store.S3, Store.GCS)
            or src.location.filesystem_key == dst.location.filesystem_key
        )
        if same_store and store is Store.S3 and s3client.available():
            self._s3_copy(src, dst)
            return True
        if same_store and store is not Store.S3 and self._store_move(src, dst):
            return False
        if same_store:
            self._call(src, "cannot copy", lambda: src.filesystem.copy_file(src.path, dst.path))
        else:
            self._copy_streamed(src, dst)
        self.delete(source, missing_ok=True)
        return False

    def _store_move(self, src: _Resolved, dst: _Resolved) -> bool:
        """The store's own move: HDFS and ADLS renames, GCS's rewrite-and-delete. False where
        the store has none (Azure without a hierarchical namespace), remembered per account."""
        key = src.location.filesystem_key
        if key in self._no_rename:
            return False
        if src.location.store is Store.HDFS:
            parent = dst.path.rsplit("/", 1)[0]
            self._call(dst, "cannot create directory", lambda: dst.filesystem.create_dir(parent))
        try:
            self._call(src, "cannot move", lambda: src.filesystem.move(src.path, dst.path))
        except NotImplementedError:  # pyarrow: Azure accounts without a hierarchical namespace
            self._no_rename.add(key)
            return False
        return True

    def _move_local(self, src: _Resolved, dst: _Resolved) -> None:
        try:
            local.move(src.path, dst.path, lambda: self._copy_streamed(src, dst))
        except FileExistsError:
            raise FileError(
                dst.location.location, "already exists; refusing to replace it"
            ) from None
        except FileNotFoundError:
            raise FileError(src.location.location, "file not found") from None
        except OSError as exc:
            raise self._error(src.location.location, "cannot move", exc) from None

    def _copy_streamed(self, src: _Resolved, dst: _Resolved) -> None:
        """Copy through this process (between stores or devices): the target appears only
        complete (an `OutputFile` on object stores; on a local disk a hidden temporary name
        linked into place, which also refuses an existing target)."""
        target = dst.location.location
        if dst.location.store is Store.LOCAL:
            directory, name = os.path.split(dst.path)
            temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.moving")
            self._copy_bytes(src, temporary)
            try:
                os.link(temporary, dst.path)
            except FileExistsError:
                raise FileError(target, "already exists; refusing to replace it") from None
            finally:
                os.unlink(temporary)
            return
        with self.open_input(src.location.location) as reader, self._output(dst, False) as out:
            while block := reader.read(_COPY_BLOCK):
                out.write(block)

    def _copy_bytes(self, src: _Resolved, path: str) -> None:
        with self.open_input(src.location.location) as reader, open(path, "xb") as out:
            while block := reader.read(_COPY_BLOCK):
                out.write(block)

    def _s3_copy(self, src: _Resolved, dst: _Resolved) -> None:
        a, b = src.location, dst.location
        try:
            self._s3_client().copy(a.bucket, a.key, b.bucket, b.key)
        except Exception as exc:
            if "NoSuchKey" in str(exc) or "Not Found" in str(exc) or "404" in str(exc):
                raise FileError(a.location, "file not found") from None
            raise self._error(a.location, f"cannot copy to {b.location}", exc) from None

    def remove_empty_directories(self, location: str) -> None:
        """Remove the directory `location` and those below it, where they hold no file: on
        local disks and HDFS, which keep directories a move or a delete leaves empty (object
        stores have none). A directory that holds a file stays, whatever races it."""
        resolved = self._resolve(location)
        store = resolved.location.store
        if store is Store.LOCAL:
            local.remove_empty_directories(resolved.path)
        elif store is Store.HDFS:
            selector = pafs.FileSelector(resolved.path, recursive=True, allow_not_found=True)
            infos = self._call(
                resolved, "cannot list", lambda: resolved.filesystem.get_file_info(selector)
            )
            if infos and not any(i.type == pafs.FileType.File for i in infos):
                self._call(
                    resolved, "cannot delete", lambda: resolved.filesystem.delete_dir(resolved.path)
                )

    # Unfinished uploads

    def pending_uploads(self, location: str) -> list[PendingUpload]:
        """The multipart uploads in progress under the directory `location` (as for
        `list_prefix`, never a sibling's `location_2/...`). Only S3 has them: elsewhere an
        unfinished write sends nothing or commits an object (`OutputFile`), which listings
        see. Empty without boto3, which finds them."""
        resolved = self._resolve(location)
        parsed = resolved.location
        if parsed.store is not Store.S3 or not s3client.available():
            return []
        prefix = f"{parsed.key.rstrip('/')}/" if parsed.key.strip("/") else ""
        try:
            uploads = self._s3_client().uploads_under(parsed.bucket, prefix)
        except Exception as exc:  # botocore's ClientError and transport errors
            raise self._error(location, "cannot list multipart uploads", exc) from None
        return [
            PendingUpload(resolved.to_location(f"{parsed.bucket}/{key}"), upload_id, initiated)
            for key, upload_id, initiated in uploads
        ]

    def abort_upload(self, upload: PendingUpload) -> None:
        """Abort `upload`: its parts are deleted and it can no longer complete. An object
        already at its location (another, finished write) is not touched."""
        parsed = self._resolve(upload.location).location
        try:
            self._s3_client().abort_upload(parsed.bucket, parsed.key, upload.upload_id)
        except Exception as exc:
            raise self._error(upload.location, "cannot abort multipart upload", exc) from None

    # Internals

    def _redact(self, error: BaseException | str) -> str:
        return self._redactor.redact(str(error))

    def _error(self, location: str, action: str, exc: BaseException) -> FileError:
        """A FileError for `exc`, never carrying a credential: when the SDK's message held
        one, the original is not chained either (tracebacks print chained exceptions)."""
        if isinstance(exc, FileError):
            return exc
        text = str(exc)
        clean = self._redactor.redact(text)
        error = FileError(location, f"{action}: {clean}")
        error.__cause__ = exc if clean == text else None
        error.__suppress_context__ = True
        return error

    def _call(self, resolved: _Resolved, action: str, operation: Callable[[], T]) -> T:
        location = resolved.location.location
        try:
            return self.retry.call(operation, self._redact, f"{action} {location}")
        except FileNotFoundError:
            raise FileError(location, "file not found") from None
        except OSError as exc:
            raise self._error(location, action, exc) from None

    def _info(self, resolved: _Resolved) -> pafs.FileInfo:
        return self._call(
            resolved, "cannot stat", lambda: resolved.filesystem.get_file_info(resolved.path)
        )

    def _holds(self, resolved: _Resolved, data: bytes) -> bool:
        """Whether the file exists with exactly `data` in it."""
        info = self._info(resolved)
        if info.type != pafs.FileType.File or info.size != len(data):
            return False
        return self.read_bytes(resolved.location.location) == data

    def _output(self, resolved: _Resolved, overwrite: bool) -> OutputFile:
        location, filesystem, path = resolved.location.location, resolved.filesystem, resolved.path

        def fail(action: str, exc: BaseException) -> Exception:
            return self._error(location, action, exc)

        if resolved.location.store is Store.LOCAL:
            try:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                if overwrite:
                    stream = filesystem.open_output_stream(path)
                else:
                    stream = pa.PythonFile(open(path, "xb"), mode="w")  # noqa: SIM115
            except FileExistsError:
                raise FileError(location, "already exists; refusing to overwrite it") from None
            except OSError as exc:
                raise self._error(location, "cannot open for writing", exc) from None
            return OutputFile(lambda: stream, self._discarder(resolved), fail, open_now=True)
        if not overwrite and self._info(resolved).type != pafs.FileType.NotFound:
            raise FileError(location, "already exists; refusing to overwrite it")
        return OutputFile(
            lambda: filesystem.open_output_stream(path), self._discarder(resolved), fail
        )

    def _discarder(self, resolved: _Resolved) -> Callable[[pa.NativeFile, bool], None]:
        """How to undo an output stream that sent parts (see `OutputFile`): on S3, abort the
        multipart upload, after which pyarrow's close cannot complete it; elsewhere close and
        delete what that committed. After a failed close only the upload needs aborting."""
        parsed = resolved.location

        def discard(stream: pa.NativeFile, close_failed: bool) -> None:
            if parsed.store is Store.S3 and s3client.available():
                self._s3_client().abort_uploads(parsed.bucket, parsed.key)
            if close_failed and parsed.store is not Store.LOCAL:
                return
            try:
                stream.close()
            except Exception:
                if parsed.store is not Store.LOCAL:
                    return  # nothing was committed
            with contextlib.suppress(FileNotFoundError):
                resolved.filesystem.delete_file(resolved.path)

        return discard

    def _s3_client(self) -> s3client.S3Client:
        with self._lock:
            if self._s3 is None:
                self._s3 = s3client.S3Client(self.properties, self.retry)
            return self._s3

    def _resolve(self, location: str) -> _Resolved:
        parsed = parse(location)
        key = parsed.filesystem_key
        with self._lock:
            filesystem = self._filesystems.get(key)
            if filesystem is None:
                try:
                    filesystem = filesystems.build(parsed, self.properties, self.retry.sdk_attempts)
                except (OSError, ValueError) as exc:
                    # libhdfs lists every JVM path it tried; the first line says what failed.
                    problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    split = split_location(location)
                    where = f"{split.scheme}://{split.authority}"
                    raise self._error(where, "cannot connect", ValueError(problem)) from None
                self._filesystems[key] = filesystem
        return _Resolved(parsed, filesystem)
