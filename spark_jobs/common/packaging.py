"""Build the zip that ships `icecore` and `spark_jobs` to a cluster with `--py-files`.

    python -m spark_jobs.common.packaging dist/icefloe.zip
    spark-submit --py-files dist/icefloe.zip spark_jobs/ingest.py --warehouse ... --table ...

Only these two pure-Python packages go into the zip; their dependencies with compiled code
(pyarrow, fastavro, SQLAlchemy, numpy, pandas) must be installed in the cluster's Python.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

PACKAGES = ("icecore", "spark_jobs")
ROOT = Path(__file__).resolve().parents[2]


def build_zip(destination: str | Path) -> Path:
    """Write the zip (replacing an older one) and return its path."""
    target = Path(destination)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for source in sorted((ROOT / package).rglob("*.py")):
                archive.write(source, source.relative_to(ROOT).as_posix())
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
