"""Where a spark-submit's time went, from Spark's own event log.

    phases = breakdown(event_log_dir, launched=t0, exited=t1)

A job run with `spark.eventLog.enabled=true` leaves one JSON-lines file per application: the
application's start and end, and every Spark job's submission and completion (with the call
site that started it). With the wall-clock times the caller took around the process, that
splits a run into: process start (interpreter, JVM, SparkContext), the driver's work before
the first Spark job (catalog load, planning), each Spark job, the driver's work after the last
one (commit), and shutdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def breakdown(directory: Path, *, launched: float, exited: float) -> dict[str, Any]:
    """The phases, in seconds, of the one application logged in `directory`; only the total
    when the run never started a SparkContext (nothing is logged then)."""
    files = _log_files(directory)
    if not files:
        return {"total": round(exited - launched, 2), "spark_started": False}
    app_start = app_end = None
    jobs: dict[int, dict[str, Any]] = {}
    for line in (line for f in files for line in f.read_text().splitlines()):
        if line:
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                app_start = event["Timestamp"] / 1000
            elif kind == "SparkListenerApplicationEnd":
                app_end = event["Timestamp"] / 1000
            elif kind == "SparkListenerJobStart":
                site = (event.get("Properties") or {}).get("callSite.short", "?")
                jobs[event["Job ID"]] = {"job": site, "start": event["Submission Time"] / 1000}
            elif kind == "SparkListenerJobEnd":
                jobs[event["Job ID"]]["end"] = event["Completion Time"] / 1000
    if app_start is None or app_end is None:
        raise RuntimeError(f"{directory}: the application's start or end is not logged")
    ordered = sorted(jobs.values(), key=lambda j: j["start"])
    first = ordered[0]["start"] if ordered else app_end
    last = max((j["end"] for j in ordered), default=app_start)
    return {
        "total": round(exited - launched, 2),
        "process_start": round(app_start - launched, 2),
        "driver_before_first_job": round(first - app_start, 2),
        "spark_jobs": [
            {"job": j["job"], "seconds": round(j["end"] - j["start"], 2)} for j in ordered
        ],
        "spark_jobs_span": round(last - first, 2) if ordered else 0.0,
        "driver_after_last_job": round(app_end - last, 2),
        "shutdown": round(exited - app_end, 2),
    }


def _log_files(directory: Path) -> list[Path]:
    """The event log's files in order: one file, or (Spark 4's rolling logs) an
    `eventlog_v2_<app>/` directory of `events_<n>_<app>` parts."""
    rolled = sorted(
        directory.glob("eventlog_v2_*/events_*"), key=lambda p: int(p.name.split("_")[1])
    )
    return rolled or [p for p in directory.iterdir() if p.is_file()]
