"""Pruning evaluators: may a manifest, a partition or a data file hold rows matching a filter?

Each answers "might match" (True) or "cannot match" (False), with the semantics of Iceberg
Java's ManifestEvaluator, Evaluator and InclusiveMetricsEvaluator. False must only ever be
returned when no matching row can exist: a false negative silently drops data from a scan or
a compaction, a false positive only costs a file read. Missing statistics therefore always
mean "might match".

Comparisons follow SQL and Iceberg: null and NaN satisfy no comparison (bounds and partition
summaries exclude NaN, the NaN counts say whether there are any), and predicates arrive with
every Not already pushed down (`rewrite_not`), since "not might-match" is not "cannot match".

The evaluators run once per manifest or data file over hundreds of thousands of files, so
the expression is bound once and compiled into nested closures; bounds are decoded with a
serializer looked up once per predicate, and only when a predicate needs them.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from icecore.errors import ValidationError
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
from icecore.spec.conversions import decoder
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.types import DoubleType, FloatType, StructType

Check = Callable[[Any], bool]


def _compile(expr: BooleanExpression, leaf: Callable[[BoundPredicate], Check]) -> Check:
    if expr is AlwaysTrue():
        return lambda _: True
    if expr is AlwaysFalse():
        return lambda _: False
    if isinstance(expr, And):
        left, right = _compile(expr.left, leaf), _compile(expr.right, leaf)
        return lambda x: left(x) and right(x)
    if isinstance(expr, Or):
        left, right = _compile(expr.left, leaf), _compile(expr.right, leaf)
        return lambda x: left(x) or right(x)
    if isinstance(expr, BoundPredicate):
        return leaf(expr)
    raise ValidationError(f"cannot evaluate {expr!r}: bind it and push Not down first")


def _is_float(pred: BoundPredicate) -> bool:
    return isinstance(pred.field_type, FloatType | DoubleType)


def _bound_decoder(pred: BoundPredicate) -> Callable[[bytes], Any]:
    """Decodes a serialized bound; a NaN bound (stored by writers that predate the spec's
    rule that bounds exclude NaN) decodes to None, i.e. unknown."""
    decode = decoder(pred.field_type)
    if not _is_float(pred):
        return decode

    def decode_float(raw: bytes) -> Any:
        value = decode(raw)
        return None if math.isnan(value) else value

    return decode_float


def _unique(lower: Any, upper: Any, is_float: bool) -> Any:
    """The single value bounds pin down (lower == upper), or None.

    A zero float is never taken as unique: Parquet lets a 0.0 bound stand for -0.0 values
    too, and Java tells the two apart.
    """
    if lower is None or lower != upper or (is_float and lower == 0):
        return None
    return lower


def _any_within(literals: list[Any], lower: Any, upper: Any) -> bool:
    """Whether some literal lies in [lower, upper]; None is an open end. Sorted literals make
    this a binary search, so large IN lists still prune (Java gives up above 200)."""
    i = 0 if lower is None else bisect_left(literals, lower)
    return i < len(literals) and (upper is None or literals[i] <= upper)


class PartitionEvaluator:
    """Evaluates a partition filter on one partition tuple (values in spec field order).

    Semantics are SQL's, as in the inclusive evaluators: a null or NaN partition value
    satisfies no comparison and no `in`. For `!=` and `not in` a null value answers True,
    like Java's row Evaluator, because that is the answer that can never lose a row.
    """

    def __init__(
        self,
        partition_type: StructType,
        partition_expr: BooleanExpression,
        case_sensitive: bool = True,
    ) -> None:
        self.expr = bind(rewrite_not(partition_expr), partition_type, case_sensitive)
        self._positions = {f.field_id: i for i, f in enumerate(partition_type.fields)}
        self._check = _compile(self.expr, self._predicate)

    def eval(self, partition: tuple[Any, ...]) -> bool:
        return self._check(partition)

    def _predicate(self, pred: BoundPredicate) -> Check:
        pos, op, lit = self._positions[pred.field_id], pred.op, pred.literal
        if op is Operation.IS_NULL:
            return lambda p: p[pos] is None
        if op is Operation.NOT_NULL:
            return lambda p: p[pos] is not None
        if op is Operation.IS_NAN:
            return lambda p: p[pos] is not None and math.isnan(p[pos])
        if op is Operation.NOT_NAN:
            return lambda p: p[pos] is None or not math.isnan(p[pos])
        if op is Operation.IN:
            return lambda p: p[pos] in pred.literals
        if op is Operation.NOT_IN:
            return lambda p: p[pos] not in pred.literals
        if op is Operation.NOT_EQ:
            return lambda p: p[pos] != lit
        if op is Operation.EQ:
            return lambda p: p[pos] == lit
        if op is Operation.LT:
            return lambda p: p[pos] is not None and p[pos] < lit
        if op is Operation.LT_EQ:
            return lambda p: p[pos] is not None and p[pos] <= lit
        if op is Operation.GT:
            return lambda p: p[pos] is not None and p[pos] > lit
        return lambda p: p[pos] is not None and p[pos] >= lit


class ManifestEvaluator:
    """May a manifest hold matching entries, judged by its partition field summaries?

    `manifest.partitions` holds one summary per partition field (`contains_null`,
    `contains_nan`, `lower_bound`, `upper_bound` as serialized bytes). A summary's bounds
    cover the non-null, non-NaN values, so a missing lower bound means every value is null
    (or NaN).
    """

    def __init__(
        self,
        partition_type: StructType,
        partition_expr: BooleanExpression,
        case_sensitive: bool = True,
    ) -> None:
        self.expr = bind(rewrite_not(partition_expr), partition_type, case_sensitive)
        self._size = len(partition_type.fields)
        self._positions = {f.field_id: i for i, f in enumerate(partition_type.fields)}
        self._check = _compile(self.expr, self._predicate)

    @classmethod
    def for_row_filter(
        cls, spec: PartitionSpec, schema: Schema, row_filter: BooleanExpression
    ) -> ManifestEvaluator:
        """An evaluator for a filter on table columns, through the spec's inclusive projection."""
        projected = inclusive_projection(spec, schema, row_filter)
        return cls(spec.partition_type(schema), projected)

    def eval(self, manifest: Any) -> bool:
        summaries = manifest.partitions
        if summaries is None:
            return True
        if len(summaries) != self._size:
            raise ValidationError(
                f"manifest {getattr(manifest, 'manifest_path', '')!s}: has {len(summaries)} "
                f"partition summaries, its partition spec has {self._size} fields"
            )
        return self._check(summaries)

    def _predicate(self, pred: BoundPredicate) -> Check:
        pos, op, lit = self._positions[pred.field_id], pred.op, pred.literal
        decode = _bound_decoder(pred)
        is_float = _is_float(pred)

        def decoded(raw: bytes | None) -> Any:
            return None if raw is None else decode(raw)

        def all_null(s: Any) -> bool:
            if not s.contains_null or s.lower_bound is not None:
                return False
            # Float bounds also exclude NaN: all-null needs NaN known to be absent.
            return not is_float or s.contains_nan is False

        def unique(s: Any) -> Any:
            if s.contains_null or (is_float and s.contains_nan is not False):
                return None
            return _unique(decoded(s.lower_bound), decoded(s.upper_bound), is_float)

        if op is Operation.IS_NULL:
            return lambda ss: bool(ss[pos].contains_null)
        if op is Operation.NOT_NULL:
            return lambda ss: not all_null(ss[pos])
        if op is Operation.IS_NAN:
            return lambda ss: ss[pos].contains_nan is not False and not all_null(ss[pos])
        if op is Operation.NOT_NAN:
            return lambda ss: (
                not (
                    ss[pos].contains_nan
                    and not ss[pos].contains_null
                    and ss[pos].lower_bound is None
                )
            )
        if op is Operation.NOT_EQ:
            return lambda ss: (v := unique(ss[pos])) is None or v != lit
        if op is Operation.NOT_IN:
            return lambda ss: (v := unique(ss[pos])) is None or v not in pred.literals

        # Comparisons, = and in: no lower bound means no value but null or NaN, which match none.
        def bounds(s: Any) -> tuple[Any, Any] | None:
            if s.lower_bound is None:
                return None
            return decoded(s.lower_bound), decoded(s.upper_bound)

        if op is Operation.IN:
            literals = sorted(pred.literals)
            return lambda ss: (b := bounds(ss[pos])) is not None and _any_within(literals, *b)
        return _range_check(op, lit, lambda ss: bounds(ss[pos]))


