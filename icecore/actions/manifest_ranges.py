"""Which manifests of a group overlap in partition range, from their partition summaries: a
manifest rewrite leaves a manifest near the target size alone only when none does.

A manifest's range is that of one partition field (the first a rewrite clusters by): from
its lowest to its highest value, as clustering keys (`partition_order`: nulls first, NaN
last). Ranges [a, b] and [c, d] overlap when a < d and c < b, so two manifests that only
touch (b == c), or that both hold a single value, do not: the manifests a rewrite writes
touch where one ends and the next begins, and those of one large partition all hold its one
value. Summaries say nothing of how the fields vary together, so later fields are not
compared. A manifest without summaries for the field may overlap any other.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate

from icecore.actions.partition_order import nullable_key
from icecore.spec.conversions import decoder
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.types import IcebergType

Range = tuple[bytes, bytes]


def manifest_ranges(
    spec: PartitionSpec, schema: Schema, members: Iterable[ManifestFile], position: int | None
) -> dict[str, Range] | None:
    """Each manifest's range of the partition field at `position`, by path; None when some
    manifest has none (it may then overlap any other) or there is no field (an
    unpartitioned spec: nothing to compare)."""
    if position is None:
        return None
    field_type = spec.partition_type(schema).fields[position].field_type
    ranges = {}
    for m in members:
        found = _range(m, position, field_type)
        if found is None:
            return None
        ranges[m.manifest_path] = found
    return ranges


def overlapping(ranges: dict[str, Range]) -> set[str]:
    """The paths whose range overlaps another's."""
    ordered = sorted((r, path) for path, r in ranges.items())
    lows = [r[0] for r, _ in ordered]
    prefix_high = list(accumulate((r[1] for r, _ in ordered), max))
    out: set[str] = set()
    for i, ((low, high), path) in enumerate(ordered):
        # Earlier ranges start at or below `low`: one overlaps when it ends above `low` and,
        # for a single-value range, also starts below it.
        earlier = i if low < high else bisect_left(lows, low)
        before = earlier > 0 and prefix_high[earlier - 1] > low
        # Later ranges start at or above `low`: the next one overlaps when it starts below
        # `high` (a single-value range overlaps no later one).
        after = low < high and i + 1 < len(ordered) and lows[i + 1] < high
        if before or after:
            out.add(path)
    return out


def _range(m: ManifestFile, position: int, field_type: IcebergType) -> Range | None:
    """The clustering keys of the lowest and highest value of one partition field."""
    if m.partitions is None or position >= len(m.partitions):
        return None
    summary = m.partitions[position]
    key, decode = nullable_key(field_type), decoder(field_type)
    if summary.lower_bound is None or summary.upper_bound is None:
        if summary.contains_null and not summary.contains_nan:
            return key(None), key(None)  # nulls only
        return None  # NaN only, or a writer that left the bounds out
    low = key(None) if summary.contains_null else key(decode(summary.lower_bound))
    high = key(decode(summary.upper_bound))
    if summary.contains_nan:
        high = key(math.nan)
    return low, high
