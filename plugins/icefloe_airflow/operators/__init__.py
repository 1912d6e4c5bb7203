"""icefloe's operators: one per Spark job, and the table-health check."""

from icefloe_airflow.operators.base import IcefloeJobOperator
from icefloe_airflow.operators.health import TableHealthOperator
from icefloe_airflow.operators.jobs import (
    ConvertEqualityDeletesOperator,
    ExpireSnapshotsOperator,
    IngestOperator,
    RemoveOrphanFilesOperator,
    RewriteDataFilesOperator,
    RewriteManifestsOperator,
    RewritePositionDeletesOperator,
)

OPERATORS: dict[str, type[IcefloeJobOperator]] = {
    operator.job: operator
    for operator in (
        IngestOperator,
        ConvertEqualityDeletesOperator,
        RewritePositionDeletesOperator,
        RewriteDataFilesOperator,
        ExpireSnapshotsOperator,
        RemoveOrphanFilesOperator,
        RewriteManifestsOperator,
    )
}

__all__ = [
    "OPERATORS",
    "ConvertEqualityDeletesOperator",
    "ExpireSnapshotsOperator",
    "IcefloeJobOperator",
    "IngestOperator",
    "RemoveOrphanFilesOperator",
    "RewriteDataFilesOperator",
    "RewriteManifestsOperator",
    "RewritePositionDeletesOperator",
    "TableHealthOperator",
]
