"""What `icefloe health` and `icefloe due` print: a table with a header and units for people
(sizes in KB/MB/GB, powers of 1024, as the jobs' options and the Iceberg page write them;
scores coloured as the page colours them, on a terminal only), or one JSON object per line
(`--json`) for scripts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from icecore.jobs.grammar import describe_size
from icefloe_airflow.airflow_settings import Found
from icefloe_airflow.fleet.checking import TableCheck
from icefloe_airflow.fleet.ranking import RunPlan
from icefloe_airflow.fleet.survey import Survey, check_inputs

_RESET = "\033[0m"
_BOLD = "\033[1m"
_DIM = "\033[2m"
_SCORE_COLOURS = ((80, "\033[32m"), (50, "\033[33m"), (0, "\033[31m"))  # the page's bands


def terminal_colours(stream: TextIO) -> bool:
    """Colour only for a person at a terminal (and not when NO_COLOR is set)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _tables(count: int) -> str:
    return f"{count} table" if count == 1 else f"{count} tables"


def _paint(text: str, code: str, colour: bool) -> str:
    return f"{code}{text}{_RESET}" if colour else text


def _score(score: int | None, width: int, colour: bool) -> str:
    if score is None:
        return "-".rjust(width)
    code = next(c for low, c in _SCORE_COLOURS if score >= low)
    return _paint(str(score).rjust(width), code, colour)


def _short(text: str) -> str:
    """A SQLite URL as its file; paths under the working directory relative to it
    (`warehouse/.airflow/...`)."""
    cwd = os.getcwd().rstrip("/") + "/"
    return text.removeprefix("sqlite:///").replace(cwd, "")


def provenance(state: Found | None, config: Found | None) -> str:
    """The first line: where the run history and the policy came from (the Iceberg page reads
    the same, or the two disagree)."""
    history = f"{_short(state.value)} (from {_short(state.source)})" if state else "none"
    policy = f"{_short(config.value)} (from {_short(config.source)})" if config else "defaults"
    return f"# run history: {history}; policy: {policy}"


def health_record(check: TableCheck) -> dict[str, Any]:
    """One table's health line; partition detail only for a table with a job due."""
    inputs = check_inputs(check)
    record: dict[str, Any] = {
        "table": check.table,
        "score": check.score,
        "enabled": check.enabled,
        "due": [d.to_dict() for d in check.due],
        "penalties": [p.to_dict() for p in check.penalties],
        "metadata_location": check.metadata_location,
        "cached": check.cached,
        "error": check.error,
        "health": inputs.get("health"),
        "benefit": inputs.get("benefit"),
        "rewrite_bytes": inputs.get("rewrite_bytes"),
        "policy_properties": inputs["policy_properties"],
    }
    if check.due and check.report is not None:
        record["partitions"] = [p.to_dict() for p in check.report.partitions]
    return record


def _columns(
    rows: Sequence[Sequence[str]], right: set[int], scores: Sequence[int | None], colour: bool
) -> list[str]:
    """A bold header and rows of cells aligned in columns (`right`: the numeric columns), the
    SCORE column coloured by `scores` (one per row); the last column is left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    score_column = list(rows[0]).index("SCORE")
    lines = []
    for number, row in enumerate(rows):
        cells = []
        for i, cell in enumerate(row[:-1]):
            text = cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            if number and i == score_column:
                text = _score(scores[number - 1], widths[i], colour)
            cells.append(text)
        line = "  ".join([*cells, row[-1]]).rstrip()
        lines.append(_paint(line, _BOLD, colour) if number == 0 else line)
    return lines


def health_lines(result: Survey, *, as_json: bool, colour: bool = False) -> Iterator[str]:
    if as_json:
        for check in result.checks:
            yield json.dumps(health_record(check), default=str)
        return
    if not result.checks:
        yield "no table matches"
        return
    header = ["TABLE", "SCORE", "DATA FILES", "SIZE", "SMALL FILES", "DELETE FILES", "MANIFESTS"]
    rows = [[*header, "DUE"]]
    for check in result.checks:
        if check.error is not None or check.report is None:
            rows.append([check.table, "-", "", "", "", "", "", f"error: {check.error}"])
            continue
        totals = check.report.totals
        manifests = check.report.manifests
        deletes = totals.position_deletes.files + totals.equality_deletes.files
        jobs = ", ".join(d.job for d in check.due) or "nothing"
        if not check.enabled:
            jobs = "nothing (maintenance disabled)"
        rows.append(
            [
                check.table,
                str(check.score),
                str(totals.data.files),
                describe_size(totals.data.bytes),
                str(totals.small_data.files),
                str(deletes + totals.deletion_vectors.files),
                str(manifests.data_manifests + manifests.delete_manifests),
                jobs,
            ]
        )
    scores = [c.score if c.error is None else None for c in result.checks]
    lines = _columns(rows, {1, 2, 3, 4, 5, 6}, scores, colour)
    yield lines[0]
    for line, check in zip(lines[1:], result.checks, strict=True):
        yield line
        for penalty in check.penalties:
            yield _paint(f"    {penalty.text}", _DIM, colour)


def due_lines(
    plan: RunPlan,
    *,
    checked: int,
    as_json: bool,
    everything: bool = False,
    colour: bool = False,
) -> Iterator[str]:
    if as_json:
        for rank, candidate in enumerate(plan.chosen, start=1):
            yield json.dumps({"table": candidate.table, "rank": rank, **candidate.to_dict()})
        if everything:
            for candidate, why in plan.deferred:
                yield json.dumps({**candidate.to_dict(), "rank": None, "deferred": why})
        return
    if not plan.chosen and not (everything and plan.deferred):
        left = f", {len(plan.deferred)} left for a later run (--all)" if plan.deferred else ""
        yield f"nothing is due ({_tables(checked)} checked{left})"
        return
    header = ["RANK", "TABLE", "SCORE", "BENEFIT (FILE OPENS)", "REWRITES", "MANIFESTS"]
    rows = [[*header, "JOBS, IN ORDER"]]
    for rank, c in enumerate(plan.chosen, start=1):
        jobs = ", ".join(d.job for d in c.jobs)
        size = describe_size(c.rewrite_bytes)
        figures = [str(c.check.score), f"{c.benefit:.1f}", size, str(c.manifests)]
        rows.append([str(rank), c.table, *figures, jobs])
    lines = _columns(rows, {0, 2, 3, 4, 5}, [c.check.score for c in plan.chosen], colour)
    yield lines[0]
    for line, c in zip(lines[1:], plan.chosen, strict=True):
        yield line
        for d in c.jobs:
            yield _paint(f"      {d.job}: {d.reason}", _DIM, colour)
    if everything:
        for candidate, why in plan.deferred:
            yield f"   -  {candidate.table}  deferred: {why}"
    later = f", {len(plan.deferred)} left for a later run" if plan.deferred else ""
    hint = " (--all lists them)" if plan.deferred and not everything else ""
    yield f"{len(plan.chosen)} of {_tables(checked)} checked would be maintained now{later}{hint}"
