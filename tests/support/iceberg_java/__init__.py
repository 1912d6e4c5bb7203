"""Apache Iceberg's Java library reading a table, for tests that check what Iceberg Java (the
reference implementation: Spark, Flink, Trino's planner) sees in a table we wrote.

`IcebergJavaReader.java` opens a table from its metadata JSON file (no catalog), plans it and
reads its rows with Iceberg's generic readers, every kind of delete applied. It runs on the
class path of the REST catalog test server (`tests/support/rest_server`: Iceberg 1.10.2, its
shaded dependencies, PySpark's Hadoop jars), compiled once per hash of its source.

    read = java_read(table.metadata_location, ["id", "v"])
    read.rows    # Counter of (id, v) tuples
    read.files   # {data file path: frozenset of the delete file paths applied to it}
    read.first_row_ids   # {data file path: the first row id Iceberg Java gives it}

`IcebergJavaOrphanListing.java` lists a directory as Iceberg Java's orphan removal does:
`java_orphan_listing(directory)` -> (the Hadoop walk's files, the FileIO prefix listing's).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rest_server import JVM_OPTIONS, _tool, compiled_classes, pyspark_jars, runtime_classpath

SOURCE = Path(__file__).resolve().parent / "IcebergJavaReader.java"
ORPHAN_LISTING = Path(__file__).resolve().parent / "IcebergJavaOrphanListing.java"
# The Parquet codecs' native libraries Iceberg's runtime jar leaves out, from PySpark's jars.
CODEC_JARS = ("zstd-jni-", "snappy-java-", "lz4-java-", "aircompressor-")


def _codec_jars() -> list[Path]:
    jars = pyspark_jars()[0].parent
    return [sorted(jars.glob(f"{prefix}[0-9]*.jar"))[-1] for prefix in CODEC_JARS]


@dataclass(frozen=True)
class JavaRead:
    """What Iceberg Java planned and read."""

    rows: Counter[tuple[Any, ...]]  # only the columns asked for, in that order
    files: dict[str, frozenset[str]]  # data file -> the delete files applied to it
    first_row_ids: dict[str, int | None]  # data file -> its first row id (v3 row lineage)


def _run(source: Path, *argv: str) -> list[dict[str, Any]]:
    """Compile `source` (once) against Iceberg's runtime and run its class; its JSON lines."""
    runtime = runtime_classpath(_codec_jars())
    classpath = [compiled_classes(runtime, source), *runtime]
    command = [
        _tool("java"), *JVM_OPTIONS, "-cp", os.pathsep.join(map(str, classpath)), source.stem,
        *argv,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Iceberg Java failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line]


def java_orphan_listing(directory: str) -> tuple[set[str], set[str]]:
    """The files under `directory` Iceberg Java's orphan removal would consider (its hidden
    paths dropped): (by its Hadoop walk, by its FileIO prefix listing), without `file:`."""
    lines = _run(ORPHAN_LISTING, directory)
    return (
        {_local(line["hadoop"]).removeprefix("file:") for line in lines if "hadoop" in line},
        {_local(line["fileio"]).removeprefix("file:") for line in lines if "fileio" in line},
    )


def java_read(metadata_location: str, columns: Sequence[str] = ()) -> JavaRead:
    """Plan and read the table of `metadata_location` with Iceberg Java (paths without
    `file://`)."""
    lines = _run(SOURCE, metadata_location, *columns)
    files = {
        _local(f[0]): frozenset(_local(d) for d in f[1:])
        for line in lines
        if (f := line.get("file"))
    }
    first_row_ids = {
        _local(line["file"][0]): line["first_row_id"] for line in lines if "file" in line
    }
    rows = Counter(tuple(line["row"]) for line in lines if "row" in line)
    return JavaRead(rows, files, first_row_ids)


def _local(location: str) -> str:
    return location.removeprefix("file://") if location.startswith("file:///") else location
