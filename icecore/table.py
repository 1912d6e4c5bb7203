"""The table facade: one table's current metadata, its FileIO and its catalog.

It only hands out operations; the operations themselves live in `icecore.commit` (snapshot
producers) and `icecore.updates` (schema, spec, properties, refs, expiry), so this module
stays a thin entry point rather than growing into a god object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icecore.commit.append import FastAppend, MergeAppend
from icecore.commit.delete import DeleteFiles
from icecore.commit.overwrite import OverwriteFiles, ReplacePartitions
from icecore.commit.rewrite import RewriteFiles
from icecore.commit.rewrite_manifests import RewriteManifests
from icecore.commit.row_delta import RowDelta
from icecore.errors import ValidationError
from icecore.health import HealthReport, table_health
from icecore.io import FileIO
from icecore.scan import TableScan
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.updates import (
    ExpireSnapshots,
    ManageSnapshots,
    ReplaceSortOrder,
    UpdateProperties,
    UpdateSchema,
    UpdateSpec,
)

if TYPE_CHECKING:
    from icecore.catalog.base import Catalog


class Table:
    """`identifier` is (namespace..., name). `catalog` is None for read-only static tables."""

    def __init__(
        self,
        identifier: tuple[str, ...],
        metadata: TableMetadata,
        io: FileIO,
        catalog: Catalog | None = None,
    ) -> None:
        self.identifier = identifier
        self.metadata = metadata
        self.io = io
        self.catalog = catalog

    @property
    def name(self) -> str:
        return ".".join(self.identifier)

    @property
    def metadata_location(self) -> str | None:
        return self.metadata.metadata_location

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.metadata_location!r})"

    def refresh(self) -> Table:
        if self.catalog is not None:
            self.metadata = self.catalog.load_metadata(self.identifier)
        return self

    def commit_metadata(self, base: TableMetadata, updated: TableMetadata) -> TableMetadata:
        """Swap `base` for `updated` in the catalog; CommitFailedError if `base` is stale."""
        if self.catalog is None:
            raise ValidationError(f"{self.name} was loaded read-only, without a catalog")
        self.metadata = self.catalog.commit_table(self.identifier, base, updated)
        return self.metadata

    def scan(self, **options: Any) -> TableScan:
        """A scan of this table; options as `TableScan` (snapshot_id, ref, row_filter, ...)."""
        return TableScan(self.io, self.metadata, **options)

    def health(self, **options: Any) -> HealthReport:
        """Health from metadata alone; options as `icecore.health.table_health`."""
        return table_health(self.io, self.metadata, name=self.name, **options)

    # Snapshot-producing operations (icecore.commit); each is committed with `.commit()`.

    def new_fast_append(self, branch: str = MAIN_BRANCH) -> FastAppend:
        return FastAppend(self, branch)

    def new_append(self, branch: str = MAIN_BRANCH) -> MergeAppend:
        """An append that also merges small manifests (see `icecore.commit.manifest_merge`)."""
        return MergeAppend(self, branch)

    def new_overwrite(self, branch: str = MAIN_BRANCH) -> OverwriteFiles:
        return OverwriteFiles(self, branch)

    def new_replace_partitions(self, branch: str = MAIN_BRANCH) -> ReplacePartitions:
        return ReplacePartitions(self, branch)

    def new_row_delta(self, branch: str = MAIN_BRANCH) -> RowDelta:
        return RowDelta(self, branch)

    def new_rewrite(self, branch: str = MAIN_BRANCH) -> RewriteFiles:
        return RewriteFiles(self, branch)

    def new_delete(self, branch: str = MAIN_BRANCH) -> DeleteFiles:
        return DeleteFiles(self, branch)

    def rewrite_manifests(self, branch: str = MAIN_BRANCH) -> RewriteManifests:
        """Replace manifests by others listing the same files (Java's `rewriteManifests`)."""
        return RewriteManifests(self, branch)

    # Metadata-only updates (icecore.updates); each is committed with `.commit()`.

    def update_schema(self, *, allow_incompatible_changes: bool = False) -> UpdateSchema:
        return UpdateSchema(self, allow_incompatible_changes=allow_incompatible_changes)

    def update_properties(self) -> UpdateProperties:
        return UpdateProperties(self)

    def update_spec(self) -> UpdateSpec:
        return UpdateSpec(self)

    def replace_sort_order(self) -> ReplaceSortOrder:
        return ReplaceSortOrder(self)

    def manage_snapshots(self) -> ManageSnapshots:
        return ManageSnapshots(self)

    def expire_snapshots(self, *, now_ms: int | None = None) -> ExpireSnapshots:
        """Snapshot expiry; retention ages are measured from `now_ms` (default: now)."""
        return ExpireSnapshots(self, now_ms=now_ms)
