"""Opening a table without the SQL catalog never imports SQLAlchemy (a quarter second of every
job's start): `icecore.catalog` loads `SqlCatalog` on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from icecore.catalog import SqlCatalog
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from tests.support.tables import LocalTable

_OPEN_STATIC = """\
import sys
from icecore.catalog import load_static_table
table = load_static_table(sys.argv[1])
print(table.metadata.format_version, "sqlalchemy" in sys.modules)
import icecore.catalog
icecore.catalog.SqlCatalog
print("sqlalchemy" in sys.modules)
"""


def test_a_static_table_opens_without_sqlalchemy(tmp_path: Path) -> None:
    table = LocalTable.create(tmp_path / "t", Schema((NestedField(1, "id", LongType()),)))
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_STATIC, table.metadata_location],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    opened, used = done.stdout.split("\n")[:2]
    assert opened == f"{table.metadata.format_version} False"
    assert used == "True"  # the name still resolves, loading it then
    assert SqlCatalog.__module__ == "icecore.catalog.sql"
