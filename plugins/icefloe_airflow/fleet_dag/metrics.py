"""The fleet's metrics, through Airflow's own (`[metrics]`: StatsD, or whatever backend the
deployment configured), so they land where the scheduler's own metrics already go.

    icefloe.fleet.<catalog>.<namespace>.<table>.score          gauge, 0..100
    icefloe.fleet.<catalog>.<namespace>.<table>.delete_files   gauge, live delete files
    icefloe.fleet.<catalog>.<namespace>.<table>.small_files    gauge, small data files
    icefloe.fleet.<catalog>.bytes_rewritten                    counter, bytes the jobs rewrote
    icefloe.fleet.<catalog>.files_removed                      counter, files jobs took out
    icefloe.fleet.<catalog>.failures                           counter, failed job runs

The table is in the name (plain StatsD drops tags); the same values also carry `catalog`,
`table` and `job` tags for backends that keep them. Characters StatsD does not take are
replaced by `_`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import conf
from airflow.sdk.observability.metrics import stats_utils

from icecore.jobs.results import result_of
from icefloe_airflow.fleet.checking import TableCheck

PREFIX = "icefloe.fleet"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_BACKEND_OPTIONS = (
    "statsd_on",
    "statsd_host",
    "statsd_port",
    "statsd_prefix",
    "statsd_datadog_enabled",
    "otel_on",
)
_loggers: dict[tuple[str, ...], Any] = {}


def _logger() -> Any:
    """Airflow's metrics logger as `[metrics]` configures it (its StatsD client, prefix and
    name checks), made with Airflow's own factory. Kept per settings, not in Airflow's
    process-wide slot: `dag.test()` and the task runner set that one up and tear it down
    on their own schedule."""
    settings = tuple(conf.get("metrics", o, fallback="") for o in _BACKEND_OPTIONS)
    if settings not in _loggers:
        _loggers[settings] = stats_utils.get_stats_factory()()
    return _loggers[settings]


def _part(text: str) -> str:
    return _UNSAFE.sub("_", text)


def table_gauges(catalog: str, checks: Iterable[TableCheck]) -> None:
    """Score, delete files and small files of every checked table."""
    stats = _logger()
    for check in checks:
        if check.report is None or check.score is None:
            continue
        totals = check.report.totals
        name = f"{PREFIX}.{_part(catalog)}.{_part(check.table)}"
        tags = {"catalog": catalog, "table": check.table}
        deletes = (
            totals.position_deletes.files
            + totals.equality_deletes.files
            + totals.deletion_vectors.files
        )
        stats.gauge(f"{name}.score", check.score, tags=tags)
        stats.gauge(f"{name}.delete_files", deletes, tags=tags)
        stats.gauge(f"{name}.small_files", totals.small_data.files, tags=tags)


def job_counters(catalog: str, table: str, job: str, result: Mapping[str, Any]) -> None:
    """Bytes rewritten and files removed by one successful job run (the result's `figures`,
    which the UI charts too)."""
    typed = result_of(job, result)
    if typed is None:
        return
    figures = typed.figures()
    stats = _logger()
    tags = {"catalog": catalog, "table": table, "job": job}
    name = f"{PREFIX}.{_part(catalog)}"
    if figures.rewritten_bytes:
        stats.incr(f"{name}.bytes_rewritten", count=figures.rewritten_bytes, tags=tags)
    if figures.removed_files:
        stats.incr(f"{name}.files_removed", count=figures.removed_files, tags=tags)


def job_failed(catalog: str, table: str, job: str) -> None:
    stats = _logger()
    tags = {"catalog": catalog, "table": table, "job": job}
    stats.incr(f"{PREFIX}.{_part(catalog)}.failures", tags=tags)
