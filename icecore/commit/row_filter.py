"""Does a row filter match some, or all, rows of a file? (Java's inclusive and strict evaluators.)

Deleting by row filter removes whole files: a file goes only when every one of its rows is
known to match, and a file where some rows might match but not provably all is an error
("Cannot delete file where some, but not all, rows match filter"), since dropping it would
lose rows and keeping it would keep rows the caller asked to delete.

"Might match" uses icecore's inclusive evaluators (partition projection, then column
metrics). "Must match" is proven per predicate from either the file's partition value, when
the column is identity-partitioned (every row then has exactly that value), or from the
column metrics of a top-level column. The rules are deliberately stricter than Java's
`StrictMetricsEvaluator` in one place: `!=` and `not in` are only proven for columns known to
hold no nulls and no NaN, since SQL does not count a null as different from anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from icecore.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    Operation,
    Or,
    bind,
    rewrite_not,
)
from icecore.expressions.projection import inclusive_projection
from icecore.expressions.pruning import MetricsEvaluator, PartitionEvaluator
from icecore.spec.conversions import decoder
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata import TableMetadata
from icecore.spec.transforms import IdentityTransform
from icecore.spec.types import DoubleType, FloatType

Check = Callable[[DataFile], bool]


class RowFilterMatcher:
    """`might_match(file)` and `must_match(file)` for one filter on one table version."""

    def __init__(
        self, metadata: TableMetadata, row_filter: BooleanExpression, case_sensitive: bool = True
    ) -> None:
        self._metadata = metadata
        self._schema = metadata.schema()
        self._filter = row_filter
        self._case_sensitive = case_sensitive
        self._bound = bind(rewrite_not(row_filter), self._schema, case_sensitive)
        self._metrics = MetricsEvaluator(self._schema, row_filter, case_sensitive)
        self._top_level = {f.field_id for f in self._schema.fields}
        self._partition_checks: dict[int, Callable[[tuple], bool]] = {}
        self._strict_checks: dict[int, Check] = {}

    def might_match(self, data_file: DataFile) -> bool:
        """Whether some row of a data file may match, by partition and column metrics."""
        return self.partition_might_match(data_file) and self._metrics.eval(data_file)

    def partition_might_match(self, content_file: DataFile) -> bool:
        """Whether the file's partition may hold matching rows (for delete files, whose
        metrics describe what they delete)."""
        check = self._partition_checks.get(content_file.spec_id)
        if check is None:
            spec = self._metadata.spec_by_id(content_file.spec_id)
            projected = inclusive_projection(spec, self._schema, self._filter, self._case_sensitive)
            check = PartitionEvaluator(spec.partition_type(self._schema), projected).eval
            self._partition_checks[content_file.spec_id] = check
        return check(content_file.partition)

    def must_match(self, data_file: DataFile) -> bool:
        if data_file.record_count == 0:
            return True
        check = self._strict_checks.get(data_file.spec_id)
        if check is None:
            check = self._strict_checks[data_file.spec_id] = self._compile(
                self._bound, self._identity_positions(data_file.spec_id)
            )
        return check(data_file)

    def _identity_positions(self, spec_id: int) -> dict[int, int]:
        """Source column id -> position of its identity partition field in `spec_id`."""
        spec = self._metadata.spec_by_id(spec_id)
        return {
            f.source_id: i
            for i, f in enumerate(spec.fields)
            if isinstance(f.transform, IdentityTransform)
        }

    def _compile(self, expr: BooleanExpression, identity: dict[int, int]) -> Check:
        if expr is AlwaysTrue():
            return lambda _: True
        if expr is AlwaysFalse():
            return lambda _: False
        if isinstance(expr, And):
            left, right = self._compile(expr.left, identity), self._compile(expr.right, identity)
            return lambda f: left(f) and right(f)
        if isinstance(expr, Or):
            left, right = self._compile(expr.left, identity), self._compile(expr.right, identity)
            return lambda f: left(f) or right(f)
        assert isinstance(expr, BoundPredicate), expr
        position = identity.get(expr.field_id)
        if position is not None:
            matches = _value_check(expr)
            return lambda f: matches(f.partition[position])
        if expr.field_id not in self._top_level:
            return lambda _: False  # a nested column's metrics prove nothing about every row
        return _strict_metrics(expr)


def _value_check(pred: BoundPredicate) -> Callable[[Any], bool]:
    """Whether one known value satisfies `pred` (SQL: null and NaN satisfy no comparison)."""
    op, lit = pred.op, pred.literal

    def is_nan(v: Any) -> bool:
        return isinstance(v, float) and math.isnan(v)

    def comparable(v: Any) -> bool:
        return v is not None and not is_nan(v)

    checks: dict[Operation, Callable[[Any], bool]] = {
        Operation.IS_NULL: lambda v: v is None,
        Operation.NOT_NULL: lambda v: v is not None,
        Operation.IS_NAN: is_nan,
        Operation.NOT_NAN: lambda v: not is_nan(v),
        Operation.LT: lambda v: comparable(v) and v < lit,
        Operation.LT_EQ: lambda v: comparable(v) and v <= lit,
        Operation.GT: lambda v: comparable(v) and v > lit,
        Operation.GT_EQ: lambda v: comparable(v) and v >= lit,
        Operation.EQ: lambda v: comparable(v) and v == lit,
        Operation.NOT_EQ: lambda v: comparable(v) and v != lit,
        Operation.IN: lambda v: comparable(v) and v in pred.literals,
        Operation.NOT_IN: lambda v: comparable(v) and v not in pred.literals,
    }
    return checks[op]


class _Column:
    """One column's metrics in a file, read the way a strict proof needs them."""

    def __init__(self, pred: BoundPredicate) -> None:
        self.fid = pred.field_id
        self.is_float = isinstance(pred.field_type, FloatType | DoubleType)
        self.required = pred.field.required
        self.decode = decoder(pred.field_type)

    def count(self, counts: dict[int, int] | None) -> int | None:
        return None if counts is None else counts.get(self.fid)

    def no_nulls(self, f: DataFile) -> bool:
        return self.required or self.count(f.null_value_counts) == 0

    def no_nans(self, f: DataFile) -> bool:
        return not self.is_float or self.count(f.nan_value_counts) == 0

    def all_null(self, f: DataFile) -> bool:
        return self.count(f.null_value_counts) == f.record_count

    def all_nan(self, f: DataFile) -> bool:
        return self.is_float and self.count(f.nan_value_counts) == f.record_count

    def bounds(self, f: DataFile) -> tuple[Any, Any] | None:
        """(lower, upper) of a column known to hold no nulls and no NaN, or None."""
        if not (self.no_nulls(f) and self.no_nans(f)):
            return None
        lower = None if f.lower_bounds is None else f.lower_bounds.get(self.fid)
        upper = None if f.upper_bounds is None else f.upper_bounds.get(self.fid)
        if lower is None or upper is None:
            return None
        low, high = self.decode(lower), self.decode(upper)
        if self.is_float and (math.isnan(low) or math.isnan(high)):
            return None
        return low, high

    def unique(self, f: DataFile) -> Any:
        b = self.bounds(f)
        if b is None or b[0] != b[1] or (self.is_float and b[0] == 0):
            return None  # a 0.0 bound may stand for -0.0 as well
        return b[0]


