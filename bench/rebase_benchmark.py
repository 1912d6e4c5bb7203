"""What rebasing concurrent deletes costs a compaction (issue 36), measured two ways.

1. **The job** (`--part job`): on Iceberg Java's position-deleted twin
   (`iceberg_java_benchmark.py`'s Java side builds it: bucket(4, id), 100 data files, Spark SQL's
   merge-on-read DELETE of 10% and UPDATE of 1%), our `rewrite_data_files --rewrite-all` runs
   twice per round on fresh copies (a copy of the built catalog file per run: a compaction
   only adds files), after an untimed warm-up job:
   (a) nothing commits meanwhile; (b) in the job's `before_commit` a writer makes `--commits`
   commits that together delete `--deleted` live rows of the files being replaced, as a
   merge-on-read engine writes them: file-scoped position delete files on v2 (Iceberg Java's
   default `write.delete.granularity=file`), on v3 a DV per data file holding its earlier
   deletes and replacing its earlier DV. The twin's Java-written copy is upgraded to v3 for the
   DV variant. The job runs in process on one local SparkSession (as the tests run it), because
   `before_commit` is a Python hook and a warm session keeps Spark's start-up out of both sides;
   a spark-submit's fixed cost would only dilute the ratio. The writer's own time (inside the
   hook) is timed and subtracted from (b); the commit phase (the hook's return to the job's)
   and the rebase step in it (`RewriteFiles._rebase_onto_new_files`, wrapped in a timer) are
   timed too, since at a shared machine's noise the whole job's ratio cannot resolve a few
   percent. Rows are checked with DuckDB after every run (count, sum(id), sum(amount) against
   the rows before less the victims).
2. **The maps** (`--part maps`), synthetic, `--map-rows` rows (20M) in 100 input files of 4
   groups: the bin-pack's `SegmentMap`, built by one `SegmentRecorder` per bin from 64Ki-row
   batches as `LiveBatches.read` feeds it, its size against the rows deleted and the rows
   rewritten; the sort path's row maps (`write_row_map`: bytes per row, and its write time
   against writing the same rows' data file), and the driver's peak memory while `RowMap.move`
   follows 1,000 concurrent deletes through them; and the recorders of large input files
   (4 of 5M rows). Each memory figure comes from a process of
   its own: tracemalloc (Python and NumPy), Arrow's pool peak, and the rise of the peak RSS.

Every figure is a ratio against a baseline measured in the same run. The last stdout line is
the JSON report; progress goes to stderr.

    .venv/bin/python bench/rebase_benchmark.py --scale 0.25 --rounds 3 --workdir /tmp/rb
    .venv/bin/python bench/rebase_benchmark.py --part maps --map-rows 20000000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from bench.iceberg_java_benchmark import JAVA_SIDE, answer, copy_catalog, log, timed  # noqa: E402
from bench.rebase_maps import measure_maps  # noqa: E402
from icecore.actions.rebased_deletes import PositionDeleteWriter  # noqa: E402
from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.commit.rebase import DeletionVectorWriter  # noqa: E402
from icecore.commit.rewrite import RewriteFiles  # noqa: E402
from icecore.data.arrow_schema import arrow_schema  # noqa: E402
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches  # noqa: E402
from icecore.jobs.jobs import RewriteDataFilesOptions  # noqa: E402
from icecore.spec.manifest import DataFile  # noqa: E402
from icecore.table import Table  # noqa: E402
from spark_jobs.rewrite_data_files import run as rewrite_data_files  # noqa: E402
from tests.support.java_writer.venv import iceberg_java_jars, iceberg_java_python  # noqa: E402
from tests.support.spark import local_session  # noqa: E402

TABLES = {2: "bench.pos_ours", 3: "bench.pos_java"}  # the twin's two copies; the second -> v3


@dataclass
class Victims:
    """The rows the writer deletes, commit by commit, and what the table held before."""

    commits: list[dict[str, np.ndarray]]  # per commit: data file -> positions (ascending)
    files: dict[str, DataFile]  # the data files, as listed before the rewrite
    deleted: dict[str, np.ndarray]  # data file -> positions deleted before the writer
    id_sum: int
    amount_sum: float


@dataclass
class Run:
    """One compaction's times (seconds) and what it did."""

    job_s: float
    writer_s: float = 0.0
    commit_s: float = 0.0  # from `before_commit`'s return to the job's
    rebase_s: float = 0.0  # in the commit's rebase: concurrent deletes found, moved, written
    result: dict[str, Any] = field(default_factory=dict)
    rows_exact: bool = False

    @property
    def own_s(self) -> float:
        """The job's time without the writer's commits (made inside its hook)."""
        return self.job_s - self.writer_s


