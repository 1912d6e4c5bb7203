"""Tables built once per test session and copied back, byte for byte, for each test that asks.

Building a table through the ingestion job costs seconds of Spark per batch, and several cases
(one table, another route or runner) used to build the same table each. A table's metadata
names its files by absolute path, so a copy elsewhere would be another table: here every test
that asks for a built table gets the same warehouse path, emptied first; the first test asking
for a `Built` runs its `build` there (with a catalog of its own, closed after) and the warehouse
is saved, and every later one gets the saved warehouse copied back to that path (modification
times kept) before its own catalog opens. What a test does to the table is gone for the next.

    from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`

    TWO_SPECS = Built("two-specs", lambda spark, catalog: build(spark, catalog, 4, ...))

    @pytest.mark.parametrize("warehouse", [TWO_SPECS], indirect=True)
    def test_x(spark, catalog): ...   # `catalog` opens the built warehouse

A test that does not parametrize `warehouse` gets its own empty one, as before
(`tmp_path / "warehouse"`). Nothing may write into the warehouse once its test has ended (it
would write into the next test's copy): a test that kills a Connect client waits until the
server's tasks have stopped writing (test_killed_jobs).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog


@dataclass(frozen=True)
class Built:
    """A warehouse holding what `build(spark, catalog)` made in it; `name` is its id (unique
    per session)."""

    name: str
    build: Callable[[SparkSession, SqlCatalog], object] = field(compare=False)

    def __str__(self) -> str:
        return self.name


class Templates:
    """The session's built warehouses (`saved/<name>`), restored at `path`."""

    def __init__(self, root: Path) -> None:
        self.path = root / "warehouse"
        self._saved = root / "saved"
        self._builders: dict[str, Built] = {}

    def restore(self, built: Built, spark: SparkSession) -> Path:
        if self._builders.setdefault(built.name, built) is not built:
            raise ValueError(f"two tables built as {built.name!r}")
        shutil.rmtree(self.path, ignore_errors=True)
        saved = self._saved / built.name
        if saved.exists():
            shutil.copytree(saved, self.path, symlinks=True)
            return self.path
        catalog = SqlCatalog("default", warehouse=self.path)
        try:
            built.build(spark, catalog)
        finally:
            catalog.close()
        shutil.copytree(self.path, saved, symlinks=True)
        return self.path


_TEMPLATES = pytest.StashKey[Templates]()


@pytest.fixture(name="warehouse")
def built_warehouse(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The test's warehouse: its own empty one, or (parametrized indirectly with a `Built`)
    the session's one path holding that table."""
    built = getattr(request, "param", None)
    if built is None:
        return tmp_path / "warehouse"
    stash = request.config.stash
    if _TEMPLATES not in stash:
        stash[_TEMPLATES] = Templates(tmp_path_factory.mktemp("templates"))
    return stash[_TEMPLATES].restore(built, request.getfixturevalue("spark"))
