"""The demo's data: CDC batches with a plain Python model of the rows they leave, and the
rows a table holds, read without Spark or the jobs, to check the jobs against."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.spec.manifest import FileContent

ROWS_PER_BATCH = 2_000

Row = tuple[int, datetime, float]


def cdc_batches(root: Path, batches: int) -> tuple[list[Path], list[Row]]:
    """CDC batches as Parquet (inserts of new keys, updates and deletes of earlier ones),
    and the rows a correct table holds after all of them."""
    rng = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    live: set[int] = set()
    expected: dict[int, Row] = {}
    next_id = 0
    paths = []
    for batch in range(batches):
        rows: list[dict[str, Any]] = []
        for _ in range(ROWS_PER_BATCH):
            if live and rng.random() < 0.3:
                key = rng.choice(sorted(live))
                op = "D" if rng.random() < 0.3 else "U"
                if op == "D":
                    live.discard(key)
            else:
                key, op = next_id, "I"
                next_id += 1
                live.add(key)
            ts = start + timedelta(hours=rng.randrange(24 * 7))
            amount = round(rng.random() * 100, 2)
            rows.append({"id": key, "ts": ts, "amount": amount, "op": op})
            if op == "D":
                expected.pop(key, None)
            else:
                expected[key] = (key, ts, amount)
        path = root / f"batch-{batch}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        paths.append(path)
    return paths, sorted(expected.values())


def live_rows(table: Any) -> list[Row]:
    """The table's rows, read by planning with icecore and applying each task's deletes."""
    rows: list[Row] = []
    for task in table.refresh().scan().plan_files():
        path = task.file.file_path
        positions: set[int] = set()
        deleted_ids: set[int] = set()
        for delete in task.deletes:
            deletes = pq.read_table(table.io.open_input(delete.file_path))
            if delete.content == FileContent.POSITION_DELETES:
                pairs = zip(
                    deletes["file_path"].to_pylist(), deletes["pos"].to_pylist(), strict=True
                )
                positions.update(pos for file, pos in pairs if file == path)
            else:
                deleted_ids.update(deletes["id"].to_pylist())
        data = pq.read_table(table.io.open_input(path), columns=["id", "ts", "amount"])
        for pos, (key, ts, amount) in enumerate(
            zip(*(c.to_pylist() for c in data.columns), strict=True)
        ):
            if pos not in positions and key not in deleted_ids:
                rows.append((key, ts, amount))
    return sorted(rows)