def choose_victims(table: Table, commits: int, rows: int, seed: int) -> Victims:
    """`rows` live rows of the table's data files, spread over `commits` commits (each
    touching a few files), with their ids and amounts for the expected answer."""
    rnd = random.Random(seed)
    schema = table.metadata.schema()
    files: dict[str, DataFile] = {}
    deleted: dict[str, np.ndarray] = {}
    for task in table.scan().plan_files():
        path = task.file.file_path
        refs = [DeleteRef.of(d) for d in task.deletes]
        reader = LiveBatches(table.io, schema.fields, arrow_schema(schema.fields), refs, [path])
        ref = DataRef(path, 0, 2**62, 0, deletes=tuple(range(len(refs))))
        files[path], deleted[path] = task.file, reader.deleted_positions(ref)
    paths = sorted(files)
    plan: list[dict[str, np.ndarray]] = []
    taken: dict[str, set[int]] = {p: set(deleted[p].tolist()) for p in paths}
    id_sum, amount_sum = 0, 0.0
    per_commit = rows // commits
    for n in range(commits):
        count = per_commit + (1 if n < rows % commits else 0)
        touched = rnd.sample(paths, min(5, len(paths)))
        chosen: dict[str, list[int]] = {p: [] for p in touched}
        for k in range(count):
            path = touched[k % len(touched)]
            while (pos := rnd.randrange(files[path].record_count)) in taken[path]:
                pass
            taken[path].add(pos)
            chosen[path].append(pos)
        commit = {p: np.array(sorted(v), dtype=np.int64) for p, v in chosen.items() if v}
        for path, positions in commit.items():
            with table.io.open_input(path) as source:
                values = pq.read_table(source, columns=["id", "amount"]).take(pa.array(positions))
            id_sum += sum(values.column("id").to_pylist())
            amount_sum += sum(values.column("amount").to_pylist())
        plan.append(commit)
    return Victims(plan, files, deleted, id_sum, amount_sum)


def writer(catalog: SqlCatalog, name: str, victims: Victims, version: int) -> Callable[[], None]:
    """The merge-on-read writer's commits, one after the other through its own catalog."""

    def commit_all() -> None:
        dvs: dict[str, DataFile] = {}  # the DV each data file has now (v3)
        so_far = dict(victims.deleted)
        for commit in victims.commits:
            table = catalog.load_table(name)
            delta = table.new_row_delta()
            if version == 2:
                files = PositionDeleteWriter(table).write(commit, victims.files)
            else:
                merged = {p: np.union1d(so_far[p], positions) for p, positions in commit.items()}
                files = DeletionVectorWriter(table).write(merged, victims.files)
                for path, positions in merged.items():
                    so_far[path] = positions
                    if (old := dvs.get(path)) is not None:
                        delta.remove_deletes(old)
                dvs.update({f.referenced_data_file or "": f for f in files})
            for f in files:
                delta.add_deletes(f)
            delta.validate_data_files_exist(commit).commit()

    return commit_all


@contextlib.contextmanager
def timing_the_rebase() -> Iterator[list[float]]:
    """The seconds each commit attempt spends rebasing (`RewriteFiles`' step that finds the
    concurrent deletes of the replaced files, moves them and writes their delete files)."""
    spent: list[float] = []
    original = RewriteFiles._rebase_onto_new_files

    def timed_rebase(self: RewriteFiles, validator: Any) -> None:
        began = time.perf_counter()
        try:
            original(self, validator)
        finally:
            spent.append(time.perf_counter() - began)

    RewriteFiles._rebase_onto_new_files = timed_rebase  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        RewriteFiles._rebase_onto_new_files = original  # type: ignore[method-assign]


def compact(
    spark: SparkSession, catalog: SqlCatalog, name: str, concurrent: Callable[[], None] | None
) -> Run:
    marks: dict[str, float] = {}

    def before_commit(_: Table) -> None:
        marks["writer"] = time.perf_counter()
        if concurrent is not None:
            concurrent()
        marks["commit"] = time.perf_counter()

    options = RewriteDataFilesOptions(name, rewrite_all=True, max_attempts=1)
    with timing_the_rebase() as rebase:
        started = time.perf_counter()
        result = rewrite_data_files(spark, catalog, options, before_commit=before_commit)
        ended = time.perf_counter()
    return Run(
        job_s=ended - started,
        writer_s=marks["commit"] - marks["writer"],
        commit_s=ended - marks["commit"],
        rebase_s=sum(rebase),
        result=result.to_dict(),
    )


