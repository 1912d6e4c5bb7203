"""Broken tables fail loudly, name the file and the problem, and change nothing on disk.

Maintenance jobs run unattended: a metadata file, manifest list or manifest that is missing,
truncated, of a newer format or of the wrong schema must stop the job with a message an
operator can act on, never with a bare `KeyError` or a silently shorter scan, and never after
writing something half-way.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pytest

from icecore.errors import FileError, ManifestError, MetadataError, ValidationError
from icecore.io import FileIO
from icecore.scan import TableScan
from icecore.spec.manifest import ManifestWriter, read_manifest
from icecore.spec.manifest_list import ManifestFile, ManifestListWriter, read_manifest_list
from icecore.spec.metadata import read_table_metadata, write_table_metadata
from tests.support.samples import PSCHEMA, WorkedExample, spec_of, worked_example


def listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


@contextmanager
def nothing_written(root: Path) -> Iterator[None]:
    before = listing(root)
    yield
    assert listing(root) == before


def raises_naming(
    root: Path, error: type[FileError], location: str, problem: str, action: Callable[[], Any]
) -> None:
    """`action` raises `error` for `location`, with `problem` in its message, writing nothing."""
    with nothing_written(root), pytest.raises(error) as caught:
        action()
    assert caught.value.path == location
    assert problem in caught.value.problem
    assert str(caught.value).startswith(location)


@pytest.fixture
def example(tmp_path: Path) -> WorkedExample:
    return worked_example(tmp_path / "t")


def plan(example: WorkedExample) -> Callable[[], list[Any]]:
    return lambda: list(TableScan(example.table.io, example.table.metadata).plan_files())


def manifests(example: WorkedExample) -> list[ManifestFile]:
    snapshot = example.table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    return read_manifest_list(example.table.io, snapshot.manifest_list)


def foreign_avro() -> bytes:
    """A valid Avro file that is no Iceberg file: records of one int field without ids."""
    buffer = io.BytesIO()
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    fastavro.writer(buffer, fastavro.parse_schema(schema), [{"a": 1}])
    return buffer.getvalue()


# Table metadata ------------------------------------------------------------------------------


def _metadata_variant(example: WorkedExample, name: str, edit: Callable[[dict], None]) -> str:
    """A copy of the current metadata file, changed by `edit`, beside it."""
    document = json.loads(Path(example.table.metadata_location).read_text())
    edit(document)
    path = Path(example.table.location, "metadata", name)
    path.write_text(json.dumps(document))
    return str(path)


def test_malformed_metadata_json(example: WorkedExample, tmp_path: Path) -> None:
    text = Path(example.table.metadata_location).read_text()
    path = Path(example.table.location, "metadata", "00009-cut.metadata.json")
    path.write_text(text[: len(text) // 2])
    raises_naming(
        tmp_path,
        MetadataError,
        str(path),
        "malformed JSON",
        lambda: read_table_metadata(FileIO(), str(path)),
    )


def test_metadata_that_is_not_utf8(example: WorkedExample, tmp_path: Path) -> None:
    path = Path(example.table.location, "metadata", "00009-latin1.metadata.json")
    path.write_bytes('{"location": "caf\xe9"}'.encode("latin-1"))
    raises_naming(
        tmp_path,
        MetadataError,
        str(path),
        "not UTF-8",
        lambda: read_table_metadata(FileIO(), str(path)),
    )


@pytest.mark.parametrize("version", [0, 4])
def test_unknown_format_version(example: WorkedExample, tmp_path: Path, version: int) -> None:
    path = _metadata_variant(
        example, f"00009-v{version}.metadata.json", lambda d: d.update({"format-version": version})
    )
    raises_naming(
        tmp_path,
        MetadataError,
        path,
        f"unsupported format-version {version}",
        lambda: read_table_metadata(FileIO(), path),
    )


def test_missing_required_v2_field(example: WorkedExample, tmp_path: Path) -> None:
    def drop_uuid(document: dict) -> None:
        del document["table-uuid"]

    path = _metadata_variant(example, "00009-no-uuid.metadata.json", drop_uuid)
    raises_naming(
        tmp_path, MetadataError, path, "'table-uuid'", lambda: read_table_metadata(FileIO(), path)
    )


def test_field_id_clash_in_a_schema(example: WorkedExample, tmp_path: Path) -> None:
    def clash(document: dict) -> None:
        document["schemas"][0]["fields"][1]["id"] = 1  # "data" takes the id of "id"

    path = _metadata_variant(example, "00009-clash.metadata.json", clash)
    raises_naming(
        tmp_path,
        MetadataError,
        path,
        "field id 1 is used by both 'id' and 'data'",
        lambda: read_table_metadata(FileIO(), path),
    )


def test_missing_metadata_file(tmp_path: Path) -> None:
    path = str(tmp_path / "00001-gone.metadata.json")
    raises_naming(
        tmp_path, FileError, path, "file not found", lambda: read_table_metadata(FileIO(), path)
    )


def test_metadata_is_never_overwritten_or_half_written(
    example: WorkedExample, tmp_path: Path
) -> None:
    metadata = example.table.metadata
    existing = example.table.metadata_location
    raises_naming(
        tmp_path,
        FileError,
        existing,
        "already exists",
        lambda: write_table_metadata(FileIO(), existing, metadata),
    )
    # A v1 table without uuid must be upgraded (choosing its uuid once) before writing.
    v1 = replace(metadata, format_version=1, table_uuid=None, last_sequence_number=0, snapshots=(),
                 refs={}, current_snapshot_id=None, snapshot_log=())  # fmt: skip
    target = str(Path(example.table.location, "metadata", "00009-v1.metadata.json"))
    raises_naming(
        tmp_path,
        MetadataError,
        target,
        "table-uuid",
        lambda: write_table_metadata(FileIO(), target, v1),
    )


# Manifest lists and manifests ------------------------------------------------------------------


def test_snapshot_whose_manifest_list_is_missing(example: WorkedExample, tmp_path: Path) -> None:
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    os.remove(snapshot.manifest_list)
    raises_naming(tmp_path, ManifestError, snapshot.manifest_list, "file not found", plan(example))
    # Older snapshots, whose lists are still there, plan as before.
    older = TableScan(
        example.table.io, example.table.metadata, snapshot_id=example.snapshots[1].snapshot_id
    )
    assert len(list(older.plan_files())) == 2


@pytest.mark.parametrize("content", ["data", "deletes"])
def test_missing_manifest(example: WorkedExample, tmp_path: Path, content: str) -> None:
    manifest = next(m for m in manifests(example) if m.content.name.lower() == content)
    os.remove(manifest.manifest_path)
    raises_naming(tmp_path, ManifestError, manifest.manifest_path, "file not found", plan(example))


def test_manifest_list_used_as_a_manifest(example: WorkedExample, tmp_path: Path) -> None:
    manifest = manifests(example)[0]
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    Path(manifest.manifest_path).write_bytes(Path(snapshot.manifest_list).read_bytes())
    raises_naming(
        tmp_path,
        ManifestError,
        manifest.manifest_path,
        "lacks required field 0 status",
        plan(example),
    )


def test_manifest_used_as_a_manifest_list(example: WorkedExample, tmp_path: Path) -> None:
    manifest = manifests(example)[0]
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    Path(snapshot.manifest_list).write_bytes(Path(manifest.manifest_path).read_bytes())
    raises_naming(
        tmp_path,
        ManifestError,
        snapshot.manifest_list,
        "lacks required field 500 manifest_path",
        plan(example),
    )


@pytest.mark.parametrize("target", ["manifest", "manifest list"])
def test_foreign_avro_file(example: WorkedExample, tmp_path: Path, target: str) -> None:
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    path = manifests(example)[0].manifest_path if target == "manifest" else snapshot.manifest_list
    Path(path).write_bytes(foreign_avro())
    raises_naming(tmp_path, ManifestError, path, f"{target} lacks required field", plan(example))


@pytest.mark.parametrize("target", ["manifest", "manifest list"])
def test_file_that_is_not_avro(example: WorkedExample, tmp_path: Path, target: str) -> None:
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    path = manifests(example)[0].manifest_path if target == "manifest" else snapshot.manifest_list
    Path(path).write_bytes(b'{"this": "is json"}')
    raises_naming(tmp_path, ManifestError, path, f"{target} is not an Avro file", plan(example))


@pytest.mark.parametrize("target", ["manifest", "manifest list"])
@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(40, id="in-header"),
        pytest.param(-100, id="in-block"),
        pytest.param(-8, id="in-sync-marker"),
    ],
)
def test_truncated_avro_file(example: WorkedExample, tmp_path: Path, target: str, cut: int) -> None:
    """A copy cut short (an interrupted upload) is reported as such, whichever part is lost."""
    snapshot = example.snapshots[-1]
    assert snapshot.manifest_list is not None
    path = manifests(example)[0].manifest_path if target == "manifest" else snapshot.manifest_list
    Path(path).write_bytes(Path(path).read_bytes()[:cut])
    raises_naming(tmp_path, ManifestError, path, target, plan(example))


def test_reading_a_manifest_directly_names_it(example: WorkedExample, tmp_path: Path) -> None:
    manifest = manifests(example)[0]
    Path(manifest.manifest_path).write_bytes(foreign_avro())
    raises_naming(
        tmp_path,
        ManifestError,
        manifest.manifest_path,
        "lacks required field",
        lambda: list(read_manifest(example.table.io, manifest, spec=spec_of())),
    )


# Writers refuse bad input before writing anything ------------------------------------------------


def test_manifest_writer_refuses_a_file_of_another_spec(tmp_path: Path) -> None:
    location = str(tmp_path / "m.avro")
    spec = spec_of(("category", "identity", "category"))
    other = spec_of(spec_id=1)
    example_file = worked_example(tmp_path / "t").files["a"]
    writer = ManifestWriter(FileIO(), location, spec, PSCHEMA, snapshot_id=1)
    with (
        nothing_written(tmp_path),
        pytest.raises(
            ValidationError, match="belongs to partition spec 1, not to this manifest's spec 0"
        ),
    ):
        writer.add(replace(example_file, spec_id=other.spec_id, partition=()))
    assert not Path(location).exists()


def test_manifest_list_writer_refuses_unassigned_numbers_of_another_snapshot(
    example: WorkedExample, tmp_path: Path
) -> None:
    foreign = replace(manifests(example)[0], sequence_number=-1, added_snapshot_id=7)
    location = str(tmp_path / "list.avro")
    writer = ManifestListWriter(FileIO(), location, 8, None, 4)
    with nothing_written(tmp_path), pytest.raises(ValidationError, match="unassigned sequence"):
        writer.add(foreign)
    assert not Path(location).exists()