def _strict_metrics(pred: BoundPredicate) -> Check:
    """Whether the metrics prove that every row of a file satisfies `pred`.

    An equality delete file deletes rows by its equality columns only: values it stores for
    any other column prove nothing about the rows it deletes.
    """
    check = _strict_check(pred, _Column(pred))
    fid = pred.field_id

    def guarded(f: DataFile) -> bool:
        if f.content == FileContent.EQUALITY_DELETES and fid not in (f.equality_ids or ()):
            return False
        return check(f)

    return guarded


def _strict_check(pred: BoundPredicate, c: _Column) -> Check:
    op, lit = pred.op, pred.literal
    if op is Operation.IS_NULL:
        return c.all_null
    if op is Operation.NOT_NULL:
        return c.no_nulls
    if op is Operation.IS_NAN:
        return c.all_nan
    if op is Operation.NOT_NAN:
        return c.no_nans
    if op is Operation.LT:
        return lambda f: (b := c.bounds(f)) is not None and b[1] < lit
    if op is Operation.LT_EQ:
        return lambda f: (b := c.bounds(f)) is not None and b[1] <= lit
    if op is Operation.GT:
        return lambda f: (b := c.bounds(f)) is not None and b[0] > lit
    if op is Operation.GT_EQ:
        return lambda f: (b := c.bounds(f)) is not None and b[0] >= lit
    if op is Operation.EQ:
        return lambda f: (v := c.unique(f)) is not None and v == lit
    if op is Operation.IN:
        return lambda f: (v := c.unique(f)) is not None and v in pred.literals
    if op is Operation.NOT_EQ:
        return lambda f: (b := c.bounds(f)) is not None and (lit < b[0] or lit > b[1])
    return lambda f: (
        (b := c.bounds(f)) is not None and all(v < b[0] or v > b[1] for v in pred.literals)
    )
