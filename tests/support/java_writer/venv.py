"""Where Iceberg Java runs as users run it: Spark 3.5 with `iceberg-spark-runtime-3.5` 1.10.2.

Our own virtualenv has PySpark 4 (requirements.txt), for which Iceberg 1.10 has no runtime, so
Spark 3.5.9 lives in a virtualenv of its own, `.cache/iceberg-java-venv` (git-ignored), which
the Java writer of the tests (`tests/support/java_writer`) and the Iceberg Java benchmarks
(`bench/iceberg_java_benchmark.py`, `bench/connect_benchmark.py`) share. It is made on first
use from PyPI (`make test` makes it before pytest starts: the Makefile's `iceberg-java`), and
made again when its pins or its Python's version change: the pins are written into it last, so
a half-made one (an interrupted pip) is never taken for done.

The jars beside it are the REST test server's (`tests/support/rest_server`): the runtime jar
from PyPI's `snowpark-connect-deps-iceberg`, Jackson relocated as that jar expects, Debian's
SQLite JDBC driver for the `JdbcCatalog` that shares icecore's `SqlCatalog` file.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..rest_server import (
    ICEBERG_DIST,
    ICEBERG_RUNTIME_JAR,
    ROOT,
    jdbc_driver,
    package_jars,
    relocated_jackson,
)

VENV = ROOT / ".cache" / "iceberg-java-venv"
# Spark 3.5.9's Python side (it carries Spark's jars); pyarrow for the benchmark's equality
# deletes (bench/iceberg_java/java_side.py).
PINS = ("pyspark==3.5.9", "pyarrow==26.0.1")
_STAMP = VENV / "icefloe-pins.txt"
_LOCK = VENV.with_name("iceberg-java-venv.lock")


def _wanted() -> str:
    python = ".".join(map(str, sys.version_info[:2]))
    return "\n".join((f"python=={python}", *PINS)) + "\n"


def iceberg_java_python() -> Path:
    """The Python of the Spark 3.5 virtualenv, made (minutes: PySpark 3.5.9 is a 317 MB
    source archive) when missing or made for other pins; one maker at a time (a file lock)."""
    python = VENV / "bin" / "python"
    wanted = _wanted()
    if _STAMP.is_file() and _STAMP.read_text() == wanted:
        return python
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _STAMP.is_file() and _STAMP.read_text() == wanted:
            return python  # another session made it while this one waited
        started = time.monotonic()
        print(f"pip: making {VENV} ({', '.join(PINS)})", file=sys.stderr, flush=True)
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--progress-bar", "off", *PINS],
            stdout=sys.stderr,  # pip's few lines say what the minutes go to
            check=True,
            timeout=1800,
        )
        _STAMP.write_text(wanted)
        print(f"pip: {VENV} made in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return python


def iceberg_java_jars() -> list[Path]:
    """Spark 3.5's extra jars for Iceberg Java on a JDBC catalog over SQLite."""
    return [
        *package_jars(ICEBERG_DIST, [ICEBERG_RUNTIME_JAR]),
        relocated_jackson(),
        jdbc_driver("sqlite"),
    ]
