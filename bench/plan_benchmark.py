"""Scan planning, icecore against PyIceberg, on a 2,000-manifest / 550,000-file v2 table.

The bar (from the issue): icecore plans at least 3x faster than PyIceberg's `plan_files`, with
a peak RSS no higher. Each plan runs in a fresh subprocess so that its peak RSS is its own,
and runs alternate between the planners so that a noisy neighbour hurts both alike.

Before any timing, each planner plans once more with a digest of every (data file, sorted
delete files) pair, compared with the digest the generator's oracle computed from what it
wrote: a fast wrong answer is worthless. Timed runs count tasks and pairs only, and those
counts must match too.

    python bench/plan_benchmark.py                 # the issue's table (generated once, cached)
    python bench/plan_benchmark.py --scale 0.02    # a quick smoke run

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PLANNERS = ("icecore", "pyiceberg")
SPEEDUP_BAR = 3.0


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM), in MiB.

    Not `getrusage().ru_maxrss`: Linux carries that across execve, so a child would report at
    least its parent's peak (here, the table generator's).
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    raise SystemExit("no VmHWM in /proc/self/status: peak RSS needs Linux")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# Child: one plan by one planner ---------------------------------------------------------


def _plan_icecore(metadata: str, ref: str, tally: Any) -> tuple[int, int]:
    from icecore.io import FileIO  # noqa: PLC0415 - imports are part of what a child measures
    from icecore.scan import TableScan  # noqa: PLC0415
    from icecore.spec.metadata import read_table_metadata  # noqa: PLC0415

    io = FileIO()
    scan = TableScan(io, read_table_metadata(io, metadata), ref=ref)
    tasks = pairs = 0
    for task in scan.plan_files():
        tasks += 1
        pairs += len(task.deletes)
        if tally is not None:
            tally.add(task.file.file_path, [d.file_path for d in task.deletes])
    return tasks, pairs


def _plan_pyiceberg(metadata: str, ref: str, tally: Any) -> tuple[int, int]:
    from pyiceberg.table import StaticTable  # noqa: PLC0415

    table = StaticTable.from_metadata(metadata)
    snapshot = table.snapshot_by_name(ref)
    if snapshot is None:
        raise SystemExit(f"PyIceberg finds no ref {ref!r} in {metadata}")
    tasks = pairs = 0
    for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
        tasks += 1
        pairs += len(task.delete_files)
        if tally is not None:
            tally.add(task.file.file_path, [d.file_path for d in task.delete_files])
    return tasks, pairs


def _loaded_icecore_digest() -> str:
    """Which icecore this process ran: a hash of the icecore modules it imported (the repo
    may have no commits to name, and icecore may be edited while a benchmark runs)."""
    root = REPO / "icecore"
    files = sorted(
        Path(m.__file__)
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and Path(m.__file__).is_relative_to(root)
    )
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def child(planner: str, metadata: str, ref: str, verify: bool) -> dict[str, Any]:
    """Plan once and describe it; run in a fresh interpreter by `run_child`."""
    from digest import Tally  # noqa: PLC0415 - stdlib only, loaded alike for both planners

    start = time.perf_counter()
    if planner == "icecore":
        sys.path.insert(0, str(REPO))
        import icecore.scan  # noqa: F401, PLC0415
    else:
        import pyiceberg.table  # noqa: F401, PLC0415
    import_seconds = time.perf_counter() - start
    rss_after_import = _peak_rss_mb()

    tally = Tally() if verify else None
    plan = _plan_icecore if planner == "icecore" else _plan_pyiceberg
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    tasks, pairs = plan(metadata, ref, tally)
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    out: dict[str, Any] = {
        "planner": planner,
        "ref": ref,
        "verify": verify,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "import_seconds": round(import_seconds, 3),
        "tasks": tasks,
        "pairs": pairs,
        "rss_after_import_mb": round(rss_after_import, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }
    if tally is not None:
        out["digest"] = tally.result()["digest"]
    if planner == "icecore":
        out["icecore_sources"] = _loaded_icecore_digest()
    return out


class ChildFailed(Exception):
    """A planner crashed; its stderr tail is the message."""


def run_child(planner: str, metadata: str, ref: str, verify: bool) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "child", planner, metadata, ref]
    if verify:
        command.append("--verify")
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ChildFailed(f"{planner} on {ref} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Parent: generate, verify, time, report -------------------------------------------------


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _check(result: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    return [
        f"{result['planner']} on {result['ref']}: {key} {result[key]} != expected {expected[key]}"
        for key in ("tasks", "pairs", "digest")
        if key in result and result[key] != expected[key]
    ]


def verify(metadata: str, info: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Plan `main` with both planners and `cdc` with icecore alone, digests on.

    PyIceberg 0.12 raises on equality deletes, so it cannot plan `cdc`.
    """
    runs, problems = [], []
    for planner, ref in (("icecore", "main"), ("pyiceberg", "main"), ("icecore", "cdc")):
        result = run_child(planner, metadata, ref, verify=True)
        runs.append(result)
        found = _check(result, info[ref]["expected"])
        problems += found
        _log(
            f"verify {planner:9} {ref:4}: {result['tasks']} tasks, {result['pairs']} pairs, "
            f"{result['seconds']:.1f}s: {'OK' if not found else 'MISMATCH'}"
        )
    return runs, problems


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def measure(metadata: str, repeat: int, expected: dict[str, Any]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in PLANNERS}
    problems: list[str] = []
    for i in range(repeat):
        for planner in PLANNERS:
            result = run_child(planner, metadata, "main", verify=False)
            problems += _check(result, expected)
            runs[planner].append(result)
            _log(
                f"run {i + 1}/{repeat} {planner:9}: {result['seconds']:.2f}s wall, "
                f"{result['cpu_seconds']:.2f}s cpu, peak RSS {result['peak_rss_mb']:.0f} MB"
            )
    summary = {
        planner: {
            "median_seconds": _median(rs, "seconds"),
            "median_cpu_seconds": _median(rs, "cpu_seconds"),
            "median_peak_rss_mb": _median(rs, "peak_rss_mb"),
            "median_rss_after_import_mb": _median(rs, "rss_after_import_mb"),
            "median_import_seconds": _median(rs, "import_seconds"),
            "runs": rs,
        }
        for planner, rs in runs.items()
    }
    ice, py = summary["icecore"], summary["pyiceberg"]
    paired = [
        round(p["seconds"] / i["seconds"], 2)
        for i, p in zip(runs["icecore"], runs["pyiceberg"], strict=True)
    ]
    speedup = py["median_seconds"] / ice["median_seconds"]
    rss_ratio = ice["median_peak_rss_mb"] / py["median_peak_rss_mb"]
    return {
        "speedup": round(speedup, 2),
        "cpu_speedup": round(py["median_cpu_seconds"] / ice["median_cpu_seconds"], 2),
        "paired_speedups": paired,
        "rss_ratio": round(rss_ratio, 3),
        "bar_met": speedup >= SPEEDUP_BAR and rss_ratio <= 1.0 and not problems,
        "planners": summary,
        "problems": problems,
    }


