"""Table locations: whose a file is when tables nest, and where a new table may not go."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

from icecore.catalog import SqlCatalog
from icecore.catalog.directories import (
    DirectoryIndex,
    TableDirectories,
    catalog_directories,
    overlaps,
    placement_conflict,
)
from icecore.errors import AlreadyExistsError
from icecore.io.locations import location_key
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))


def dirs(name: str, location: str, **properties: str) -> TableDirectories:
    return TableDirectories.of(name, location, properties)


def test_a_file_belongs_to_the_table_holding_it_most_deeply() -> None:
    events = dirs("db.events", "/wh/db/events")
    archive = dirs("db.events.archive", "/wh/db/events/archive")
    old = dirs("db.events.archive.old", "/wh/db/events/archive/old")
    index = DirectoryIndex([events, archive, old])

    def owner(path: str) -> list[str]:
        return [o.table.name for o in index.owners(path)]

    assert owner("/wh/db/events/data/a.parquet") == ["db.events"]
    assert owner("/wh/db/events/stray.bin") == ["db.events"]
    assert owner("/wh/db/events/archive/metadata/v1.metadata.json") == ["db.events.archive"]
    assert owner("/wh/db/events/archive/old/data/x/y.parquet") == ["db.events.archive.old"]
    assert owner("/wh/db/events_2/data/a.parquet") == []
    shared = DirectoryIndex([events, dirs("db.copy", "/wh/db/events")])
    assert sorted(o.table.name for o in shared.owners("/wh/db/events/data/a")) == [
        "db.copy",
        "db.events",
    ]


@pytest.mark.parametrize(
    ("new", "reason"),
    [
        (dirs("db.b", "/wh/db/a"), "already uses location /wh/db/a"),
        (dirs("db.b", "/wh/db/a/data/b"), "inside the data directory of table db.a"),
        (dirs("db.b", "/wh/db/a/metadata/b"), "inside the metadata directory of table db.a"),
        (
            dirs("db.b", "/wh/db/b", **{"write.data.path": "/wh/db/a/data"}),
            "overlaps the data directory /wh/db/a/data of table db.a",
        ),
        (
            dirs("db.b", "/wh/db/b", **{"write.data.path": "/wh"}),
            "table db.a (/wh/db/a) would lie inside its data directory /wh",
        ),
        (
            dirs("db.b", "/wh/x", **{"write.metadata.path": "/wh/db/a/metadata/m"}),
            "overlaps the metadata directory /wh/db/a/metadata",
        ),
    ],
)
def test_placement_conflicts(new: TableDirectories, reason: str) -> None:
    conflict = placement_conflict(new, [dirs("db.a", "/wh/db/a")])
    assert conflict is not None and reason in conflict


def test_nesting_by_namespace_and_siblings_are_allowed() -> None:
    events = dirs("db.events", "/wh/db/events")
    assert placement_conflict(dirs("db.events.archive", "/wh/db/events/archive"), [events]) is None
    assert placement_conflict(dirs("db.events_2", "/wh/db/events_2"), [events]) is None
    assert placement_conflict(dirs("db", "/wh/db"), [events]) is None


def test_overlaps_name_both_sides() -> None:
    found = overlaps(
        [
            dirs("db.events", "/wh/db/events"),
            dirs("db.events.archive", "/wh/db/events/archive"),
            dirs("db.copy", "/wh/db/events/data/copy"),
            dirs("db.alone", "/wh/db/alone"),
        ]
    )
    by = {name: {o.other: (o.problem, o.detail) for o in found[name]} for name in found}
    assert by["db.events"]["db.events.archive"] == (False, "contains db.events.archive")
    assert by["db.events.archive"]["db.events"] == (False, "inside db.events")
    assert by["db.copy"]["db.events"][0] is True
    assert "inside the data directory of db.events" in by["db.copy"]["db.events"][1]
    assert by["db.events"]["db.copy"][0] is True
    assert "db.alone" not in found


def test_create_table_refuses_to_mix_files_and_allows_nesting(tmp_path: Path) -> None:
    catalog = SqlCatalog("default", warehouse=tmp_path)
    catalog.create_namespace("db")
    events = catalog.create_table("db.events", SCHEMA)
    catalog.create_namespace("db.events")
    archive = catalog.create_table("db.events.archive", SCHEMA)
    assert archive.metadata.location == f"{events.metadata.location}/archive"

    with pytest.raises(AlreadyExistsError, match=r"already uses location .*db/events"):
        catalog.create_table("db.twin", SCHEMA, location=events.metadata.location)
    with pytest.raises(AlreadyExistsError, match=r"inside the data directory of table db\.events"):
        catalog.create_table("db.inner", SCHEMA, location=f"{events.metadata.location}/data/x")
    with pytest.raises(AlreadyExistsError, match="would lie inside its data directory"):
        catalog.create_table(
            "db.wide",
            SCHEMA,
            location=str(tmp_path / "wide"),
            properties={"write.data.path": str(tmp_path / "db")},
        )
    assert {".".join(i) for i in catalog.list_tables("db")} == {"db.events"}
    catalog.close()


def test_register_table_refuses_another_tables_location(tmp_path: Path) -> None:
    catalog = SqlCatalog("default", warehouse=tmp_path)
    catalog.create_namespace("db")
    events = catalog.create_table("db.events", SCHEMA)
    assert events.metadata_location is not None
    with pytest.raises(AlreadyExistsError, match="already uses location"):
        catalog.register_table("db.again", events.metadata_location)
    assert not catalog.table_exists("db.again")
    catalog.close()


def test_catalog_directories_lists_every_catalog_of_the_database_once(tmp_path: Path) -> None:
    """Two catalog names in one database share a warehouse: both are listed; a table whose
    metadata is gone is reported, not skipped silently."""
    ours = SqlCatalog("ours", warehouse=tmp_path)
    theirs = PyIcebergSqlCatalog(
        "theirs", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}"
    )
    ours.create_namespace("db")
    ours.create_table("db.a", SCHEMA)
    theirs.create_namespace("db")
    theirs_table = theirs.create_table("db.b", schema=_pyiceberg_schema())
    broken = ours.create_table("db.broken", SCHEMA, location=str(tmp_path / "broken"))
    assert broken.metadata_location is not None
    Path(broken.metadata_location).unlink()

    listing = catalog_directories(ours)
    names = {t.name: t for t in listing.tables}
    assert set(names) == {"db.a", "theirs:db.b"}
    assert location_key(names["theirs:db.b"].location) == location_key(
        theirs_table.metadata.location
    )
    assert names["db.a"].data == f"{tmp_path}/db/a/data"
    assert [(u.name, u.metadata_location) for u in listing.unreadable] == [
        ("db.broken", broken.metadata_location)
    ]
    ours.close()


def _pyiceberg_schema():
    from pyiceberg.schema import Schema as PySchema  # noqa: PLC0415
    from pyiceberg.types import LongType as PyLong  # noqa: PLC0415
    from pyiceberg.types import NestedField as PyField  # noqa: PLC0415

    return PySchema(PyField(1, "id", PyLong(), required=True))
