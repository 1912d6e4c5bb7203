"""Read-only tables from a metadata file or a Hadoop-layout directory, without a catalog.

The Hadoop layouts are built the way Spark's HadoopCatalog leaves them, including the
states a crash leaves behind: a version-hint.text one version behind, no hint at all, a
gzip-compressed version.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from icecore.catalog import load_static_table
from icecore.errors import FileError, MetadataError, ValidationError
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType
from tests.support.reader import scan_rows
from tests.support.tables import LocalTable

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "data", StringType()),
    )
)


def three_versions(location: Path) -> tuple[LocalTable, list[str]]:
    """A table with one row per commit; returns it and its metadata files, oldest first."""
    table = LocalTable.create(location, SCHEMA)
    versions = [table.metadata_location]
    for i in (1, 2):
        table.commit(add=[table.write_data([{"id": i, "data": f"row {i}"}])])
        versions.append(table.metadata_location)
    return table, versions


def hadoop_layout(location: Path) -> list[Path]:
    """Rename a table's metadata files to Hadoop's v1, v2, v3 and drop the catalog naming."""
    _, versions = three_versions(location)
    metadata_dir = location / "metadata"
    (metadata_dir / "version-hint.text").unlink()
    renamed = []
    for number, source in enumerate(versions, start=1):
        target = metadata_dir / f"v{number}.metadata.json"
        shutil.move(source, target)
        renamed.append(target)
    return renamed


def ids(table) -> list[int]:
    return sorted(r["id"] for r in scan_rows(table.io, table.metadata))


def test_load_by_metadata_file(tmp_path: Path) -> None:
    local, versions = three_versions(tmp_path / "t")
    table = load_static_table(versions[-1])
    assert table.catalog is None
    assert table.metadata_location == versions[-1]
    assert table.metadata == local.metadata
    assert ids(table) == [1, 2]
    assert ids(load_static_table(versions[1])) == [1]  # an older version, time travel style


def test_hadoop_directory_with_version_hint(tmp_path: Path) -> None:
    files = hadoop_layout(tmp_path / "t")
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("3\n")
    table = load_static_table(tmp_path / "t")
    assert table.metadata_location == str(files[2])
    assert ids(table) == [1, 2]
    # The metadata directory itself, and a trailing slash, name the same table.
    assert load_static_table(f"{tmp_path}/t/metadata/").metadata_location == str(files[2])


def test_stale_hint_steps_forward_to_the_newest_version(tmp_path: Path) -> None:
    """Spark writes vN+1 before the hint; a crash in between leaves the hint behind."""
    files = hadoop_layout(tmp_path / "t")
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("1")
    assert load_static_table(tmp_path / "t").metadata_location == str(files[2])


def test_no_hint_takes_the_highest_version(tmp_path: Path) -> None:
    files = hadoop_layout(tmp_path / "t")
    assert load_static_table(tmp_path / "t").metadata_location == str(files[2])
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("garbage")
    assert load_static_table(tmp_path / "t").metadata_location == str(files[2])


def test_gzip_versions(tmp_path: Path) -> None:
    files = hadoop_layout(tmp_path / "t")
    compressed = files[2].with_name("v3.gz.metadata.json")
    compressed.write_bytes(gzip.compress(files[2].read_bytes()))
    files[2].unlink()
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("2")
    table = load_static_table(tmp_path / "t")
    assert table.metadata_location == str(compressed)
    assert ids(table) == [1, 2]


def test_hint_naming_a_missing_version_is_an_error(tmp_path: Path) -> None:
    hadoop_layout(tmp_path / "t")
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("7")
    with pytest.raises(MetadataError, match="version 7, whose metadata file is missing"):
        load_static_table(tmp_path / "t")


def test_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    with pytest.raises(MetadataError, match="empty: not a table"):
        load_static_table(tmp_path / "empty")
    with pytest.raises(FileError, match=r"gone\.metadata\.json: file not found"):
        load_static_table(tmp_path / "gone.metadata.json")


def test_static_tables_cannot_be_committed_to(tmp_path: Path) -> None:
    _, versions = three_versions(tmp_path / "t")
    table = load_static_table(versions[-1])
    updated = MetadataBuilder(table.metadata).set_properties({"a": "b"}).build()
    with pytest.raises(ValidationError, match="read-only, without a catalog"):
        table.commit_metadata(table.metadata, updated)
    table.refresh()  # a no-op, not an error: there is nothing to refresh from
    assert table.metadata_location == versions[-1]
