"""The position maps of a rewrite, measured alone (`rebase_benchmark.py --part maps`).

A rewrite that rebases concurrent deletes must know where each row it read went
(`icecore.data.position_maps`). Issue 36 asks that this knowledge stay bounded on a 20M-row
rewrite, and says what it costs per rewritten row. The maps are driven here as the job drives
them, without Spark, on a synthetic rewrite of `rows` rows in 100 input files and 4 groups:

- bin-pack: per bin (a group's 25 inputs written into 2 files), a `SegmentRecorder` fed in
  64Ki-row batches with the positions dropped (deleted before the rewrite, at random), its
  `reports`, and the driver's `SegmentMap` made of every report; then 1,000 concurrent deletes
  moved through it. Measured at several deleted fractions and at a tenth of the rows, to show
  what its size follows.
- sort: each of 4 new files (a quarter of the rows, sorted by `name`, so each holds rows of
  every input in no input's order) with its row map (`write_row_map`), timed against writing
  the file's data (the twin's columns, zstd as the table writes them); then, in a fresh
  process, `RowMap.move` of 1,000 concurrent deletes through the four maps.

Memory is measured in a process of its own per case (`spawn`): tracemalloc's peak (Python and
NumPy buffers), Arrow's pool peak, and the rise of the process's peak RSS over what it had
after its imports. Times are taken in a separate pass without tracemalloc.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icecore.data.parquet_columns import BATCH_ROWS
from icecore.data.position_maps import (
    SOURCE_FILE,
    SOURCE_POS,
    RowMap,
    SegmentMap,
    SegmentRecorder,
    write_row_map,
)
from icecore.io import FileIO

INPUTS, GROUPS, FILES_PER_BIN = 100, 4, 2
CONCURRENT = 1000  # rows other writers delete meanwhile, in 20 of the inputs


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _in_process(target: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """`target(*args)` in a fresh process (its own heap, RSS and Arrow pool)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(target, args)


