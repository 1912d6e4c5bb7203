"""Builds and starts `IcefloeRestServer.java`: Apache Iceberg's REST catalog request handlers
(`org.apache.iceberg.rest.CatalogHandlers`) over a `JdbcCatalog`, on the JDK's HTTP server.

What it runs on, all found or made here, cached under `.cache/rest_server/` (git-ignored):

- Iceberg 1.10.2: `iceberg-spark-runtime-3.5_2.12-1.10.2.jar` from the PyPI package
  `snowpark-connect-deps-iceberg` (requirements-test.txt); when that package is not installed,
  its wheel is fetched with `pip download --no-deps` and the jar taken out of it.
- Jackson 2.18, relocated to `org.apache.iceberg.shaded.com.fasterxml.jackson` as the runtime
  jar expects (it leaves Jackson out): from `snowpark-connect-deps-2`, the same way, rewritten
  by `relocate.py` into one jar once per cache key.
- Hadoop (`HadoopFileIO`, the default FileIO of `JdbcCatalog`) and SLF4J: PySpark's jars.
- The JDBC drivers: Debian's `libxerial-sqlite-jdbc-java` and `libpostgresql-jdbc-java`.
- The adapter itself: compiled with `javac` once per hash of its source and class path.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .relocate import relocate_jars

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CACHE = ROOT / ".cache" / "rest_server"
SOURCE = HERE / "IcefloeRestServer.java"
MAIN_CLASS = "org.apache.iceberg.rest.IcefloeRestServer"

ICEBERG_DIST = ("snowpark-connect-deps-iceberg", "1.0.3", "snowpark_connect_deps_iceberg")
ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JACKSON_DIST = ("snowpark-connect-deps-2", "3.56.7", "snowpark_connect_deps_2")
JACKSON_VERSION = "2.18.8"
JACKSON_JARS = tuple(
    f"jackson-{part}-{JACKSON_VERSION}.jar" for part in ("core", "databind", "annotations")
)
# From PySpark's jars/ (version-free prefixes; PySpark pins the versions).
PYSPARK_JAR_PREFIXES = ("hadoop-client-api-", "hadoop-client-runtime-", "slf4j-api-")
JDBC_DRIVERS = {
    "sqlite": Path("/usr/share/java/sqlite-jdbc.jar"),
    "postgresql": Path("/usr/share/java/postgresql.jar"),
}
DEBIAN_PACKAGES = "openjdk-17-jdk-headless libxerial-sqlite-jdbc-java libpostgresql-jdbc-java"
# Start-up flags for a short-lived test server: C1 only and a small serial heap start fastest.
# SLF4J has no provider here (Iceberg's log lines are dropped): keep its notice about that quiet.
JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xmx512m",
    "-Dslf4j.internal.verbosity=ERROR",
    # TCP_NODELAY: the JDK server writes headers and body apart, and Nagle's algorithm would
    # then hold the body until the client's delayed ACK (~40 ms per response).
    "-Dsun.net.httpserver.nodelay=true",
)


class SetupError(RuntimeError):
    """Something the server needs is missing; the message says how to install it."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SetupError(f"`{name}` is needed for the REST catalog server: {_apt_hint()}")
    return found


def _apt_hint() -> str:
    return f"apt-get install -y {DEBIAN_PACKAGES}"


def _digest(*parts: bytes | str) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() if isinstance(part, str) else part)
        sha.update(b"\0")
    return sha.hexdigest()[:16]


def _atomic_write(target: Path, write: Callable[[Path], None]) -> Path:
    """`write(tmp)` then rename into place: parallel sessions never see half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def package_jars(dist: tuple[str, str, str], names: Sequence[str]) -> list[Path]:
    """The jars `names` of a `snowpark-connect-deps-*` package: from the installed package when
    it is the pinned version, else out of its wheel, fetched into the cache."""
    project, version, module = dist
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations:
        jars_dir = Path(next(iter(spec.submodule_search_locations))) / "jars"
        found = [jars_dir / name for name in names]
        if all(path.is_file() for path in found):
            return found
    target_dir = CACHE / "jars"
    found = [target_dir / name for name in names]
    if all(path.is_file() for path in found):
        return found
    wheels = CACHE / "wheels"
    wheel = wheels / f"{module}-{version}-py3-none-any.whl"
    if not wheel.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--ignore-requires-python",  # jars: any Python will do
             f"{project}=={version}", "--dest", str(wheels)],
            check=True,
            timeout=900,
        )  # fmt: skip
    with zipfile.ZipFile(wheel) as archive:
        for name, path in zip(names, found, strict=True):
            data = archive.read(f"{module}/jars/{name}")
            _atomic_write(path, lambda tmp, data=data: tmp.write_bytes(data))
    return found


def relocated_jackson() -> Path:
    """Jackson 2.18 relocated under Iceberg's shaded package, built once per cache key."""
    sources = package_jars(JACKSON_DIST, JACKSON_JARS)
    key = _digest(
        (HERE / "relocate.py").read_bytes(), *(f"{p.name}:{p.stat().st_size}" for p in sources)
    )
    target = CACHE / f"jackson-{JACKSON_VERSION}-relocated-{key}.jar"
    if not target.is_file():
        _atomic_write(target, lambda tmp: relocate_jars(sources, tmp))
    return target


