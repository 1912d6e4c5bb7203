"""The fleet's health cache: a table's health, kept until its metadata location changes.

A committed Iceberg table never changes under a metadata file (every commit writes a new
one), so a report computed for one metadata location stays true for it. The cache is a
SQLite file (`$ICEFLOE_CACHE_DIR/fleet-health.sqlite`, else `~/.cache/icefloe/`) of one row
per table: its metadata location, the small-file parameters the report was measured with
(the only policy values the report depends on), the table's policy properties, and the report
itself (JSON, zlib). A run reads the whole catalog's rows in one query and writes the changed
ones in one transaction, so an unchanged catalog of 1,000 tables costs one catalog listing
and one local query. Losing the file costs one cold run, nothing more.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_DIR_ENV = "ICEFLOE_CACHE_DIR"
CACHE_FILE = "fleet-health.sqlite"
# Bump when the stored report's shape changes: older rows are then ignored.
CACHE_VERSION = 3  # 3: the report's manifests per spec
_SCHEMA = """
CREATE TABLE IF NOT EXISTS health_cache (
    catalog_key TEXT NOT NULL,
    table_name TEXT NOT NULL,
    version INTEGER NOT NULL,
    metadata_location TEXT NOT NULL,
    params TEXT NOT NULL,
    properties TEXT NOT NULL,
    report BLOB NOT NULL,
    PRIMARY KEY (catalog_key, table_name)
)
"""


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "icefloe"


def catalog_key(name: str, properties: Mapping[str, str]) -> str:
    """Tells catalogs of the same name apart (by URI or warehouse) without storing a URI,
    which may hold a password."""
    where = properties.get("uri") or properties.get("warehouse") or ""
    return f"{name}:{hashlib.sha256(where.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class CachedHealth:
    """A cached report, valid for `metadata_location` measured with `params`."""

    metadata_location: str
    params: str
    properties: dict[str, str]
    report: dict[str, Any]


class HealthCache:
    """The cache file; one instance per run, used from the run's main thread."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        path = Path(directory) if directory is not None else default_cache_dir()
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / CACHE_FILE
        self._db = sqlite3.connect(self.path, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def load(self, key: str) -> dict[str, CachedHealth]:
        """Every cached table of one catalog."""
        rows = self._db.execute(
            "SELECT table_name, metadata_location, params, properties, report "
            "FROM health_cache WHERE catalog_key = ? AND version = ?",
            (key, CACHE_VERSION),
        )
        return {
            name: CachedHealth(location, params, json.loads(props), _unpack(report))
            for name, location, params, props, report in rows
        }

    def store(self, key: str, entries: Iterable[tuple[str, CachedHealth]]) -> None:
        """Replace the rows of these tables, in one transaction."""
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO health_cache VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        key,
                        name,
                        CACHE_VERSION,
                        e.metadata_location,
                        e.params,
                        json.dumps(e.properties, sort_keys=True),
                        zlib.compress(json.dumps(e.report, default=str).encode(), 1),
                    )
                    for name, e in entries
                ],
            )

    def forget_others(self, key: str, keep: Iterable[str]) -> None:
        """Drop the rows of tables no longer listed (dropped or renamed)."""
        kept = set(keep)
        gone = [(key, n) for n in self.load_names(key) if n not in kept]
        if gone:
            with self._db:
                self._db.executemany(
                    "DELETE FROM health_cache WHERE catalog_key = ? AND table_name = ?", gone
                )

    def load_names(self, key: str) -> list[str]:
        rows = self._db.execute("SELECT table_name FROM health_cache WHERE catalog_key = ?", (key,))
        return [r[0] for r in rows]


def _unpack(blob: bytes) -> dict[str, Any]:
    return json.loads(zlib.decompress(blob))
