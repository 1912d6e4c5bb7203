"""The zip that ships `icecore` and `spark_jobs` to a cluster: `--py-files` for spark-submit,
a session artifact for Spark Connect (`spark_jobs.common.session.ship_packages`).

    python -m spark_jobs.common.packaging dist/icefloe.zip
    spark-submit --py-files dist/icefloe.zip spark_jobs/main.py <job> --warehouse ... --table ...

Only these two pure-Python packages go into the zip; their dependencies with compiled code
(pyarrow, fastavro, SQLAlchemy, numpy, pandas) must be installed in the cluster's Python.

Next to each source file the zip holds its bytecode, compiled by the Python that builds it
(unchecked-hash `.pyc`: a zip's files never change under it). Python imports from a zip
without writing bytecode anywhere, so without it every new Python worker compiles the two
packages again: about 0.4 s of each Spark Connect session's first task. A worker on another
Python version finds the magic number wrong and compiles the source instead.

Standard library only: the Airflow operators build the zip too (tests/test_layering.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("icecore", "spark_jobs")
ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "ICEFLOE_CACHE_DIR"
_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, not checked against the source


def _sources() -> list[Path]:
    return [source for package in PACKAGES for source in sorted((ROOT / package).rglob("*.py"))]


def _bytecode(source: bytes, name: str) -> bytes:
    """`source` compiled as an unchecked hash-based `.pyc` of this interpreter."""
    code = compile(source, name, "exec", dont_inherit=True)
    return (
        importlib.util.MAGIC_NUMBER
        + _UNCHECKED_HASH.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def build_zip(destination: str | Path) -> Path:
    """Write the zip (replacing an older one) and return its path."""
    target = Path(destination)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in _sources():
            name = source.relative_to(ROOT).as_posix()
            data = source.read_bytes()
            archive.writestr(name, data)
            archive.writestr(name + "c", _bytecode(data, name))
    return target


def cache_directory() -> Path:
    """Where built zips are kept: `$ICEFLOE_CACHE_DIR`, else a directory of this user's in
    the system's temporary directory."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured or Path(tempfile.gettempdir()) / f"icefloe-{os.getuid()}")


def cached_zip(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The zip, rebuilt only when a source changes.

    Its name carries a digest of the sources' paths and contents and of the Python that
    compiles them, so concurrent runs share one file, an edited checkout gets a new one, and
    machines with the same code name it alike (Spark Connect jobs share a server session per
    name: `spark_jobs.common.connect`); it is written under a temporary name and renamed, so
    no run ever ships a half-written zip."""
    directory = Path(cache_dir) if cache_dir is not None else cache_directory()
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for source in _sources():
        digest.update(f"{source.relative_to(ROOT)}\0".encode())
        digest.update(hashlib.sha256(source.read_bytes()).digest())
    target = directory / f"icefloe-{digest.hexdigest()[:16]}.zip"
    if not target.is_file():
        partial = build_zip(directory / f".{target.name}.{os.getpid()}.tmp")
        os.replace(partial, target)
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m spark_jobs.common.packaging OUTPUT.zip", file=sys.stderr)
        return 2
    print(build_zip(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
