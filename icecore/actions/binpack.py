"""Bin packing files into groups of bounded size, as Iceberg's rewrite planners do.

Both compactions (data files, delete files) split a partition's chosen files into groups of at
most `max-file-group-size-bytes`: the unit one Spark write and one partial-progress commit
hold. First-fit decreasing over (size descending, path) is deterministic, so a job planned
twice on one snapshot (after a conflict) groups the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def bin_pack(
    items: Iterable[T], size: Callable[[T], int], path: Callable[[T], str], max_bytes: int
) -> list[list[T]]:
    """Groups of at most `max_bytes` (a larger item alone), members largest first."""
    bins: list[tuple[int, list[T]]] = []
    for item in sorted(items, key=lambda i: (-size(i), path(i))):
        weight = size(item)
        for index, (used, members) in enumerate(bins):
            if used + weight <= max_bytes:
                members.append(item)
                bins[index] = (used + weight, members)
                break
        else:
            bins.append((weight, [item]))
    return [members for _, members in bins]
