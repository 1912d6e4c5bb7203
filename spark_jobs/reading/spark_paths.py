"""Mapping Spark's spelling of a file (`_metadata.file_path`, a qualified, percent-encoded
URI such as `file:/wh/a%20b/x.parquet`) back to the path a manifest records for it.

Both sides are reduced to (authority, decoded path): the scheme is dropped because Spark may
name a filesystem differently (`s3a://` for `s3://`) and local paths are qualified with
`file:`. Manifest paths are normally not encoded, but an encoded one is accepted too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit

from spark_jobs.common.errors import JobError


def _key(location: str, decode: bool) -> tuple[str, str]:
    parts = urlsplit(location)
    path = unquote(parts.path) if decode else parts.path
    return parts.netloc, path.replace("//", "/")


def uri_to_path(uris: Iterable[str], paths: Iterable[str]) -> dict[str, str]:
    """{Spark URI: manifest path} for every URI in `uris`; a URI that is none of `paths` is
    a bug (Spark read a file it was not given) and raises."""
    listed = list(paths)
    by_key: dict[tuple[str, str], str] = {}
    for path in listed:
        by_key.setdefault(_key(path, decode=False), path)
    for path in listed:
        by_key.setdefault(_key(path, decode=True), path)
    out = {}
    for uri in uris:
        found = by_key.get(_key(uri, decode=True))
        if found is None:
            raise JobError(f"Spark read {uri}, which is none of the files it was given")
        out[uri] = found
    return out


def ids_for(mapping: Mapping[str, str], ids: Mapping[str, int]) -> list[tuple[str, int]]:
    """(URI, id of its manifest path) pairs, for a broadcast join."""
    return [(uri, ids[path]) for uri, path in mapping.items()]
