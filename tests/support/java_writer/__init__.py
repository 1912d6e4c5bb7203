"""A real Iceberg Java merge-on-read writer beside our jobs (issue 36): Spark 3.5.9 with
iceberg-spark-runtime 1.10.2 committing `DELETE FROM t WHERE id IN (...)` on a timer through
the catalog our job commits to, as users' streaming MERGE/UPDATE/DELETE jobs do.

    with IcebergJava(workdir) as java:                  # the `iceberg_java` fixture
        java.attach("lake", warehouse)                  # Java first: it makes catalog.db
        catalog = SqlCatalog("lake", None, warehouse)   # the same catalog, in icecore
        table = java.create_table("lake.db.t", format_version=3, files=20,
                                  rows_per_file=1000, partitions=4)
        batches = key_batches(table.keys(), size=20, count=100, seed=1)
        with MergeOnReadWriter(java, table.identifier, batches, interval=0.5) as writer:
            ...                                         # our job, meanwhile
        writer.result.deleted_keys, writer.result.failed, writer.result.commits_per_second

- `venv.py`: the Spark 3.5 virtualenv (`.cache/iceberg-java-venv`, shared with the Iceberg
  Java benchmarks) and its jars;
- `spark_side.py`: the driver in that virtualenv, answering JSON requests;
- `process.py`: `IcebergJava`, the process, and `JavaTable`, a table it wrote;
- `writer.py`: `MergeOnReadWriter`, the DELETEs on a timer, and `key_batches`;
- `outcomes.py`: what each DELETE did and a run's sum (`WriterResult`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .outcomes import DeleteOutcome, JavaError, WriterResult
from .process import IcebergJava, JavaTable
from .writer import MergeOnReadWriter, key_batches

__all__ = [
    "DeleteOutcome",
    "IcebergJava",
    "JavaError",
    "JavaTable",
    "MergeOnReadWriter",
    "WriterResult",
    "iceberg_java_fixture",
    "key_batches",
]


@pytest.fixture(name="iceberg_java", scope="module")
def iceberg_java_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergJava]:
    """One Iceberg Java process for a module (import this function into it; mark the module
    `servers`); the first run anywhere makes its virtualenv (venv.py)."""
    with IcebergJava(tmp_path_factory.mktemp("iceberg-java")) as java:
        yield java
