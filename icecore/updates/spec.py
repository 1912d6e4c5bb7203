"""Partition spec evolution as a commit, around `icecore.spec.partitioning.PartitionSpecUpdate`.

    table.update_spec().add_field("ts", "day").remove_field("category").commit()

The evolved spec becomes the default; writers use it from then on while old files keep the
spec they were written with. Field ids continue from the table's `last-partition-id` (or are
reused from an earlier spec with the same source and transform), and an evolved spec equal to
an existing one reuses that spec's id. Calls are replayed on the refreshed metadata after a lost
swap: a concurrent spec change that makes one invalid (the same field added twice, a removed
field gone already) is a `CommitConflictError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icecore.spec.metadata import WRITTEN_FORMAT_VERSION, TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.partitioning import PartitionSpec, PartitionSpecUpdate
from icecore.spec.transforms import Transform
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table


class UpdateSpec(ReplayedUpdate):
    """Evolve the default partition spec; every method returns `self` for chaining."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._calls: list[tuple[str, tuple[Any, ...]]] = []
        self._update = self._update_for(self._start)
        self._set_default = True

    def add_field(
        self, source_name: str, transform: Transform | str = "identity", name: str | None = None
    ) -> UpdateSpec:
        """Partition by `transform` of a column; `name` defaults as in Java (`ts_day`, ...)."""
        return self._call("add_field", source_name, transform, name)

    def remove_field(self, name: str) -> UpdateSpec:
        return self._call("remove_field", name)

    def rename_field(self, name: str, new_name: str) -> UpdateSpec:
        return self._call("rename_field", name, new_name)

    def add_non_default_spec(self) -> UpdateSpec:
        """Add the evolved spec without making it the default (Java's `addNonDefaultSpec`),
        e.g. an unpartitioned spec for global equality deletes on a partitioned table."""
        self._set_default = False
        return self

    def spec(self) -> PartitionSpec:
        """The evolved spec against the current metadata (its id is assigned at commit)."""
        return self._evolved(self._update, self._start)

    def _call(self, method: str, *args: Any) -> UpdateSpec:
        getattr(self._update, method)(*args)
        self._calls.append((method, args))
        return self

    @staticmethod
    def _update_for(base: TableMetadata) -> PartitionSpecUpdate:
        # Metadata is always written as v2, so v2's rules apply (ids unique across specs).
        return PartitionSpecUpdate(
            base.spec(),
            base.schema(),
            WRITTEN_FORMAT_VERSION,
            base.last_partition_id,
            base.partition_specs,
        )

    @staticmethod
    def _evolved(update: PartitionSpecUpdate, base: TableMetadata) -> PartitionSpec:
        return update.apply(max(s.spec_id for s in base.partition_specs) + 1)

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return self._on(base, self._evolve)

    def _evolve(self, base: TableMetadata) -> TableMetadata:
        update = self._update
        if base is not self._start:
            update = self._update_for(base)
            for method, args in self._calls:
                getattr(update, method)(*args)
        builder = MetadataBuilder(base)
        builder.add_partition_spec(self._evolved(update, base), set_default=self._set_default)
        return builder.build()
