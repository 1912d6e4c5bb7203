"""Table property updates through a real SqlCatalog, including racing writers that must all land."""

from __future__ import annotations

import threading

import pytest

from icecore.catalog import SqlCatalog
from icecore.errors import ValidationError
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.t", SCHEMA, properties={"owner": "etl", "keep": "1"})


def test_set_and_remove(catalog: SqlCatalog, table: Table) -> None:
    table.update_properties().set("owner", "ingest").set("gc.enabled", False).remove(
        "keep", "never-set"
    ).commit()
    loaded = catalog.load_table("db.t")
    assert loaded.metadata.properties == {"owner": "ingest", "gc.enabled": "false"}
    assert len(loaded.metadata.metadata_log) == 1


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("format-version", "1", "can be set to 2 or 3"),
        ("uuid", "x", "reserved"),
        ("current-snapshot-id", "1", "reserved"),
        ("commit.retry.num-retries", "many", "must be an integer >= 0"),
        ("commit.retry.num-retries", "-1", "must be an integer >= 0"),
        ("write.metadata.previous-versions-max", "0", "must be an integer >= 1"),
        ("history.expire.min-snapshots-to-keep", "0", "must be an integer >= 1"),
        ("gc.enabled", "yes", "must be true or false"),
        ("", "x", "non-empty name"),
    ],
)
def test_values_icecore_cannot_read_are_refused(
    table: Table, key: str, value: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        table.update_properties().set(key, value)


def test_set_and_remove_of_one_key_is_refused(table: Table) -> None:
    with pytest.raises(ValidationError, match="set and remove"):
        table.update_properties().set("a", "1").remove("a")
    with pytest.raises(ValidationError, match="set and remove"):
        table.update_properties().remove("a").set("a", "1")


def test_stale_update_is_replayed_on_the_new_metadata(catalog: SqlCatalog, table: Table) -> None:
    other = catalog.load_table("db.t")
    other.update_properties().set("a", "1").remove("owner").commit()
    update = table.update_properties().set("b", "2")
    update.commit()
    assert update.attempts == 2  # lost the swap once, replayed on the refreshed metadata
    assert catalog.load_table("db.t").metadata.properties == {"keep": "1", "a": "1", "b": "2"}


def test_racing_property_updates_all_land(catalog: SqlCatalog, table: Table) -> None:
    table.update_properties().set("commit.retry.num-retries", 100).set(
        "commit.retry.min-wait-ms", 1
    ).set("commit.retry.max-wait-ms", 20).commit()
    writers, updates_each = 4, 6
    errors: list[BaseException] = []
    attempts: list[int] = []

    def write(worker: int) -> None:
        try:
            mine = catalog.load_table("db.t")
            for i in range(updates_each):
                update = mine.update_properties().set(f"w{worker}.k{i}", str(i))
                update.commit()
                attempts.append(update.attempts)
        except BaseException as exc:  # reported below; a thread cannot raise into pytest
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    properties = catalog.load_table("db.t").metadata.properties
    for w in range(writers):
        for i in range(updates_each):
            assert properties[f"w{w}.k{i}"] == str(i)
    assert len(attempts) == writers * updates_each
    assert max(attempts) > 1, "no update ever lost a swap: the race was not exercised"