def pyspark_jars() -> list[Path]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError("PySpark (requirements.txt) provides the Hadoop jars; it is not installed")
    jars_dir = Path(next(iter(spec.submodule_search_locations))) / "jars"
    found = []
    for prefix in PYSPARK_JAR_PREFIXES:
        matches = sorted(jars_dir.glob(f"{prefix}[0-9]*.jar"))
        if not matches:
            raise SetupError(f"no {prefix}*.jar in {jars_dir}")
        found.append(matches[-1])
    return found


def jdbc_driver(backend: str) -> Path:
    driver = JDBC_DRIVERS[backend]
    if not driver.is_file():
        raise SetupError(f"{driver} (the {backend} JDBC driver) is missing: {_apt_hint()}")
    return driver


def runtime_classpath(extra: Sequence[Path] = ()) -> list[Path]:
    """Everything but the adapter's own classes."""
    return [
        *package_jars(ICEBERG_DIST, [ICEBERG_RUNTIME_JAR]),
        relocated_jackson(),
        *pyspark_jars(),
        *(jdbc_driver(backend) for backend in JDBC_DRIVERS),
        *extra,
    ]


def compiled_classes(classpath: Sequence[Path], source_file: Path = SOURCE) -> Path:
    """A Java source (the adapter by default) compiled against `classpath`, once per hash of
    the source and jar names."""
    source = source_file.read_bytes()
    key = _digest(source, *(path.name for path in classpath))
    target = CACHE / f"classes-{key}"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(dir=CACHE, prefix=".classes-"))
    try:
        result = subprocess.run(
            [_tool("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(build),
             "-cp", os.pathsep.join(map(str, classpath)), str(source_file)],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        if result.returncode != 0:
            raise SetupError(f"javac failed on {source_file.name}:\n{result.stdout}{result.stderr}")
        build.chmod(0o755)
        with contextlib.suppress(OSError):  # another session got there first: use theirs
            build.rename(target)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target


def server_classpath(extra: Sequence[Path] = ()) -> list[Path]:
    """The full class path of the server, building whatever the cache lacks."""
    runtime = runtime_classpath(extra)
    return [compiled_classes(runtime), *runtime]


@dataclass
class ServerProcess:
    """A running server: its JVM process, port and log (stdout and stderr)."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    startup_seconds: float

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        stop_process_group(self.process)
        if self.process.stdin is not None:
            self.process.stdin.close()


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """End a process started with `start_new_session=True` and every process it started
    (a JVM's children, a driver's JVM): SIGTERM, then SIGKILL after `timeout` seconds."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def start_server(
    config: dict[str, object],
    workdir: Path,
    classpath: Sequence[Path],
    *,
    timeout: float = 60.0,
) -> ServerProcess:
    """Start the server with `config` (see IcefloeRestServer.java) on 127.0.0.1 and a port the
    OS picks; return once it listens. On failure, the log's tail is in the exception."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "rest-server.port"
    ready.unlink(missing_ok=True)
    config_file = workdir / "rest-server.json"
    settings = {
        "host": "127.0.0.1",
        "port": 0,
        **config,
        "ready_file": str(ready),
        "exit_on_stdin_eof": True,  # stdin is a pipe from this process: no orphaned servers
    }
    config_file.write_text(json.dumps(settings))
    log = workdir / "rest-server.log"
    command = [
        _tool("java"), *JVM_OPTIONS, "-cp", os.pathsep.join(map(str, classpath)),
        MAIN_CLASS, "--config", str(config_file),
    ]  # fmt: skip
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ServerProcess(process, 0, log, 0.0)
    deadline = started + timeout
    while not ready.is_file():
        if process.poll() is not None:
            raise RuntimeError(
                f"the REST catalog server exited with {process.returncode} before listening; "
                f"the end of {log}:\n{server.log_tail()}"
            )
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(
                f"the REST catalog server did not listen within {timeout:.0f} s; "
                f"the end of {log}:\n{server.log_tail()}"
            )
        time.sleep(0.02)
    server.port = int(ready.read_text())
    server.startup_seconds = time.monotonic() - started
    return server
