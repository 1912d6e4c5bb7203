"""CatalogWatch on the commits of a real Spark with Iceberg Java 1.10.2 (issue 37): who
committed (`engine-name`, the application id), what (an INSERT's data files, a v3 DELETE's
deletion vectors), as their summaries say it, and whether that may make maintenance due.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.changes import CatalogWatch, DueThresholds, due_reasons
from tests.support.java_writer import (
    IcebergJava,
    iceberg_java_fixture,  # noqa: F401 - provides the `iceberg_java` fixture
)

pytestmark = pytest.mark.servers  # a Spark 3.5 process of the module's own


def test_spark_inserts_and_deletion_vectors_are_seen_with_their_engine(
    iceberg_java: IcebergJava, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    iceberg_java.attach("watched", warehouse)
    table = iceberg_java.create_table(
        "watched.db.t", format_version=3, files=2, rows_per_file=100, partitions=2
    )
    catalog = SqlCatalog("watched", None, warehouse)
    watch = CatalogWatch(catalog)
    assert watch.poll() == []

    iceberg_java.sql(f"INSERT INTO {table.identifier} VALUES (100000, 0, 'x')")
    deleted = iceberg_java.delete(table.identifier, [1, 2, 150])
    assert deleted.error is None, deleted.error

    (change,) = watch.poll()
    insert, delete = change.commits
    assert (insert.operation, insert.added_data_files) == ("append", 1)
    assert delete.snapshot_id == deleted.snapshot_id
    assert delete.operation in ("delete", "overwrite")
    assert delete.added_dvs == 2 and delete.added_delete_files == 2, delete
    assert delete.added_position_delete_files == 0, "a DV is not a position delete file"
    for commit in change.commits:
        assert commit.engine == "spark"
        assert commit.app_id == iceberg_java.app_id
        assert not commit.own
    reasons = due_reasons(change, DueThresholds(small_file_bytes=32 << 20))
    assert reasons == ("1 small data file(s) added", "2 delete file(s) added")
    catalog.close()
