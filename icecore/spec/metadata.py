"""Table metadata: the JSON document a catalog points at (spec: "Table Metadata").

Reads v1, v2 and v3; writes v2 (v1 as its v2 upgrade) or v3. Reading follows Java's
`TableMetadataParser`, including its defaults for fields v1 may omit, so that icecore and
Spark agree on what a file means.
Everything icecore does not model (statistics files, partition statistics, fields added by
newer writers) is kept in `extra` and written back untouched: dropping a field another engine
relies on would be a silent downgrade of the table.

A `TableMetadata` is checked when it is built: ids that do not resolve, duplicate snapshots
or a `main` branch that disagrees with `current-snapshot-id` are refused rather than
half-understood, since maintenance jobs delete files based on what this object says is live.
"""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

from icecore.errors import MetadataError, NotFoundError, ValidationError
from icecore.io import FileIO
from icecore.spec.jsonfields import (
    get_int,
    get_str,
    get_string_map,
    require_list,
    require_object,
)
from icecore.spec.partitioning import PARTITION_FIELD_ID_START, PartitionSpec, fields_from_json
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.snapshots import MetadataLogEntry, Snapshot, SnapshotLogEntry
from icecore.spec.sorting import UNSORTED, SortOrder

T = TypeVar("T")

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
WRITTEN_FORMAT_VERSION = 2  # the lowest version written: v1 metadata is written as v2

_NO_SNAPSHOT = -1  # Java writes -1 for "no current snapshot" in v1 and v2 tables.

# Fields v2 requires that v1 may omit; the id fields that go with the lists
# (current-schema-id, ...) are required wherever their list is present.
_REQUIRED_SINCE_V2 = (
    "table-uuid",
    "last-sequence-number",
    "schemas",
    "partition-specs",
    "last-partition-id",
    "sort-orders",
)

_MODELED_FIELDS = frozenset(
    {
        "format-version",
        "table-uuid",
        "location",
        "last-sequence-number",
        "next-row-id",
        "last-updated-ms",
        "last-column-id",
        "schema",
        "schemas",
        "current-schema-id",
        "partition-spec",
        "partition-specs",
        "default-spec-id",
        "last-partition-id",
        "properties",
        "current-snapshot-id",
        "snapshots",
        "snapshot-log",
        "metadata-log",
        "sort-orders",
        "default-sort-order-id",
        "refs",
    }
)


