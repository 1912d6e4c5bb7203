"""A real SQLite catalog per Spark test (the SparkSession is tests/support/spark.py's, shared
with the Airflow tests through tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from icecore.catalog import SqlCatalog


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def catalog(warehouse: Path) -> Iterator[SqlCatalog]:
    catalog = SqlCatalog("default", warehouse=warehouse)
    yield catalog
    catalog.close()


@pytest.fixture
def other(warehouse: Path, catalog: SqlCatalog) -> Iterator[SqlCatalog]:
    """A second catalog on the same database: the concurrent writer's."""
    second = SqlCatalog("default", warehouse=warehouse)
    yield second
    second.close()
