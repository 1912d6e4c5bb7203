"""Which file sizes are worth rewriting, with Iceberg's defaults (both compactions, and the
health report's small files)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from icecore.errors import ValidationError

# Java's SizeBasedFileRewritePlanner: files under 75% of the target are small (Amoro's
# `self-optimizing.min-target-size-ratio` is the same), over 180% large.
MIN_FRACTION = 0.75
MAX_FRACTION = 1.8


@dataclass(frozen=True)
class FileSizeBounds:
    """Files below `min_size` or above `max_size` are worth rewriting."""

    target: int
    min_size: int
    max_size: int

    @classmethod
    def of(cls, target: int, min_size: int | None, max_size: int | None) -> FileSizeBounds:
        """The bounds with Iceberg's defaults for the sizes not given; a ValidationError naming
        the option (Iceberg's name) when they do not fit around the target."""
        low = int(target * MIN_FRACTION) if min_size is None else min_size
        high = int(target * MAX_FRACTION) if max_size is None else max_size
        if not 0 <= low <= target:
            raise ValidationError(
                f"min-file-size-bytes {low} must lie between 0 and the target {target}"
            )
        if high < target:
            raise ValidationError(
                f"max-file-size-bytes {high} must be at least the target {target}"
            )
        return cls(target, low, high)

    def write_max_file_size(self) -> int:
        """Iceberg's writer limit: half way between target and max."""
        return int(self.target + 0.5 * (self.max_size - self.target))

    def output_files(self, input_size: int) -> int:
        """Iceberg's `numOutputFiles`: round the remainder up only when it is a real file."""
        target = self.target
        if input_size < target:
            return 1
        with_remainder = math.ceil(input_size / target)
        without = input_size // target
        if input_size % target > self.min_size:
            return with_remainder
        if input_size / without < min(1.1 * target, self.write_max_file_size()):
            return without
        return with_remainder
