"""Snapshot expiry, then orphan file removal, by hand.

Expiry first: the files only old snapshots referenced are deleted by it, and what it could not
reach (files of failed writes, crashed jobs) is left for orphan removal, which only deletes
files older than `orphan_older_than` so that a commit in flight keeps its new files. With
`dry_run` both jobs only report. Conf example: `{"table": "db.events", "retain_last": 5}`.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from icefloe_airflow.operators import ExpireSnapshotsOperator, RemoveOrphanFilesOperator
from icefloe_airflow.params import (
    AGE_OR_TIMESTAMP_PATTERN,
    AGE_PATTERN,
    flag,
    optional_int,
    optional_string,
    table_param,
)

with DAG(
    dag_id="icefloe_expire_snapshots",
    description="Expire old snapshots, then remove orphan files",
    schedule=None,
    max_active_runs=4,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["icefloe", "iceberg", "maintenance"],
    doc_md=__doc__,
    params={
        "table": table_param(),
        "older_than": optional_string(
            "expire snapshots older than this age (7d) or ISO timestamp "
            "(default: the table's history.expire.max-snapshot-age-ms, 5 days)",
            pattern=AGE_OR_TIMESTAMP_PATTERN,
        ),
        "retain_last": optional_int("snapshots to keep per branch, however old"),
        "min_age": optional_string(
            "refuse to expire snapshots younger than this (default 1h)", pattern=AGE_PATTERN
        ),
        "force": flag(
            "lift the floors: expiry's min_age, and orphan removal's refusal of an "
            "orphan_older_than under 1 day (a commit in flight would lose its files)"
        ),
        "orphan_older_than": Param(
            "3d",
            type="string",
            pattern=AGE_OR_TIMESTAMP_PATTERN,
            description="remove only orphan files modified before this age or ISO timestamp",
        ),
        "prefix_mismatch_mode": Param(
            "error",
            type="string",
            enum=["error", "ignore", "delete"],
            description="a listed file referenced under another scheme or authority: fail, "
            "keep it, or delete it",
        ),
        "dry_run": flag("report what would be deleted; change nothing"),
    },
) as dag:
    expire = ExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        options={
            "older-than": "{{ params.older_than }}",
            "retain-last": "{{ params.retain_last }}",
            "min-age": "{{ params.min_age }}",
            "force": "{{ params.force }}",
            "dry-run": "{{ params.dry_run }}",
        },
    )
    orphans = RemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        table="{{ params.table }}",
        options={
            "older-than": "{{ params.orphan_older_than }}",
            "prefix-mismatch-mode": "{{ params.prefix_mismatch_mode }}",
            "force": "{{ params.force }}",
            "dry-run": "{{ params.dry_run }}",
        },
    )
    expire >> orphans
