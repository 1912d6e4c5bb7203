"""Deleting many files at once, the way each store does it fastest.

Snapshot expiry and orphan-file removal delete thousands of files after a commit. On S3 that
is a `DeleteObjects` request per 1,000 keys; on the other stores, where pyarrow offers one
delete per call, a thread pool keeps many requests in flight.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from icecore.errors import FileError
from icecore.io import s3client
from icecore.io.locations import Store

if TYPE_CHECKING:
    from icecore.io.fileio import FileIO

DELETE_THREADS = 16


def delete_many(io: FileIO, locations: Iterable[str], threads: int) -> dict[str, str]:
    """See `FileIO.delete_many`. A location S3 knows under two spellings (`s3://b/k`,
    `s3a://b/k`) is one key, deleted once and reported under each spelling."""
    failed: dict[str, str] = {}
    by_bucket: dict[str, dict[str, list[str]]] = {}
    others: list[str] = []
    for location in dict.fromkeys(locations):
        try:
            parsed = io._resolve(location).location
        except FileError as exc:
            failed[location] = exc.problem
            continue
        if parsed.store is Store.S3 and parsed.key and s3client.available():
            keys = by_bucket.setdefault(parsed.bucket, {})
            keys.setdefault(parsed.key, []).append(location)
        else:
            others.append(location)
    for bucket, keys in by_bucket.items():
        for key, why in io._s3_client().delete_keys(bucket, list(keys)).items():
            failed.update(dict.fromkeys(keys[key], io._redact(why)))
    if others:
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(others)))) as pool:
            outcomes = pool.map(lambda location: _delete_one(io, location), others)
            for location, why in zip(others, outcomes, strict=True):
                if why is not None:
                    failed[location] = why
    return failed


def _delete_one(io: FileIO, location: str) -> str | None:
    try:
        io.delete(location, missing_ok=True)
    except FileError as exc:
        return exc.problem
    except Exception as exc:  # an SDK error must not stop the other deletions
        return io._redact(f"{type(exc).__name__}: {exc}")
    return None
