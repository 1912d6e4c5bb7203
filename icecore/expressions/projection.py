"""Inclusive projection: a row filter turned into a filter on partition values.

The projection of `p` must be true for every partition that can hold a row matching `p`
(it may be true for more). Per transform, as in Iceberg Java's `Projections.inclusive`:
identity keeps every predicate; bucket keeps only = and in; truncate and the time transforms
keep comparisons by first closing open bounds (`x < v` is `x <= v - 1` for integers, so the
boundary's own partition is not lost); void and unprojectable predicates become AlwaysTrue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icecore.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    Operation,
    Or,
    bind,
    rewrite_not,
)
from icecore.spec.conversions import decimal_to_unscaled, unscaled_to_decimal
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import (
    BucketTransform,
    DayTransform,
    IdentityTransform,
    TimeTransform,
    TruncateTransform,
)
from icecore.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    IcebergType,
    NestedField,
    StringType,
)

_CLOSED = {
    Operation.LT: Operation.LT_EQ,
    Operation.LT_EQ: Operation.LT_EQ,
    Operation.GT: Operation.GT_EQ,
    Operation.GT_EQ: Operation.GT_EQ,
    Operation.EQ: Operation.EQ,
}


def inclusive_projection(
    spec: PartitionSpec, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True
) -> BooleanExpression:
    """`expr` (unbound or bound to `schema`) as a bound filter on the partition fields of `spec`.

    A column partitioned several ways (say day(ts) and hour(ts)) gets the And of every
    projection: a partition must satisfy all of them to hold a matching row.
    """
    fields = {f.field_id: f for f in spec.partition_type(schema).fields}
    by_source: dict[int, list[tuple[PartitionField, NestedField]]] = {}
    for pf in spec.fields:
        by_source.setdefault(pf.source_id, []).append((pf, fields[pf.field_id]))
    bound = bind(rewrite_not(expr), schema, case_sensitive)
    return _project(bound, by_source)


def _project(
    expr: BooleanExpression, by_source: dict[int, list[tuple[PartitionField, NestedField]]]
) -> BooleanExpression:
    if isinstance(expr, And):
        return And(_project(expr.left, by_source), _project(expr.right, by_source))
    if isinstance(expr, Or):
        return Or(_project(expr.left, by_source), _project(expr.right, by_source))
    if not isinstance(expr, BoundPredicate):
        return expr  # AlwaysTrue / AlwaysFalse; rewrite_not left no Not behind
    result: BooleanExpression = AlwaysTrue()
    for pf, target in by_source.get(expr.field_id, ()):
        projected = project_predicate(pf, target, expr)
        if projected is not None:
            result = And(result, projected)
    return result


def project_predicate(
    pf: PartitionField, target: NestedField, pred: BoundPredicate
) -> BooleanExpression | None:
    """One predicate on a source column projected through one partition field, or None."""
    transform = pf.transform
    source = pred.field_type
    if transform.is_void:
        return None
    if pred.op.is_unary:
        return BoundPredicate(pred.op, target, pf.name)
    if isinstance(transform, IdentityTransform):
        return BoundPredicate(pred.op, target, pf.name, pred.literal, pred.literals)

    def apply(value: Any) -> Any:
        return transform.apply(value, source)

    if isinstance(transform, BucketTransform):
        if pred.op in (Operation.EQ, Operation.IN):
            return _transformed(pred, pf, target, pred.op, apply)
        return None
    if isinstance(transform, TruncateTransform):
        return _project_ordered(pred, pf, target, apply, _step(source))
    if isinstance(transform, TimeTransform):
        projected = _project_ordered(pred, pf, target, apply, _step(source))
        if isinstance(transform, DayTransform) and isinstance(source, DateType):
            return projected  # day(date) is the date itself: never had the pre-0.11 bug
        return _fix_pre_0_11_time_values(projected)
    return None


def _project_ordered(
    pred: BoundPredicate,
    pf: PartitionField,
    target: NestedField,
    apply: Callable[[Any], Any],
    step: Callable[[Any, int], Any] | None,
) -> BoundPredicate | None:
    """Projection through an order-preserving transform (truncate, year/month/day/hour).

    Strict bounds are closed first where the source type is discrete: x < v becomes
    x <= v - 1, whose transform may be a smaller partition than v's (truncate[10] of
    x < 10 is p <= 0, not p <= 10). Strings and binary have no predecessor, so their strict
    bounds are just closed (x < 'abc' is p <= truncate('abc')).
    """
    op = pred.op
    if op is Operation.IN:
        return _transformed(pred, pf, target, op, apply)
    if op not in _CLOSED:
        return None  # != and not in cannot be projected inclusively
    value = pred.literal
    if step is not None and op is Operation.LT:
        value = step(value, -1)
    elif step is not None and op is Operation.GT:
        value = step(value, 1)
    return BoundPredicate(_CLOSED[op], target, pf.name, literal=apply(value))


def _transformed(
    pred: BoundPredicate,
    pf: PartitionField,
    target: NestedField,
    op: Operation,
    apply: Callable[[Any], Any],
) -> BoundPredicate:
    if op.is_set:
        values = frozenset(apply(v) for v in pred.literals)
        if len(values) == 1:
            return BoundPredicate(Operation.EQ, target, pf.name, literal=next(iter(values)))
        return BoundPredicate(op, target, pf.name, literals=values)
    return BoundPredicate(op, target, pf.name, literal=apply(pred.literal))


def _step(source: IcebergType) -> Callable[[Any, int], Any] | None:
    """Move a value by one unit of its type (int, day, microsecond, unscaled decimal digit);
    None for strings and binary, which have no predecessor or successor."""
    if isinstance(source, DecimalType):
        return lambda v, d: unscaled_to_decimal(source, decimal_to_unscaled(source, v) + d)
    if isinstance(source, StringType | BinaryType):
        return None
    return lambda v, d: v + d


def _fix_pre_0_11_time_values(pred: BoundPredicate | None) -> BoundPredicate | None:
    """Widen a time projection to also match values written by Iceberg 0.10 and earlier.

    Those versions put pre-1970 values one partition too high (day(1969-12-31T10:00) was 0,
    not -1), and their files are still in old tables: a negative projected bound must also
    admit the value one above it, like Java's `ProjectionUtil.fixInclusiveTimeProjection`.
    """
    if pred is None:
        return None
    if pred.op is Operation.LT_EQ and pred.literal < 0:
        return BoundPredicate(pred.op, pred.field, pred.column, literal=pred.literal + 1)
    if pred.op is Operation.EQ and pred.literal < 0:
        values = frozenset({pred.literal, pred.literal + 1})
        return BoundPredicate(Operation.IN, pred.field, pred.column, literals=values)
    if pred.op is Operation.IN and any(v < 0 for v in pred.literals):
        values = pred.literals | {v + 1 for v in pred.literals if v < 0}
        return BoundPredicate(Operation.IN, pred.field, pred.column, literals=values)
    return pred
