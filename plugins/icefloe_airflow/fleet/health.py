"""One table's health check as the fleet records it (`history.record`) and the UI reads it.

`HealthCheck` is the interface shared with the UI: the row of `icefloe_health_checks`.
`inputs` holds what the score and the decisions were computed from (the health summary, the
policy, each job's decision, the ranking's benefit and estimated bytes), JSON-friendly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class HealthCheck:
    """A table's health at `checked_at`: its score (0..100, 100 = nothing to do; see
    `icefloe_airflow.policy`), the jobs due, and the score's inputs."""

    table: str
    checked_at: datetime
    metadata_location: str | None
    score: float
    due: list[str]
    inputs: dict[str, Any]
