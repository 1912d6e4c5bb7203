"""icefloe's operators: one per Spark job, and the table-health check."""

from icefloe_airflow.operators.base import IcefloeJobOperator
from icefloe_airflow.operators.health import TableHealthOperator
from icefloe_airflow.operators.jobs import (
    ConvertEqualityDeletesOperator,
    ExpireSnapshotsOperator,
    IngestOperator,
    RemoveOrphanFilesOperator,
    RewriteDataFilesOperator,
    RewritePositionDeletesOperator,
)

__all__ = [
    "ConvertEqualityDeletesOperator",
    "ExpireSnapshotsOperator",
    "IcefloeJobOperator",
    "IngestOperator",
    "RemoveOrphanFilesOperator",
    "RewriteDataFilesOperator",
    "RewritePositionDeletesOperator",
    "TableHealthOperator",
]
