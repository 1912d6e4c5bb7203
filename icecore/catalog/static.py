"""Read-only tables opened straight from storage, without a catalog.

Useful to inspect a table by its metadata file, and to read tables written by Spark's Hadoop
catalog, which keeps no database: `<table>/metadata/vN.metadata.json` are the versions and
`metadata/version-hint.text` holds the latest N. The hint is only a hint: Hadoop tables write
`vN+1` before updating it, so, like Java's `HadoopTableOperations`, the newest version is
found by stepping past the hint while the next file exists.
"""

from __future__ import annotations

import logging
import os
import re

from icecore.errors import FileError, MetadataError
from icecore.io import FileIO
from icecore.spec.metadata import read_table_metadata
from icecore.table import Table

LOG = logging.getLogger(__name__)

VERSION_HINT = "version-hint.text"
_HADOOP_VERSION = re.compile(r"^v(\d+)(?:\.gz\.metadata\.json|\.metadata\.json(?:\.gz)?)$")


def load_static_table(path_or_uri: str | os.PathLike[str], io: FileIO | None = None) -> Table:
    """A read-only table (its `catalog` is None) from a metadata file, or from a
    Hadoop-layout table directory (or its `metadata` directory)."""
    io = io or FileIO()
    location = os.fspath(path_or_uri).rstrip("/")
    if not (location.endswith(".metadata.json") or location.endswith(".metadata.json.gz")):
        location = _hadoop_current_metadata(io, location)
    metadata = read_table_metadata(io, location)
    return Table((location,), metadata, io, catalog=None)


def _hadoop_current_metadata(io: FileIO, table_dir: str) -> str:
    metadata_dir = f"{table_dir}/metadata"
    if not io.exists(f"{metadata_dir}/{VERSION_HINT}") and io.exists(f"{table_dir}/{VERSION_HINT}"):
        metadata_dir = table_dir  # the caller named the metadata directory itself
    version = _hinted_version(io, metadata_dir)
    if version is None:
        version = max(_listed_versions(io, metadata_dir), default=None)
        if version is None:
            raise MetadataError(
                table_dir,
                f"not a table: no metadata file given, and no {VERSION_HINT} or "
                "vN.metadata.json under its metadata directory",
            )
    current = _version_file(io, metadata_dir, version)
    if current is None:
        raise MetadataError(
            metadata_dir, f"{VERSION_HINT} names version {version}, whose metadata file is missing"
        )
    while (following := _version_file(io, metadata_dir, version + 1)) is not None:
        version, current = version + 1, following
    return current


def _hinted_version(io: FileIO, metadata_dir: str) -> int | None:
    hint = f"{metadata_dir}/{VERSION_HINT}"
    try:
        text = io.read_bytes(hint).decode("utf-8", "replace").strip()
    except FileError:
        return None
    if text.isdigit():
        return int(text)
    LOG.warning("%s holds %r, not a version number; listing the versions instead", hint, text)
    return None


def _listed_versions(io: FileIO, metadata_dir: str) -> list[int]:
    versions = []
    for listed in io.list_prefix(metadata_dir):
        match = _HADOOP_VERSION.match(listed.location.rsplit("/", 1)[-1])
        if match:
            versions.append(int(match.group(1)))
    return versions


def _version_file(io: FileIO, metadata_dir: str, version: int) -> str | None:
    """The metadata file of `version` in any of the names Java gives it, if it exists."""
    for suffix in (".metadata.json", ".gz.metadata.json", ".metadata.json.gz"):
        location = f"{metadata_dir}/v{version}{suffix}"
        if io.exists(location):
            return location
    return None
