"""The reserved field ids and names: Iceberg Java's `MetadataColumns` (spec: "Reserved Field IDs").

Ids from `2^31 - 1` down are the spec's, never a table column's: metadata columns a reader
adds to rows (`_file`, `_pos`, ...), the columns of position delete files (`file_path`,
`pos`), and the row lineage columns of v3 (`_row_id`, `_last_updated_sequence_number`), which
a data file carries only for rows moved from other files (a compaction): a null value, or no
column, means the row inherits its lineage from the file's manifest entry.
"""

from __future__ import annotations

from icecore.spec.schema import Schema
from icecore.spec.types import BooleanType, IntegerType, LongType, NestedField, StringType

_MAX_INT = 2**31 - 1

# Columns a reader may add to rows (ids MAX - 1 to MAX - 100).
FILE_PATH = NestedField(_MAX_INT - 1, "_file", StringType(), required=True)
ROW_POSITION = NestedField(_MAX_INT - 2, "_pos", LongType(), required=True)
IS_DELETED = NestedField(_MAX_INT - 3, "_deleted", BooleanType(), required=True)
SPEC_ID = NestedField(_MAX_INT - 4, "_spec_id", IntegerType(), required=True)
PARTITION_COLUMN_ID = _MAX_INT - 5  # `_partition`: its type depends on the table's specs
PARTITION_COLUMN_NAME = "_partition"

# Reserved columns of files (ids MAX - 101 to MAX - 200).
DELETE_FILE_PATH = NestedField(_MAX_INT - 101, "file_path", StringType(), required=True)
DELETE_FILE_POS = NestedField(_MAX_INT - 102, "pos", LongType(), required=True)
DELETE_FILE_ROW_FIELD_ID = _MAX_INT - 103  # `row`: the deleted row, in old position deletes
ROW_ID = NestedField(_MAX_INT - 107, "_row_id", LongType())
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    _MAX_INT - 108, "_last_updated_sequence_number", LongType()
)

# The schema of position delete files (spec: "Position Delete Files").
POSITION_DELETE_SCHEMA = Schema((DELETE_FILE_PATH, DELETE_FILE_POS))
# Names a table column may not take where rows travel beside position-delete columns.
POSITION_DELETE_NAMES = (DELETE_FILE_PATH.name, DELETE_FILE_POS.name)
ROW_LINEAGE = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
