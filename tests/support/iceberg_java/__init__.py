"""Apache Iceberg's Java library reading a table, for tests that check what Iceberg Java (the
reference implementation: Spark, Flink, Trino's planner) sees in a table we wrote.

`IcebergJavaReader.java` opens a table from its metadata JSON file (no catalog), plans it and
reads its rows with Iceberg's generic readers, every kind of delete applied. It runs on the
class path of the REST catalog test server (`tests/support/rest_server`: Iceberg 1.10.2, its
shaded dependencies, PySpark's Hadoop jars), compiled once per hash of its source.

    rows = java_rows(table.metadata_location, ["id", "v"])   # Counter of tuples
    files = java_files(table.metadata_location)               # {data path: {delete paths}}
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..rest_server import JVM_OPTIONS, _tool, compiled_classes, pyspark_jars, runtime_classpath

SOURCE = Path(__file__).resolve().parent / "IcebergJavaReader.java"
# The Parquet codecs' native libraries Iceberg's runtime jar leaves out, from PySpark's jars.
CODEC_JARS = ("zstd-jni-", "snappy-java-", "lz4-java-", "aircompressor-")


def _codec_jars() -> list[Path]:
    jars = pyspark_jars()[0].parent
    return [sorted(jars.glob(f"{prefix}[0-9]*.jar"))[-1] for prefix in CODEC_JARS]


def _run(*args: str) -> list[list[Any]]:
    runtime = runtime_classpath(_codec_jars())
    classpath = [compiled_classes(runtime, SOURCE), *runtime]
    command = [
        _tool("java"), *JVM_OPTIONS, "-cp", os.pathsep.join(map(str, classpath)),
        "IcebergJavaReader", *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Iceberg Java failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line]


def _local(location: str) -> str:
    return location.removeprefix("file://") if location.startswith("file:///") else location


def java_rows(metadata_location: str, columns: Sequence[str] = ()) -> Counter[tuple[Any, ...]]:
    """The table's rows as Iceberg Java reads them (only `columns`, in that order, if given)."""
    return Counter(tuple(r) for r in _run("rows", metadata_location, *columns))


def java_files(metadata_location: str) -> dict[str, frozenset[str]]:
    """The data files Iceberg Java plans, each with the delete files it applies to it
    (local paths without `file://`)."""
    planned = _run("files", metadata_location)
    return {_local(f[0]): frozenset(_local(d) for d in f[1:]) for f in planned}
