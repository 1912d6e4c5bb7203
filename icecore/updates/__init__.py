"""Metadata-only table updates: schema, properties, partition spec, sort order, refs, expiry.

Each is a `TableUpdate` that writes no data files: its calls are replayed on the refreshed
metadata after a lost compare-and-swap, and re-validated there. Get them from the table:
`table.update_schema()`, `update_properties()`, `update_spec()`, `replace_sort_order()`,
`manage_snapshots()`, `expire_snapshots()`.
"""

from icecore.updates.expire import ExpirationResult, ExpireSnapshots
from icecore.updates.properties import UpdateProperties
from icecore.updates.refs import ManageSnapshots
from icecore.updates.schema import UpdateSchema
from icecore.updates.sort_order import ReplaceSortOrder
from icecore.updates.spec import UpdateSpec
from icecore.updates.unreachable import UnreachableFiles

__all__ = [
    "ExpirationResult",
    "ExpireSnapshots",
    "ManageSnapshots",
    "ReplaceSortOrder",
    "UnreachableFiles",
    "UpdateProperties",
    "UpdateSchema",
    "UpdateSpec",
]
