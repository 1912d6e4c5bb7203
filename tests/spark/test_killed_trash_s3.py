"""A job killed with SIGKILL while it moves files into the trash on S3 loses none of them.

On S3 a move is a server-side copy, then the source's delete (in `DeleteObjects` batches once
the copies are done). The orphan removal runs in a process of its own (as the operators run
it; no Spark is needed for a hundred files) through the throttle proxy in front of moto,
which holds its 40th copy into the trash (`ThrottleProxy.hold`): the job is killed while it
waits on that request, with some files copied and none of their sources deleted yet. Nothing
is timed.

Then: the run's record is on the store, naming every orphan; each file is in place, in the
trash, or both, never neither, every byte intact; the next run takes them all into the trash,
and `icefloe restore --orphans` puts every one back, whichever run's copy it finds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.argv import CATALOG_PROPERTIES_ENV
from icecore.jobs.jobs import RemoveOrphanFilesOptions
from icecore.trash import Trash
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from tests.support.committing import SCHEMA
from tests.support.killing import kill_once_written
from tests.support.objectstores import ObjectStore
from tests.support.throttle_proxy import Request, ThrottleProxy

ROOT = Path(__file__).resolve().parents[2]
TABLE = "db.t"
ORPHANS = 100
HELD_COPY = 40
NO_CUTOFF = ["--older-than", "2100-01-01T00:00:00", "--force"]


def test_a_job_killed_while_moving_leaves_every_file_somewhere(
    spark: SparkSession,
    s3_store: ObjectStore,
    held_s3_proxy: tuple[ObjectStore, ThrottleProxy],
    tmp_path: Path,
) -> None:
    proxied, throttle = held_s3_proxy
    root = s3_store.new_bucket()
    uri = f"sqlite:///{tmp_path}/catalog.db"
    catalog = SqlCatalog("default", uri=uri, warehouse=f"{root}/wh", properties=s3_store.properties)
    try:
        catalog.create_namespace("db")
        table = catalog.create_table(TABLE, SCHEMA)
        location = table.metadata.location
        orphans = {
            f"{location}/data/stray-{i:03d}.parquet": os.urandom(64 + i) for i in range(ORPHANS)
        }
        for path, data in orphans.items():
            table.io.write_bytes(path, data)

        copies = 0

        def copy_into_trash(request: Request) -> bool:
            nonlocal copies
            if (
                request.method == "PUT"
                and "/.icefloe-trash/" in request.path
                and "/files/" in request.path
            ):
                copies += 1
                return copies >= HELD_COPY
            return False

        throttle.hold(copy_into_trash)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            CATALOG_PROPERTIES_ENV: json.dumps(proxied.properties),
        }
        command = [
            sys.executable, "-m", "spark_jobs", "remove_orphan_files",
            "--catalog-uri", uri, "--warehouse", f"{root}/wh", "--table", TABLE,
            "--executor-delete-threshold", "100000", "--max-concurrent-deletes", "4",
            *NO_CUTOFF,
        ]  # fmt: skip
        job = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        kill_once_written(job, throttle.held.is_set, f"its {HELD_COPY}th copy", timeout=120)
        throttle.release()

        trash = Trash.of(catalog.load_table(TABLE))
        records, done, problems = trash.records()
        [record] = records.values()
        assert problems == [] and done == set()  # killed: the run never finished
        assert {e.path for e in record.entries} == set(orphans)
        in_trash = {f.path: f for f in trash.contents(records)}
        assert HELD_COPY - 1 - 4 <= len(in_trash) < ORPHANS  # the held copy and its peers wait
        for path, data in orphans.items():
            places = [p for p in (path, in_trash[path].trash if path in in_trash else None) if p]
            found = [p for p in places if table.io.exists(p)]
            assert found, f"{path} is nowhere"
            assert all(table.io.read_bytes(p) == data for p in found)

        # The next run takes every orphan (those the killed run copied get a second copy).
        options = RemoveOrphanFilesOptions(TABLE, older_than="2100-01-01T00:00:00", force=True)
        result = remove_orphan_files(spark, catalog, options)
        assert result.deleted_files_count == ORPHANS and result.failed_deletes_count == 0
        assert not any(table.io.exists(p) for p in orphans)

        icefloe = Path(sys.executable).parent / "icefloe"
        flags = [f"--catalog-property={k}={v}" for k, v in s3_store.properties.items()]
        restore = subprocess.run(
            [str(icefloe), "restore", TABLE, "--orphans", "--json", "--catalog-uri", uri, *flags],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        )
        assert restore.returncode == 0, restore.stderr
        outcome = json.loads(restore.stdout)
        assert len(outcome["restored_files"]) == ORPHANS and outcome["conflicts"] == {}
        assert all(table.io.read_bytes(p) == data for p, data in orphans.items())
        assert Trash.of(catalog.load_table(TABLE)).contents() == []
    finally:
        catalog.close()
