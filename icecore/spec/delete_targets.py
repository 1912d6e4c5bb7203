"""Which data files a position delete file targets: one rule for planning, health and commits.

Scan planning pairs a delete with data files by it, the health report calls a delete dangling
by it, and a commit drops a file-scoped delete with its data file by it: if any of them read
the metadata differently, a delete would be kept that nothing reads, or dropped while a data
file still needs it.

A position delete file (or deletion vector) targets one data file when:
- its `referenced_data_file` names it (v3 DVs always do; an empty name means none: DuckDB has
  written `""` for it);
- or, without that field, its `file_path` bounds are equal, as Iceberg's writers scope
  deletes to one file;
- or its bounds under `_file`'s id (2147483646) are equal: DuckDB's iceberg extension keys its
  `file_path` column's bounds by that id in the manifest (its Parquet field ids are right). No
  table column can hold that reserved id, so the bounds can only be DuckDB's.

Otherwise it may target every data file of its partition whose path lies within its
`file_path` bounds (unbounded sides admit any path); bounds compare as UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from icecore.spec.manifest import DataFile
from icecore.spec.metadata_columns import DELETE_FILE_PATH, FILE_PATH

_BOUND_IDS = (DELETE_FILE_PATH.field_id, FILE_PATH.field_id)


def path_bounds(delete_file: DataFile) -> tuple[bytes | None, bytes | None]:
    """The `file_path` bounds of a position delete file, None where it has none."""
    field_id = DELETE_FILE_PATH.field_id
    return (
        (delete_file.lower_bounds or {}).get(field_id),
        (delete_file.upper_bounds or {}).get(field_id),
    )


def single_path(
    lower_bounds: Mapping[int, bytes] | None, upper_bounds: Mapping[int, bytes] | None
) -> str | None:
    """The one `file_path` value that bounds this equal hold, if they are equal."""
    for field_id in _BOUND_IDS:
        lower = (lower_bounds or {}).get(field_id)
        if lower is not None and lower == (upper_bounds or {}).get(field_id):
            return lower.decode("utf-8")
    return None


def referenced_data_file(delete_file: DataFile) -> str | None:
    """The one data file a position delete file or DV targets, None when it may target more."""
    if delete_file.referenced_data_file:
        return delete_file.referenced_data_file
    return single_path(delete_file.lower_bounds, delete_file.upper_bounds)


def within_bounds(delete_file: DataFile, path: bytes) -> bool:
    """Whether a data file at `path` (UTF-8) lies within the delete's `file_path` bounds."""
    lower, upper = path_bounds(delete_file)
    return (lower is None or lower <= path) and (upper is None or path <= upper)
