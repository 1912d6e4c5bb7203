"""The Spark 3.5 process that runs Iceberg Java for the tests (`spark_side.py` at its other
end): started once (a JVM costs seconds), asked for one statement at a time."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from icecore.catalog.sql import SQLITE_FILE

from ..rest_server import stop_process_group
from ..spark import SHORT_LIVED_JVM
from .outcomes import DeleteOutcome, JavaError
from .venv import iceberg_java_jars, iceberg_java_python

SPARK_SIDE = Path(__file__).resolve().parent / "spark_side.py"
# The settings a Spark 3.5 driver must not take from ours (PySpark 4's home and options, the
# suite's spark-defaults for short-lived JVMs).
_OURS = ("SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "PYTHONPATH", "PYTHONHOME")


@dataclass(frozen=True)
class JavaTable:
    """A table Iceberg Java wrote (`IcebergJava.create_table`): its rows follow from these."""

    identifier: str  # catalog.namespace.name, as Spark names it
    files: int
    rows_per_file: int
    partitions: int
    snapshot_id: int

    @property
    def name(self) -> str:
        """The name in its catalog (namespace.name), as icecore and PyIceberg load it."""
        return self.identifier.split(".", 1)[1]

    def keys(self) -> range:
        return range(self.files * self.rows_per_file)

    def rows(self, without: Sequence[int] | frozenset[int] = ()) -> Counter[tuple[Any, ...]]:
        """(id, part, v) of every row written, less the keys `without`."""
        gone = frozenset(without)
        return Counter(
            (key, (key // self.rows_per_file) % self.partitions, f"v{key}")
            for key in self.keys()
            if key not in gone
        )


class IcebergJava:
    """Spark 3.5.9 with iceberg-spark-runtime 1.10.2 in local mode, small and quiet, as a
    process of its own group (`stop` ends it and its JVM; so does the end of its stdin, when
    the process that started it dies). Thread-safe: one request at a time."""

    def __init__(
        self,
        workdir: Path,
        *,
        cores: int = 2,
        memory: str = "1g",
        conf: Mapping[str, str] | None = None,
        startup_timeout: float = 300.0,
    ) -> None:
        self.workdir = workdir
        self.log = workdir / "iceberg-java.log"
        # C1 only and the serial collector: this JVM runs a few minutes of small Spark jobs,
        # for which C2's compiling (on cores the tests share) costs more than it gives back:
        # measured, its DELETEs took twice as long.
        jvm = {"spark.driver.extraJavaOptions": SHORT_LIVED_JVM}
        self.settings = {"cores": cores, "memory": memory, "conf": {**jvm, **(conf or {})}}
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        self.spark_version = ""
        self.app_id = ""  # Spark's application id: the `spark.app.id` of Java's snapshots
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._catalogs: set[str] = set()

    def start(self) -> IcebergJava:
        started = time.monotonic()
        python = iceberg_java_python()
        settings = {**self.settings, "jars": [str(j) for j in iceberg_java_jars()]}
        env = {k: v for k, v in os.environ.items() if k not in _OURS}
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                [str(python), str(SPARK_SIDE), json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.workdir,  # Spark's own spark-warehouse and such land here
                env=env,
                start_new_session=True,
            )
        try:
            ready = self._answer(self.startup_timeout)["ready"]
        except BaseException:
            self.stop()
            raise
        self.spark_version, self.app_id = ready["spark"], ready["app_id"]
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """End the process: asked to (Spark stops), then by signal if it will not."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(b"\n")
            process.stdin.close()
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        stop_process_group(process)
        process.stdout.close()

    def __enter__(self) -> IcebergJava:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def attach(self, catalog: str, warehouse: Path) -> None:
        """Iceberg's `JdbcCatalog` `catalog` on `<warehouse>/catalog.db`: the catalog that
        icecore's `SqlCatalog(catalog, None, warehouse)` is (the same name: catalog rows are
        keyed by it). Java makes the file, so attach before icecore opens it.

        Why: Iceberg 1.10's `JdbcCatalog`, when it starts on a database that has its tables,
        leaves two metadata queries open on a pooled connection (`DatabaseMetaData.getTables`
        and `getColumns`, never closed). On SQLite an open query pins that connection's read
        snapshot, so once another connection writes (icecore's commit, or Java's other pooled
        connection), every commit through it fails with SQLITE_BUSY_SNAPSHOT, for good. On a
        new file the queries find nothing and end: no snapshot is held.
        """
        db = warehouse / SQLITE_FILE
        if catalog in self._catalogs:
            raise ValueError(f"catalog {catalog!r} is attached already (Spark loads it once)")
        if db.exists():
            raise ValueError(
                f"{db} exists: attach Iceberg Java before icecore opens it (Iceberg 1.10's "
                "JdbcCatalog would pin a stale SQLite snapshot: see IcebergJava.attach)"
            )
        warehouse.mkdir(parents=True, exist_ok=True)
        self.request("attach", catalog=catalog, db=str(db), warehouse=str(warehouse))
        self._catalogs.add(catalog)

    def create_table(
        self,
        identifier: str,
        *,
        format_version: int,
        files: int,
        rows_per_file: int,
        partitions: int,
    ) -> JavaTable:
        """A merge-on-read table written by Spark (see spark_side.py): on v2 its deletes are
        partition-scoped position delete files, on v3 deletion vectors."""
        answer = self.request(
            "create_table",
            table=identifier,
            format_version=format_version,
            files=files,
            rows_per_file=rows_per_file,
            partitions=partitions,
        )
        return JavaTable(identifier, files, rows_per_file, partitions, answer["snapshot_id"])

    def delete(self, table: str, keys: Sequence[int], column: str = "id") -> DeleteOutcome:
        """One merge-on-read `DELETE ... WHERE column IN (keys)`: what it committed, or the
        exception Java raised."""
        started = time.monotonic()
        answer = self.request("delete", table=table, column=column, keys=list(keys))
        seconds = time.monotonic() - started
        error = answer.get("error")
        return DeleteOutcome(
            keys=tuple(keys),
            started=started,
            seconds=seconds,
            snapshot_id=answer.get("snapshot_id"),
            error=JavaError.of(error) if error else None,
        )

    def sql(self, sql: str) -> list[list[Any]]:
        return list(self.request("sql", sql=sql)["rows"])

    def request(self, op: str, **arguments: Any) -> dict[str, Any]:
        with self._lock:
            process = self._process
            if process is None or process.stdin is None:
                raise RuntimeError("Iceberg Java is not running: start() it first")
            process.stdin.write(json.dumps({"op": op, **arguments}).encode() + b"\n")
            process.stdin.flush()
            answer = self._answer(timeout=600)
        if "failed" in answer:
            raise RuntimeError(f"Iceberg Java: {op} failed: {JavaError.of(answer['failed'])}")
        return answer

    def _answer(self, timeout: float) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else b""
        if not line:
            why = "exited" if process.poll() is not None else f"did not answer in {timeout:.0f} s"
            raise RuntimeError(f"Iceberg Java {why}; the end of {self.log}:\n{self.log_tail()}")
        return dict(json.loads(line))

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