class MetricsEvaluator:
    """May a data file hold matching rows, judged by its column metrics?

    `data_file` needs `record_count` and the per-field-id maps `value_counts`,
    `null_value_counts`, `nan_value_counts`, `lower_bounds` and `upper_bounds` (each may be
    None or lack a field). Bounds may be truncated (string and binary, `truncate(16)`): the
    lower one is a prefix, the upper one was rounded up, so the inclusive comparisons used
    here stay correct. Float and double bounds exclude NaN.
    """

    def __init__(self, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True):
        self.expr = bind(rewrite_not(expr), schema, case_sensitive)
        self._check = _compile(self.expr, self._predicate)

    def eval(self, data_file: Any) -> bool:
        count = data_file.record_count
        if count == 0:
            return False
        if count < 0:  # unknown (imported Avro files); nothing can be concluded
            return True
        return self._check(data_file)

    def _predicate(self, pred: BoundPredicate) -> Check:
        fid, op, lit = pred.field_id, pred.op, pred.literal
        decode = _bound_decoder(pred)
        is_float = _is_float(pred)

        def count(counts: dict[int, int] | None) -> int | None:
            return None if counts is None else counts.get(fid)

        def may_contain_null(f: Any) -> bool:
            nulls = count(f.null_value_counts)
            return nulls is None or nulls != 0

        def may_contain_nan(f: Any) -> bool:
            nans = count(f.nan_value_counts)
            return nans is None or nans != 0

        def nulls_only(f: Any) -> bool:
            values, nulls = count(f.value_counts), count(f.null_value_counts)
            return values is not None and nulls is not None and values == nulls

        def nans_only(f: Any) -> bool:
            values, nans = count(f.value_counts), count(f.nan_value_counts)
            return values is not None and nans is not None and values == nans

        def bound(f: Any, bounds: dict[int, bytes] | None) -> Any:
            raw = None if bounds is None else bounds.get(fid)
            if raw is None:
                return None
            try:
                return decode(raw)
            except ValidationError as exc:
                path = getattr(f, "file_path", "")
                raise ValidationError(f"data file {path}: bound of field {fid}: {exc}") from None

        def bounds(f: Any) -> tuple[Any, Any] | None:
            if nulls_only(f) or nans_only(f):
                return None
            return bound(f, f.lower_bounds), bound(f, f.upper_bounds)

        def unique(f: Any) -> Any:
            """The column's only value: no nulls, no NaN, lower == upper; else None."""
            if may_contain_null(f) or (is_float and may_contain_nan(f)):
                return None
            return _unique(bound(f, f.lower_bounds), bound(f, f.upper_bounds), is_float)

        if op is Operation.IS_NULL:
            return may_contain_null
        if op is Operation.NOT_NULL:
            return lambda f: not nulls_only(f)
        if op is Operation.IS_NAN:
            return lambda f: not nulls_only(f) and may_contain_nan(f)
        if op is Operation.NOT_NAN:
            return lambda f: not nans_only(f)
        if op is Operation.NOT_EQ:
            return lambda f: (v := unique(f)) is None or v != lit
        if op is Operation.NOT_IN:
            return lambda f: (v := unique(f)) is None or v not in pred.literals
        if op is Operation.IN:
            literals = sorted(pred.literals)
            return lambda f: (b := bounds(f)) is not None and _any_within(literals, *b)
        return _range_check(op, lit, bounds)


def _range_check(op: Operation, lit: Any, bounds: Callable[[Any], tuple[Any, Any] | None]) -> Check:
    """<, <=, >, >= and = against (lower, upper): a None bound is an open end, and no pair at
    all means the values are all null or NaN, which satisfy no comparison."""
    if op is Operation.LT:
        return lambda x: (b := bounds(x)) is not None and (b[0] is None or b[0] < lit)
    if op is Operation.LT_EQ:
        return lambda x: (b := bounds(x)) is not None and (b[0] is None or b[0] <= lit)
    if op is Operation.GT:
        return lambda x: (b := bounds(x)) is not None and (b[1] is None or b[1] > lit)
    if op is Operation.GT_EQ:
        return lambda x: (b := bounds(x)) is not None and (b[1] is None or b[1] >= lit)
    return lambda x: (
        (b := bounds(x)) is not None
        and ((b[0] is None or b[0] <= lit) and (b[1] is None or b[1] >= lit))
    )