@dataclass(frozen=True)
class TableMetadata:
    """One version of a table's metadata.

    `format_version` is the version the metadata was read as; `to_json` always writes v2.
    `metadata_location` is the file it came from (for messages and the metadata log); it does
    not take part in equality.
    """

    format_version: int
    table_uuid: str | None
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    sort_orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_sort_order_id: int = UNSORTED.order_id
    properties: dict[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[SnapshotLogEntry, ...] = ()
    metadata_log: tuple[MetadataLogEntry, ...] = ()
    refs: dict[str, SnapshotRef] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    metadata_location: str | None = field(default=None, compare=False)
    # v3 row lineage: the first row id the next snapshot's new rows take.
    next_row_id: int | None = None

    def __post_init__(self) -> None:
        if self.format_version not in SUPPORTED_FORMAT_VERSIONS:
            raise ValidationError(
                f"unsupported format-version {self.format_version}; icecore reads v1, v2 and v3"
            )
        if self.format_version >= 3 and self.next_row_id is None:
            raise ValidationError("next-row-id is required in format v3")
        if self.format_version >= 2 and self.table_uuid is None:
            raise ValidationError("table-uuid is required in format v2")
        if self.format_version == 1 and self.last_sequence_number != 0:
            raise ValidationError(
                f"last-sequence-number must be 0 in v1, got {self.last_sequence_number}"
            )
        if not self.location:
            raise ValidationError("location must not be empty")
        self._check_ids()
        self._check_snapshots()

    def _check_ids(self) -> None:
        _check_id_list(
            "schema",
            [s.schema_id for s in self.schemas],
            "current-schema-id",
            self.current_schema_id,
        )
        _check_id_list(
            "partition spec",
            [s.spec_id for s in self.partition_specs],
            "default-spec-id",
            self.default_spec_id,
        )
        _check_id_list(
            "sort order",
            [o.order_id for o in self.sort_orders],
            "default-sort-order-id",
            self.default_sort_order_id,
        )

    def _check_snapshots(self) -> None:
        ids = [s.snapshot_id for s in self.snapshots]
        _check_unique("snapshot", ids)
        for snapshot in self.snapshots:
            if snapshot.sequence_number > self.last_sequence_number:
                raise ValidationError(
                    f"snapshot {snapshot.snapshot_id} has sequence number "
                    f"{snapshot.sequence_number}, above last-sequence-number "
                    f"{self.last_sequence_number}"
                )
        known = set(ids)
        if self.current_snapshot_id is not None and self.current_snapshot_id not in known:
            raise ValidationError(
                f"current-snapshot-id {self.current_snapshot_id} is not a known snapshot"
            )
        for name, ref in self.refs.items():
            if ref.snapshot_id not in known:
                raise ValidationError(f"ref {name!r} points at unknown snapshot {ref.snapshot_id}")
        main = self.refs.get(MAIN_BRANCH)
        if main is not None and not main.is_branch:
            raise ValidationError("ref 'main' must be a branch")
        # Java's rule: refs written without a main branch are tolerated, a disagreeing one not.
        if main is not None and main.snapshot_id != self.current_snapshot_id:
            raise ValidationError(
                f"current-snapshot-id {self.current_snapshot_id} does not match the main "
                f"branch ({main.snapshot_id})"
            )

    # Lookups

    @cached_property
    def _schemas_by_id(self) -> dict[int, Schema]:
        return {s.schema_id: s for s in self.schemas}

    @cached_property
    def _specs_by_id(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.partition_specs}

    @cached_property
    def _sort_orders_by_id(self) -> dict[int, SortOrder]:
        return {o.order_id: o for o in self.sort_orders}

    @cached_property
    def _snapshots_by_id(self) -> dict[int, Snapshot]:
        return {s.snapshot_id: s for s in self.snapshots}

    def _missing(self, what: str) -> NotFoundError:
        return NotFoundError(f"{what} not found in table {self.location}")

    def schema(self) -> Schema:
        """The current schema."""
        return self._schemas_by_id[self.current_schema_id]

    def schema_by_id(self, schema_id: int) -> Schema:
        try:
            return self._schemas_by_id[schema_id]
        except KeyError:
            raise self._missing(f"schema {schema_id}") from None

    def spec(self) -> PartitionSpec:
        """The default partition spec, which writers use."""
        return self._specs_by_id[self.default_spec_id]

    def spec_by_id(self, spec_id: int) -> PartitionSpec:
        try:
            return self._specs_by_id[spec_id]
        except KeyError:
            raise self._missing(f"partition spec {spec_id}") from None

    def specs_by_id(self) -> dict[int, PartitionSpec]:
        """Every spec by id; manifests name the spec they were written with."""
        return dict(self._specs_by_id)

    def sort_order(self) -> SortOrder:
        return self._sort_orders_by_id[self.default_sort_order_id]

    def sort_order_by_id(self, order_id: int) -> SortOrder:
        try:
            return self._sort_orders_by_id[order_id]
        except KeyError:
            raise self._missing(f"sort order {order_id}") from None

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot:
        try:
            return self._snapshots_by_id[snapshot_id]
        except KeyError:
            raise self._missing(f"snapshot {snapshot_id}") from None

    def current_snapshot(self) -> Snapshot | None:
        if self.current_snapshot_id is None:
            return None
        return self._snapshots_by_id[self.current_snapshot_id]

    def snapshot_for_ref(self, name: str) -> Snapshot:
        """The snapshot a branch or tag points at."""
        ref = self.refs.get(name)
        if ref is None:
            raise self._missing(f"branch or tag {name!r}")
        return self._snapshots_by_id[ref.snapshot_id]

    def ancestors_of(self, snapshot_id: int) -> Iterator[Snapshot]:
        """The snapshot, then its parent, and so on while the parent is still in the metadata
        (expired ancestors end the walk, as in Java's `SnapshotUtil.ancestorsOf`)."""
        snapshot: Snapshot | None = self.snapshot_by_id(snapshot_id)
        seen: set[int] = set()
        while snapshot is not None:
            if snapshot.snapshot_id in seen:
                raise ValidationError(f"snapshot {snapshot.snapshot_id} is its own ancestor")
            seen.add(snapshot.snapshot_id)
            yield snapshot
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else self._snapshots_by_id.get(parent)

    # Serialization

    def upgrade_to_v2(self) -> TableMetadata:
        """This metadata as v2, as Java's `upgradeFormatVersion(2)` does it: only the version
        changes (sequence numbers stay 0, v1 snapshots with inline manifests keep them), and a
        table uuid is assigned if the v1 metadata had none."""
        if self.format_version == WRITTEN_FORMAT_VERSION:
            return self
        return replace(
            self,
            format_version=WRITTEN_FORMAT_VERSION,
            table_uuid=self.table_uuid or str(uuid.uuid4()),
        )

    def to_json(self) -> dict[str, Any]:
        """The v2 (or v3) JSON document, in Java's field order.

        v1 metadata is written as its v2 upgrade; one with no table uuid must go through
        `upgrade_to_v2()` first, so that the uuid is chosen once and not at every write.
        """
        if self.table_uuid is None:
            raise ValidationError("metadata has no table-uuid; call upgrade_to_v2() first")
        out: dict[str, Any] = {
            "format-version": max(self.format_version, WRITTEN_FORMAT_VERSION),
            "table-uuid": self.table_uuid,
            "location": self.location,
            "last-sequence-number": self.last_sequence_number,
            **({} if self.next_row_id is None else {"next-row-id": self.next_row_id}),
            "last-updated-ms": self.last_updated_ms,
            "last-column-id": self.last_column_id,
            "current-schema-id": self.current_schema_id,
            "schemas": [s.to_json() for s in self.schemas],
            "default-spec-id": self.default_spec_id,
            "partition-specs": [s.to_json() for s in self.partition_specs],
            "last-partition-id": self.last_partition_id,
            "default-sort-order-id": self.default_sort_order_id,
            "sort-orders": [o.to_json() for o in self.sort_orders],
            "properties": dict(self.properties),
            "current-snapshot-id": (
                _NO_SNAPSHOT if self.current_snapshot_id is None else self.current_snapshot_id
            ),
            "refs": {name: ref.to_json() for name, ref in self.refs.items()},
            "snapshots": [s.to_json() for s in self.snapshots],
            "snapshot-log": [e.to_json() for e in self.snapshot_log],
            "metadata-log": [e.to_json() for e in self.metadata_log],
        }
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Any, location: str | None = None) -> TableMetadata:
        """Parse a metadata document; `location` is the file it came from, named in errors."""
        try:
            return _parse(obj, location)
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            problem = str(exc) if isinstance(exc, ValidationError) else repr(exc)
            raise MetadataError(location or "<table metadata>", problem) from exc