def _measured(work: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """`work()` under tracemalloc; its result and the memory it took at its peak."""
    rss, arrow = _peak_rss(), pa.default_memory_pool().max_memory() or 0
    tracemalloc.start()
    try:
        out = work()
        _, peak = tracemalloc.get_traced_memory()
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, {
        "tracemalloc_peak": peak,
        "tracemalloc_retained": retained,
        "arrow_pool_peak": (pa.default_memory_pool().max_memory() or 0) - arrow,
        "rss_rise": _peak_rss() - rss,
    }


# Bin-pack: SegmentRecorder per bin, SegmentMap on the driver --------------------------------


def _record_bin(
    group: int, per_file: int, fraction: float, seed: int, inputs: int
) -> tuple[SegmentRecorder, list[tuple[str, int]], float]:
    """A bin's recorder, fed as `LiveBatches.read` feeds it; the files written (location,
    rows) and the seconds spent in `recorder.read`."""
    rng = np.random.default_rng(seed + group)
    recorder = SegmentRecorder()
    spent, live = 0.0, 0
    for n in range(inputs // GROUPS):
        path = f"file:/wh/data/in-{group}-{n:03d}.parquet"
        for start in range(0, per_file, BATCH_ROWS):
            rows = min(BATCH_ROWS, per_file - start)
            dropped = np.flatnonzero(rng.random(rows) < fraction).astype(np.int64) + start
            live += rows - len(dropped)
            began = time.perf_counter()
            recorder.read(path, start, start + rows, dropped)
            spent += time.perf_counter() - began
    first = live // FILES_PER_BIN
    written = [(f"file:/wh/data/out-{group}-{k}.parquet", first) for k in range(FILES_PER_BIN)]
    written[-1] = (written[-1][0], live - first * (FILES_PER_BIN - 1))
    return recorder, written, spent


def _concurrent(per_file: int, seed: int, inputs: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    chosen = rng.choice(inputs, min(20, inputs), replace=False)
    return {
        f"file:/wh/data/in-{i % GROUPS}-{i // GROUPS:03d}.parquet": np.sort(
            rng.choice(per_file, CONCURRENT // len(chosen), replace=False)
        ).astype(np.int64)
        for i in chosen
    }


def segment_case(rows: int, fraction: float, inputs: int = INPUTS) -> dict[str, Any]:
    """One bin-pack rewrite of `rows` rows in `inputs` files, `fraction` of them deleted
    before it."""
    per_file = rows // inputs

    def task(group: int) -> tuple[list[str], float, int]:
        recorder, written, spent = _record_bin(group, per_file, fraction, seed=1, inputs=inputs)
        dropped = sum(len(p) for p in recorder.dropped().values())
        return recorder.reports(written), spent, dropped

    # Times first, untraced: the recorder's share of a task, the reports, the driver's map.
    began = time.perf_counter()
    reports: list[str] = []
    spent, dropped_rows = 0.0, 0
    for group in range(GROUPS):
        got, recording, dropped = task(group)
        spent += recording
        dropped_rows += dropped
        reports.extend(got)
    total = time.perf_counter() - began
    sizes = {
        f"file:/wh/data/in-{g}-{n:03d}.parquet": per_file
        for g in range(GROUPS)
        for n in range(inputs // GROUPS)
    }

    def driver() -> SegmentMap:
        segments = SegmentMap(sizes)
        for report in reports:
            segments.add_report(report)
        return segments

    began = time.perf_counter()
    segments = driver()
    driver_s = time.perf_counter() - began
    concurrent = _concurrent(per_file, seed=2, inputs=inputs)
    began = time.perf_counter()
    moved = sum(len(p) for _, p in segments.move(concurrent))
    move_s = time.perf_counter() - began
    assert all(segments.covers(path) for path in sizes)
    # Memory: one task's recorder and reports, then the driver's map, each traced alone.
    (_, task_memory) = _measured(lambda: task(0))
    del segments
    segments, driver_memory = _measured(driver)
    return {
        "rows": rows,
        "input_files": inputs,
        "deleted_fraction": fraction,
        "dropped_rows": dropped_rows,
        "recorder_read_s": round(spent, 4),
        "tasks_s": round(total, 3),
        "report_bytes": sum(len(r) for r in reports),
        "map_nbytes": segments.nbytes,
        "map_bytes_per_row": round(segments.nbytes / rows, 4),
        "map_bytes_per_dropped_row": round(segments.nbytes / max(dropped_rows, 1), 3),
        "driver_build_s": round(driver_s, 3),
        "driver": driver_memory,
        "one_task": task_memory,
        "task_peak_bytes_per_row": round(task_memory["tracemalloc_peak"] / (rows / GROUPS), 3),
        "move_s": round(move_s, 4),
        "moved_rows": moved,
    }


# Sort: row maps beside the new files, RowMap.move on the driver ------------------------------


def _sorted_file(perm: np.ndarray, per_file: int) -> tuple[pa.Table, pa.Table]:
    """A sort's new file of the input rows `perm` names (twin-like columns, sorted by
    `name`), and its sources in that order, as the writer collects them (int32, int64)."""
    ids = perm[np.lexsort((perm, perm % 100_000))]
    names = pc.binary_join_element_wise("name-", pa.array(ids % 100_000).cast(pa.string()), "")
    data = pa.table(
        {
            "id": pa.array(ids),
            "name": names,
            "ts": pa.array(1_700_000_000_000_000 + ids * 1_000, pa.timestamp("us")),
            "amount": pa.array(ids * 0.25),
        }
    )
    sources = pa.table(
        {
            SOURCE_FILE: pa.array((ids // per_file).astype(np.int32)),
            SOURCE_POS: pa.array(ids % per_file),
        }
    )
    return data, sources


def write_row_maps(rows: int, directory: str) -> dict[str, Any]:
    """The sort's new files and their row maps under `directory`; times and sizes."""
    per_file, quarter = rows // INPUTS, rows // GROUPS
    perm = np.random.default_rng(3).permutation(rows)
    io = FileIO()
    maps_s, data_s, map_bytes, data_bytes, held = [], [], 0, 0, 0
    for k in range(GROUPS):
        data, sources = _sorted_file(perm[k * quarter : (k + 1) * quarter], per_file)
        held += sources.nbytes
        batches = [sources.slice(s, BATCH_ROWS) for s in range(0, quarter, BATCH_ROWS)]
        began = time.perf_counter()
        write_row_map(io, f"{directory}/map-{k}.parquet", batches)
        maps_s.append(time.perf_counter() - began)
        began = time.perf_counter()
        pq.write_table(data, f"{directory}/data-{k}.parquet", compression="zstd")
        data_s.append(time.perf_counter() - began)
        map_bytes += Path(directory, f"map-{k}.parquet").stat().st_size
        data_bytes += Path(directory, f"data-{k}.parquet").stat().st_size
        Path(directory, f"data-{k}.parquet").unlink()
    return {
        "rows": rows,
        "row_map_write_s": [round(s, 3) for s in maps_s],
        "data_write_s": [round(s, 3) for s in data_s],
        "row_map_over_data_write": round(statistics.median(maps_s) / statistics.median(data_s), 3),
        "row_map_bytes_per_row": round(map_bytes / rows, 3),
        "data_bytes_per_row": round(data_bytes / rows, 3),
        "row_map_over_data_bytes": round(map_bytes / data_bytes, 3),
        "writer_held_sources_bytes_per_row": round(held / rows, 3),
    }


def move_through_row_maps(rows: int, directory: str) -> dict[str, Any]:
    """`RowMap.move` of 1,000 concurrent deletes in 20 inputs, in a fresh process."""
    per_file = rows // INPUTS
    io = FileIO()
    inputs = {f"in-{i}": i for i in range(INPUTS)}
    maps = {f"out-{k}": f"{directory}/map-{k}.parquet" for k in range(GROUPS)}
    positions = RowMap(io, inputs, {p: sorted(maps) for p in inputs}, maps)
    rng = np.random.default_rng(4)
    concurrent = {
        f"in-{i}": np.sort(rng.choice(per_file, CONCURRENT // 20, replace=False))
        for i in rng.choice(INPUTS, 20, replace=False)
    }
    moved, memory = _measured(lambda: [(f, len(p)) for f, p in positions.move(concurrent)])
    began = time.perf_counter()
    list(positions.move(concurrent))
    seconds = time.perf_counter() - began
    return {
        "move_s": round(seconds, 3),
        "moved_rows": sum(n for _, n in moved),
        "driver": memory,
        "driver_peak_bytes_per_row_of_one_file": round(
            memory["tracemalloc_peak"] / (rows // GROUPS), 2
        ),
    }


def measure_maps(rows: int) -> dict[str, Any]:
    """Every case of this module, each memory figure from a fresh process."""
    cases = [(rows, 0.10, INPUTS), (rows, 0.01, INPUTS), (rows, 0.001, INPUTS)]
    cases += [(rows, 0.0, INPUTS), (rows // 10, 0.10, INPUTS)]
    # Large input files: one per bin (its recorder joins each batch's dropped positions to
    # those of the batches before it).
    cases += [(rows, 0.10, GROUPS), (rows // 10, 0.10, GROUPS)]
    out: dict[str, Any] = {"segments": [_in_process(segment_case, *case) for case in cases]}
    with tempfile.TemporaryDirectory(prefix="row-maps-") as directory:
        out["row_maps"] = _in_process(write_row_maps, rows, directory)
        out["row_map_move"] = _in_process(move_through_row_maps, rows, directory)
    return out
