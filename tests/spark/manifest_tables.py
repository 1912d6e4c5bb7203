"""Tables with many manifests for the `rewrite_manifests` tests, and what a rewrite must leave
unchanged: every live file with its snapshot id, data and file sequence numbers and row ids,
and the delete files planning pairs with each data file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from icecore.catalog import Catalog
from icecore.jobs.jobs import RewriteManifestsOptions
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.table import Table
from spark_jobs.rewrite_manifests import run
from tests.support.committing import CatalogTable

MERGE_OFF = {"commit.manifest-merge.enabled": "false"}  # one manifest per commit, always
TARGET = "commit.manifest.target-size-bytes"

Numbers = dict[str, tuple[Any, ...]]


def rewrite(
    spark: Any, catalog: Catalog, table: str, before_commit: Any = None, **options: Any
) -> dict[str, Any]:
    """The job, in process; `before_commit(table)` runs between writing and committing."""
    options = RewriteManifestsOptions(table=table, **options)
    return run(spark, catalog, options, before_commit=before_commit)


def numbers(table: Table) -> Numbers:
    """Every live file (data and deletes): content, snapshot id, data and file sequence
    numbers, first row id."""
    out: Numbers = {}
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    for m in snapshot_manifests(table.io, snapshot):
        spec = table.metadata.spec_by_id(m.partition_spec_id)
        for e in read_manifest(table.io, m, spec=spec, live_only=True):
            f = e.data_file
            key = (
                f"{f.file_path}#{f.content_offset}" if f.content_offset is not None else f.file_path
            )
            out[key] = (
                f.content,
                e.snapshot_id,
                e.sequence_number,
                e.file_sequence_number,
                f.first_row_id,
            )
    return out


def planned(table: Table) -> dict[str, tuple[int, frozenset[str]]]:
    """icecore's plan: each data file, its data sequence number and the deletes it applies."""
    return {
        t.file.file_path: (t.data_sequence_number, frozenset(d.file_path for d in t.deletes))
        for t in table.scan().plan_files()
    }


def listed(table: Table, content: ManifestContent | None = None) -> list[ManifestFile]:
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    found = snapshot_manifests(table.io, snapshot)
    return [m for m in found if content is None or m.content == content]


def appends(t: CatalogTable, commits: int, *, start: int = 0, deletes_every: int = 0) -> None:
    """`commits` fast appends of two files (two categories) each, one manifest per commit;
    every `deletes_every`-th commit also a position delete of one of its rows (a row delta:
    a delete manifest too)."""
    rnd = random.Random(start)
    for n in range(start, start + commits):
        files = [
            t.data([{"id": n * 100 + i, "cat": rnd.choice("abcdefgh"), "v": n}]) for i in range(2)
        ]
        if deletes_every and n % deletes_every == 0:
            delta = t.table.new_row_delta().add_rows(files[0]).add_rows(files[1])
            dead = files[0]
            delta.add_deletes(t.position_deletes([(dead.file_path, 0)], partition=dead.partition))
            delta.commit()
        else:
            t.table.new_fast_append().append_file(files[0]).append_file(files[1]).commit()


def avro_files(table: Table) -> set[str]:
    """The manifests and manifest lists under the table's metadata directory."""
    return {
        str(p)
        for p in Path(table.metadata.location.removeprefix("file://"), "metadata").glob("*.avro")
    }


def referenced(table: Table) -> set[str]:
    """Manifest lists and manifests of every snapshot the table's metadata holds."""
    found: set[str] = set()
    for snapshot in table.metadata.snapshots:
        assert snapshot.manifest_list is not None
        found.add(snapshot.manifest_list.removeprefix("file://"))
        found.update(
            m.manifest_path.removeprefix("file://") for m in snapshot_manifests(table.io, snapshot)
        )
    return found