def _all_runs(report: dict[str, Any]) -> list[dict[str, Any]]:
    timed = [r for p in report.get("planners", {}).values() for r in p.get("runs", [])]
    return report.get("verify_runs", []) + timed


def _benchmark(metadata: str, info: dict[str, Any], repeat: int, report: dict[str, Any]) -> None:
    verify_runs, problems = verify(metadata, info)
    report["verify_runs"] = verify_runs
    if problems:
        report["problems"] = problems
        report["bar_met"] = False
        return
    report.update(measure(metadata, repeat, info["main"]["expected"]))
    _log(
        f"speedup {report['speedup']}x (cpu {report['cpu_speedup']}x), "
        f"rss ratio {report['rss_ratio']}, bar met: {report['bar_met']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("child", help="internal: plan once in this process")
    one.add_argument("planner", choices=PLANNERS)
    one.add_argument("metadata")
    one.add_argument("ref")
    one.add_argument("--verify", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 is the issue's table")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per planner")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)

    if args.command == "child":
        print(json.dumps(child(args.planner, args.metadata, args.ref, args.verify)))
        return 0

    sys.path.insert(0, str(REPO))
    from table_gen import ensure_table  # noqa: PLC0415 - the children must not import it

    start = time.perf_counter()
    metadata, info = ensure_table(args.workdir, args.scale, args.seed)
    _log(f"table ready in {time.perf_counter() - start:.0f}s: {metadata}")
    _log(f"main: {json.dumps({k: v for k, v in info['main'].items() if k != 'expected'})}")
    report: dict[str, Any] = {
        "scale": args.scale,
        "seed": args.seed,
        "metadata": metadata,
        "table": {ref: info[ref] for ref in ("main", "cdc")},
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg()[0],
    }
    if not args.generate_only:
        try:
            _benchmark(metadata, info, args.repeat, report)
        except ChildFailed as exc:
            _log(str(exc))
            report["problems"] = [*report.get("problems", []), str(exc)]
            report["bar_met"] = False
    report["load_average_at_end"] = os.getloadavg()[0]
    versions = {r["icecore_sources"] for r in _all_runs(report) if "icecore_sources" in r}
    report["icecore_sources"] = sorted(versions)
    if len(versions) > 1:
        report["problems"] = [*report.get("problems", []), "icecore changed during the run"]
        report["bar_met"] = False
    print(json.dumps(report))
    return 0 if report.get("bar_met", args.generate_only) else 1


if __name__ == "__main__":
    sys.exit(main())