def _check_unique(what: str, ids: list[int]) -> None:
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValidationError(f"duplicate {what} id(s) {duplicates}")


def _check_id_list(what: str, ids: list[int], key: str, wanted: int) -> None:
    _check_unique(what, ids)
    if wanted not in ids:
        raise ValidationError(f"{key} {wanted} is not among the {what} ids {ids}")


def _parse(obj: Any, location: str | None) -> TableMetadata:
    obj = require_object(obj, "table metadata")
    version = get_int(obj, "format-version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"unsupported format-version {version}; icecore reads v1, v2 and v3")
    v1 = version == 1
    for name in () if v1 else _REQUIRED_SINCE_V2:
        if name not in obj:
            raise ValidationError(f"required field {name!r} is missing (format v{version})")

    if "schemas" in obj:
        schemas = tuple(Schema.from_json(s) for s in require_list(obj["schemas"], "'schemas'"))
        current_schema_id = get_int(obj, "current-schema-id")
    elif "schema" in obj:
        schemas = (Schema.from_json(obj["schema"]),)
        current_schema_id = schemas[0].schema_id
    else:
        raise ValidationError("required field 'schemas' (or v1 'schema') is missing")

    if "partition-specs" in obj:
        specs_json = require_list(obj["partition-specs"], "'partition-specs'")
        specs = tuple(PartitionSpec.from_json(require_object(s, "a spec")) for s in specs_json)
        default_spec_id = get_int(obj, "default-spec-id")
    elif "partition-spec" in obj:
        fields = require_list(obj["partition-spec"], "'partition-spec'")
        specs = (PartitionSpec(0, fields_from_json(fields)),)
        default_spec_id = 0
    else:
        raise ValidationError(
            "required field 'partition-specs' (or v1 'partition-spec') is missing"
        )
    last_partition_id = get_int(obj, "last-partition-id", None)
    if last_partition_id is None:
        last_partition_id = max(
            (s.last_assigned_field_id for s in specs), default=PARTITION_FIELD_ID_START - 1
        )

    if "sort-orders" in obj:
        orders_json = require_list(obj["sort-orders"], "'sort-orders'")
        sort_orders = tuple(SortOrder.from_json(o) for o in orders_json)
        default_sort_order_id = get_int(obj, "default-sort-order-id")
    else:
        sort_orders, default_sort_order_id = (UNSORTED,), UNSORTED.order_id

    current_snapshot_id = get_int(obj, "current-snapshot-id", None)
    if current_snapshot_id == _NO_SNAPSHOT:
        current_snapshot_id = None
    if obj.get("refs") is not None:
        refs_json = require_object(obj["refs"], "'refs'")
        refs = {name: _ref(name, ref) for name, ref in refs_json.items()}
    elif current_snapshot_id is not None:
        # Spec: there is always a main branch at current-snapshot-id, even without refs.
        refs = {MAIN_BRANCH: SnapshotRef(current_snapshot_id, SnapshotRefType.BRANCH)}
    else:
        refs = {}

    return TableMetadata(
        format_version=version,
        table_uuid=get_str(obj, "table-uuid", None),
        location=_strip_trailing_slash(get_str(obj, "location")),
        last_sequence_number=0 if v1 else get_int(obj, "last-sequence-number"),
        last_updated_ms=get_int(obj, "last-updated-ms"),
        last_column_id=get_int(obj, "last-column-id"),
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        sort_orders=sort_orders,
        default_sort_order_id=default_sort_order_id,
        properties=get_string_map(obj, "properties"),
        current_snapshot_id=current_snapshot_id,
        snapshots=_list(obj, "snapshots", Snapshot.from_json),
        snapshot_log=_list(obj, "snapshot-log", SnapshotLogEntry.from_json),
        metadata_log=_list(obj, "metadata-log", MetadataLogEntry.from_json),
        refs=refs,
        extra={k: v for k, v in obj.items() if k not in _MODELED_FIELDS},
        metadata_location=location,
        next_row_id=get_int(obj, "next-row-id", None) if version >= 3 else None,
    )


def _ref(name: str, obj: Any) -> SnapshotRef:
    try:
        return SnapshotRef.from_json(obj)
    except ValidationError as exc:
        raise ValidationError(f"ref {name!r}: {exc}") from None


def _list(obj: dict[str, Any], name: str, parse: Callable[[Any], T]) -> tuple[T, ...]:
    value = obj.get(name)
    return () if value is None else tuple(parse(item) for item in require_list(value, repr(name)))


def _strip_trailing_slash(location: str) -> str:
    """Java strips trailing slashes so that `location + "/data"` never doubles one."""
    while location.endswith("/") and not location.endswith("://"):
        location = location[:-1]
    return location


def _is_gzip_name(location: str) -> bool:
    """Java's `Codec.fromFileName`: `x.gz.metadata.json`, or the older `x.metadata.json.gz`."""
    return location.endswith(".gz.metadata.json") or location.endswith(".metadata.json.gz")


def read_table_metadata(io: FileIO, location: str) -> TableMetadata:
    """Read a metadata file, plain or gzip (recognised by content, whatever its name)."""
    raw = io.read_bytes(location)
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise MetadataError(location, f"corrupt gzip data: {exc}") from None
    try:
        obj = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise MetadataError(location, f"not UTF-8: {exc}") from None
    except ValueError as exc:
        raise MetadataError(location, f"malformed JSON: {exc}") from None
    return TableMetadata.from_json(obj, location=location)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def write_table_metadata(io: FileIO, location: str, metadata: TableMetadata) -> None:
    """Write `metadata` as v2 UTF-8 JSON (gzip when the name asks for it); never overwrites."""
    try:
        document = metadata.to_json()
    except ValidationError as exc:
        raise MetadataError(location, str(exc)) from None
    data = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8")
    if _is_gzip_name(location):
        data = gzip.compress(data)
    io.write_bytes(location, data, overwrite=False)