def job_part(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="rebase-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db, built = workdir / "catalog.db", workdir / "catalog.db.built"
    rows = int(20_000_000 * args.scale)
    report: dict[str, Any] = {"scale": args.scale, "rows": rows}
    if not (args.reuse and built.is_file()):
        log(f"building the position-deleted twin with Iceberg Java ({rows:,} rows) in {workdir}")
        shared = {"jars": [str(j) for j in iceberg_java_jars()], "db": str(db),
                  "warehouse": str(workdir / "wh"), "workdir": str(workdir), "rows": rows,
                  "twins": ["pos"]}  # fmt: skip
        report["build_s"] = round(
            timed([str(iceberg_java_python()), str(JAVA_SIDE), "build", json.dumps(shared)]), 1
        )
        catalog = SqlCatalog("lake", f"sqlite:///{db}")
        catalog.load_table(TABLES[3]).update_properties().set("format-version", "3").commit()
        copy_catalog(db, built)

    copies = iter(range(1_000_000))

    def fresh() -> tuple[SqlCatalog, str]:
        """A catalog on a copy of the built one: a file of its own, since connections to
        earlier copies stay open in their engines' pools."""
        path = workdir / "runs" / f"catalog-{next(copies)}.db"
        path.parent.mkdir(exist_ok=True)
        copy_catalog(built, path)
        return SqlCatalog("lake", f"sqlite:///{path}"), f"sqlite:///{path}"

    spark = local_session("rebase-benchmark")
    versions = [int(v) for v in args.versions.split(",")]
    for version in versions:
        name = TABLES[version]
        catalog, _ = fresh()
        before = answer(catalog, name)
        victims = choose_victims(catalog.load_table(name), args.commits, args.deleted, seed=36)
        expected = (before[0] - args.deleted, before[1] - victims.id_sum)
        runs: dict[str, list[Run]] = {"baseline": [], "rebase": []}
        files = len(victims.files)
        log(f"v{version}: {before[0]:,} rows in {files} data files; {args.rounds} rounds")
        # Not counted: the first job of a session pays the Python workers' start and imports.
        compact(spark, fresh()[0], name, None)
        for n in range(args.rounds):
            # Alternate which side goes first, so a trend in the machine's load hits both.
            order = ("baseline", "rebase") if n % 2 == 0 else ("rebase", "baseline")
            for side in order:
                catalog, uri = fresh()
                concurrent = None
                if side == "rebase":
                    other = SqlCatalog("lake", uri)
                    concurrent = writer(other, name, victims, version)
                done = compact(spark, catalog, name, concurrent)
                got = answer(catalog, name)
                want = expected if side == "rebase" else before[:2]
                done.rows_exact = got[:2] == want and (
                    side == "baseline" or abs(got[2] - (before[2] - victims.amount_sum)) < 1e-3
                )
                runs[side].append(done)
                log(
                    f"v{version} round {n + 1} {side}: job {done.job_s:.2f} s, writer "
                    f"{done.writer_s:.2f} s, commit {done.commit_s:.2f} s (rebase "
                    f"{done.rebase_s:.3f} s), rebased "
                    f"{done.result.get('rebased_rows')} rows of "
                    f"{done.result.get('rebased_commits')} commits, exact {done.rows_exact}"
                )
        report[f"v{version}"] = summarize(runs, load=os.getloadavg()[0])
    spark.stop()
    shutil.rmtree(workdir / "runs", ignore_errors=True)
    return report


def summarize(runs: dict[str, list[Run]], load: float) -> dict[str, Any]:
    base, rebase = runs["baseline"], runs["rebase"]
    ratios = [r.own_s / b.job_s for b, r in zip(base, rebase, strict=True)]
    median_base = statistics.median(b.job_s for b in base)
    added = [r.commit_s - b.commit_s for b, r in zip(base, rebase, strict=True)]
    return {
        "baseline_job_s": [round(b.job_s, 2) for b in base],
        "rebase_job_s": [round(r.job_s, 2) for r in rebase],
        "rebase_writer_s": [round(r.writer_s, 2) for r in rebase],
        "baseline_commit_s": [round(b.commit_s, 3) for b in base],
        "rebase_commit_s": [round(r.commit_s, 3) for r in rebase],
        "rebase_step_s": [round(r.rebase_s, 3) for r in rebase],
        "rebase_step_over_job": round(
            statistics.median(r.rebase_s for r in rebase) / median_base, 4
        ),
        # (b) without the writer's time over (a), round by round, and their median.
        "ratio_per_round": [round(x, 3) for x in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        # What the commit phase gained, over the baseline's whole job (medians).
        "commit_added_s_median": round(statistics.median(added), 3),
        "commit_added_over_job": round(statistics.median(added) / median_base, 4),
        "rebased_rows": [r.result.get("rebased_rows") for r in rebase],
        "rebased_commits": [r.result.get("rebased_commits") for r in rebase],
        "attempts": [r.result.get("attempts") for r in (*base, *rebase)],
        "rows_exact": all(r.rows_exact for r in (*base, *rebase)),
        "load_average_at_end": load,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", choices=("job", "maps", "both"), default="both")
    parser.add_argument("--scale", type=float, default=0.25, help="of the twin's 20M rows")
    parser.add_argument("--workdir", help="keep the twin here (default: a temporary dir)")
    parser.add_argument("--reuse", action="store_true", help="reuse the twin in --workdir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--versions", default="2,3", help="format versions: 2, 3 or 2,3")
    parser.add_argument("--commits", type=int, default=20, help="the writer's commits")
    parser.add_argument("--deleted", type=int, default=1000, help="rows they delete in all")
    parser.add_argument("--map-rows", type=int, default=20_000_000)
    args = parser.parse_args()
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load_average_at_start": os.getloadavg()}  # fmt: skip
    if args.part in ("maps", "both"):
        report["maps"] = measure_maps(args.map_rows)
        log(json.dumps(report["maps"]))
    if args.part in ("job", "both"):
        report["job"] = job_part(args)
    report["load_average_at_end"] = os.getloadavg()
    print(json.dumps(report))


if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    main()
