"""Waiting for a table's maintenance lease without holding a worker slot.

A deferrable job operator that finds its table leased by another job does not sleep in its
worker slot polling the lock (up to its `lock_wait`, an hour by default): it defers to
`LeaseFreeTrigger`, which polls icefloe's state store from the triggerer, and the task comes
back (`IcefloeJobOperator.execute_after_lease_wait`) when the lease is free or the wait is
over. Meanwhile the slot, and the fleet's pool slot, run other tables' jobs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from icefloe_airflow.hook import IcebergHook

# Seconds a trigger lets pass before its first look at the lease. A trigger that fires at
# once puts the task back in the queue before the scheduler has processed the deferring
# worker's exit, and Airflow 3.3 then marks the task failed, "killed externally" (the
# resume-after-defer race, apache/airflow#71580 and #72716: the worker's exit took 5 s to
# reach the scheduler here). A lease is held for minutes; ten seconds more costs nothing.
FIRST_LOOK_SECONDS = 10.0


def now_ms() -> int:
    return int(time.time() * 1000)


class LeaseFreeTrigger(BaseTrigger):
    """Fires when the table's maintenance lease is free, or at `deadline_ms` (epoch ms)
    whatever the lease; the event says which (`free`) and carries the deadline, so that the
    task's next try at the lease keeps the same overall wait."""

    def __init__(
        self, iceberg_conn_id: str, table: str, deadline_ms: int, poll_seconds: float = 5.0
    ) -> None:
        super().__init__()
        self.iceberg_conn_id = iceberg_conn_id
        self.table = table
        self.deadline_ms = deadline_ms
        self.poll_seconds = poll_seconds

    serialize_path = f"{__name__}.LeaseFreeTrigger"  # where the triggerer imports it from

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            self.serialize_path,
            {
                "iceberg_conn_id": self.iceberg_conn_id,
                "table": self.table,
                "deadline_ms": self.deadline_ms,
                "poll_seconds": self.poll_seconds,
            },
        )

    def _left(self) -> float:
        """Seconds until the deadline."""
        return (self.deadline_ms - now_ms()) / 1000

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # The state store is synchronous (SQLAlchemy): each call runs in a thread, never in
        # the triggerer's event loop, which other triggers share.
        hook = IcebergHook(self.iceberg_conn_id)
        try:
            store = await asyncio.to_thread(hook.state_store)
            await asyncio.sleep(max(0.0, min(FIRST_LOOK_SECONDS, self._left())))
            while True:
                holder = await asyncio.to_thread(store.lock_holder, self.table)
                left = self._left()
                if holder is None or left <= 0:
                    yield TriggerEvent(
                        {
                            "table": self.table,
                            "free": holder is None,
                            "holder": None if holder is None else holder[0],
                            "deadline_ms": self.deadline_ms,
                        }
                    )
                    return
                await asyncio.sleep(min(self.poll_seconds, left))
        finally:
            await asyncio.to_thread(hook.close)
