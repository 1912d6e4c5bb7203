"""`SegmentMap`, built by `SegmentRecorder` as a bin-pack task builds it, against the rows'
real journey: a simulated bin-pack (splits read in order, rows dropped, files cut at a row
limit) whose every written row is tracked one by one; `RowMap` against a shuffle's."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from icecore.data.position_maps import (
    SOURCE_FILE,
    SOURCE_POS,
    RowMap,
    Segment,
    SegmentMap,
    SegmentRecorder,
    write_row_map,
)
from icecore.io import FileIO


def bin_pack(
    rng: np.random.Generator, files: int, rows_per_file: int, per_output: int
) -> tuple[SegmentMap, dict[tuple[str, int], tuple[str, int]], dict[str, set[int]]]:
    """Inputs read in splits and batches, some rows dropped, written to files of
    `per_output` rows. Returns the map, the truth (old -> new place) and what was dropped."""
    recorder = SegmentRecorder()
    truth_order: list[tuple[str, int]] = []
    dropped: dict[str, set[int]] = {}
    for n in range(files):
        path = f"s3://b/t/data/in-{n}.parquet"
        gone = set(rng.choice(rows_per_file, rng.integers(0, rows_per_file // 2), replace=False))
        dropped[path] = {int(p) for p in gone}
        edges = sorted({0, rows_per_file, *rng.integers(0, rows_per_file, 3).tolist()})
        for start, end in itertools.pairwise(edges):  # batches of row groups
            inside = np.array(sorted(p for p in dropped[path] if start <= p < end), np.int64)
            recorder.read(path, start, end, inside)
            truth_order.extend((path, p) for p in range(start, end) if p not in dropped[path])
    written = []
    truth = {}
    for i in range(0, len(truth_order), per_output):
        name = f"s3://b/t/data/out-{i // per_output}.parquet"
        chunk = truth_order[i : i + per_output]
        written.append((name, len(chunk)))
        truth.update({old: (name, k) for k, old in enumerate(chunk)})
    positions = SegmentMap({path: rows_per_file for path in dropped})
    for segment in recorder.segments(written):
        positions.add(segment)
    for path, gone in recorder.dropped().items():
        positions.add_dropped(path, gone)
    return positions, truth, dropped


@pytest.mark.parametrize("seed", range(8))
def test_every_row_is_followed_to_its_new_place(seed: int) -> None:
    rng = np.random.default_rng(seed)
    positions, truth, dropped = bin_pack(rng, files=4, rows_per_file=200, per_output=97)
    for path, gone in dropped.items():
        assert positions.covers(path)
        asked = np.arange(200, dtype=np.int64)
        found = {(new, int(p)) for new, moved in positions.move({path: asked}) for p in moved}
        assert found == {truth[(path, p)] for p in range(200) if p not in gone}
        some = np.sort(rng.choice(200, 25, replace=False))
        got = sorted((new, int(p)) for new, moved in positions.move({path: some}) for p in moved)
        assert got == sorted(truth[(path, int(p))] for p in some if int(p) not in gone)


def test_a_map_costs_its_segments_and_dropped_rows_not_its_rows() -> None:
    """1,000,000 rewritten rows with 1% dropped: a few kilobytes, not megabytes."""
    positions = SegmentMap({f"in-{n}": 100_000 for n in range(10)})
    rng = np.random.default_rng(1)
    for n in range(10):
        path = f"in-{n}"
        positions.add(Segment(path, 0, 100_000, f"out-{n // 4}", (n % 4) * 99_000))
        positions.add_dropped(path, rng.choice(100_000, 1_000, replace=False))
    assert positions.nbytes < 30_000
    assert not positions.covers("in-10")
    assert all(positions.covers(f"in-{n}") for n in range(10))
    assert list(positions.move({"in-3": np.array([], np.int64)})) == []


def test_an_input_whose_rows_were_all_dropped_is_covered_with_nowhere_to_go() -> None:
    positions = SegmentMap({"gone": 3, "kept": 12, "cut": 10})
    positions.add(Segment("kept", 0, 10, "out", 0))
    positions.add_dropped("kept", np.array([3, 4, 10, 11]))  # 10, 11: a read of dropped rows
    positions.add_dropped("gone", np.array([0, 1, 2]))
    positions.add(Segment("cut", 0, 6, "out", 8))  # rows 6-9 went nowhere the map knows
    assert positions.covers("gone") and positions.covers("kept")
    assert not positions.covers("cut") and not positions.covers("other")
    moved = list(positions.move({"gone": np.array([0, 5]), "kept": np.array([3, 4, 5])}))
    assert [(new, p.tolist()) for new, p in moved] == [("out", [3])]


@pytest.mark.parametrize("batch_rows", [1 << 20, 64])
def test_a_row_map_follows_shuffled_rows_and_covers_only_inputs_with_every_map(
    tmp_path: Path, batch_rows: int
) -> None:
    """A sort spreads two inputs' rows over two files in an order neither gives; the row
    maps written beside them send each deleted (input, position) to its new place, and an
    input with a new file whose map is missing is not covered (its deletes must conflict)."""
    rng = np.random.default_rng(7)
    io = FileIO()
    inputs = {"s3://b/t/data/in-0.parquet": 0, "s3://b/t/data/in-1.parquet": 1}
    rows = [(n, p) for n in range(2) for p in range(500)]
    order = rng.permutation(len(rows))
    truth: dict[tuple[int, int], tuple[str, int]] = {}
    row_maps = {}
    for k, chunk in enumerate(np.array_split(order, 2)):
        new_file = f"s3://b/t/data/out-{k}.parquet"
        came = [rows[i] for i in chunk]
        truth.update({old: (new_file, at) for at, old in enumerate(came)})
        sources = pa.table({SOURCE_FILE: [n for n, _ in came], SOURCE_POS: [p for _, p in came]})
        row_maps[new_file] = str(tmp_path / f"out-{k}.parquet")
        write_row_map(io, row_maps[new_file], [sources.slice(0, 100), sources.slice(100)])
    new_files = {path: sorted(row_maps) for path in inputs}
    positions = RowMap(io, inputs, new_files, row_maps, batch_rows=batch_rows)
    deleted = {path: rng.choice(500, 40, replace=False) for path in inputs}

    moved = {f: set(p.tolist()) for f, p in positions.move(deleted)}

    expected: dict[str, set[int]] = {}
    for path, chosen in deleted.items():
        for p in chosen.tolist():
            new_file, at = truth[(inputs[path], p)]
            expected.setdefault(new_file, set()).add(at)
    assert moved == expected
    assert all(positions.covers(path) for path in inputs)
    missing = RowMap(
        io,
        inputs,
        new_files,
        {"s3://b/t/data/out-0.parquet": row_maps["s3://b/t/data/out-0.parquet"]},
    )
    assert not missing.covers("s3://b/t/data/in-0.parquet")
    assert not positions.covers("s3://b/t/data/other.parquet")
