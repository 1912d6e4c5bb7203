"""Filter expressions: unbound predicates on column names, and their binding to field ids.

Filters are written against names (`equal("id", 5)`) and bound to a schema before use. Binding
resolves the name to a field id, which is what survives column renames, and converts each
literal to the column's in-memory value (see `icecore.expressions.literals`), so evaluators
compare like with like and never guess. Constructors simplify as they go (`And(x, AlwaysFalse())` is
`AlwaysFalse()`), which keeps planning from evaluating branches that cannot change the answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from icecore.errors import ValidationError
from icecore.expressions.literals import to_literal
from icecore.spec.schema import Schema
from icecore.spec.types import DoubleType, FloatType, NestedField, StructType


class Operation(Enum):
    IS_NULL = "is_null"
    NOT_NULL = "not_null"
    IS_NAN = "is_nan"
    NOT_NAN = "not_nan"
    LT = "<"
    LT_EQ = "<="
    GT = ">"
    GT_EQ = ">="
    EQ = "=="
    NOT_EQ = "!="
    IN = "in"
    NOT_IN = "not_in"

    @property
    def negated(self) -> Operation:
        return _NEGATED[self]

    @property
    def is_unary(self) -> bool:
        return self in UNARY_OPS

    @property
    def is_set(self) -> bool:
        return self in SET_OPS


_NEGATED = {
    Operation.IS_NULL: Operation.NOT_NULL,
    Operation.NOT_NULL: Operation.IS_NULL,
    Operation.IS_NAN: Operation.NOT_NAN,
    Operation.NOT_NAN: Operation.IS_NAN,
    Operation.LT: Operation.GT_EQ,
    Operation.GT_EQ: Operation.LT,
    Operation.LT_EQ: Operation.GT,
    Operation.GT: Operation.LT_EQ,
    Operation.EQ: Operation.NOT_EQ,
    Operation.NOT_EQ: Operation.EQ,
    Operation.IN: Operation.NOT_IN,
    Operation.NOT_IN: Operation.IN,
}
UNARY_OPS = frozenset({Operation.IS_NULL, Operation.NOT_NULL, Operation.IS_NAN, Operation.NOT_NAN})
SET_OPS = frozenset({Operation.IN, Operation.NOT_IN})


class BooleanExpression(ABC):
    """A filter; `a & b`, `a | b` and `~a` build And, Or and Not."""

    @abstractmethod
    def negate(self) -> BooleanExpression:
        """The logical complement, with the negation pushed one level down."""

    def __and__(self, other: BooleanExpression) -> BooleanExpression:
        return And(self, other)

    def __or__(self, other: BooleanExpression) -> BooleanExpression:
        return Or(self, other)

    def __invert__(self) -> BooleanExpression:
        return Not(self)


class AlwaysTrue(BooleanExpression):
    """Matches every row; a singleton."""

    _instance: AlwaysTrue | None = None

    def __new__(cls) -> AlwaysTrue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> BooleanExpression:
        return AlwaysFalse()

    def __repr__(self) -> str:
        return "AlwaysTrue()"


class AlwaysFalse(BooleanExpression):
    """Matches no row; a singleton."""

    _instance: AlwaysFalse | None = None

    def __new__(cls) -> AlwaysFalse:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> BooleanExpression:
        return AlwaysTrue()

    def __repr__(self) -> str:
        return "AlwaysFalse()"


def _check_expression(value: Any) -> BooleanExpression:
    if not isinstance(value, BooleanExpression):
        raise ValidationError(f"expected a filter expression, got {value!r}")
    return value


class And(BooleanExpression):
    """Both sides match; `And(a, b, c)` nests left to right."""

    left: BooleanExpression
    right: BooleanExpression

    def __new__(  # type: ignore[misc]
        cls, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression
    ) -> BooleanExpression:
        if rest:
            return And(And(left, right), *rest)
        left, right = _check_expression(left), _check_expression(right)
        if left is AlwaysFalse() or right is AlwaysFalse():
            return AlwaysFalse()
        if left is AlwaysTrue():
            return right
        if right is AlwaysTrue():
            return left
        obj = super().__new__(cls)
        obj.left, obj.right = left, right
        return obj

    def negate(self) -> BooleanExpression:
        return Or(Not(self.left), Not(self.right))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, And) and (self.left, self.right) == (other.left, other.right)

    def __hash__(self) -> int:
        return hash(("and", self.left, self.right))

    def __getnewargs__(self) -> tuple[BooleanExpression, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"And({self.left!r}, {self.right!r})"


class Or(BooleanExpression):
    """Either side matches; `Or(a, b, c)` nests left to right."""

    left: BooleanExpression
    right: BooleanExpression

    def __new__(  # type: ignore[misc]
        cls, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression
    ) -> BooleanExpression:
        if rest:
            return Or(Or(left, right), *rest)
        left, right = _check_expression(left), _check_expression(right)
        if left is AlwaysTrue() or right is AlwaysTrue():
            return AlwaysTrue()
        if left is AlwaysFalse():
            return right
        if right is AlwaysFalse():
            return left
        obj = super().__new__(cls)
        obj.left, obj.right = left, right
        return obj

    def negate(self) -> BooleanExpression:
        return And(Not(self.left), Not(self.right))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Or) and (self.left, self.right) == (other.left, other.right)

    def __hash__(self) -> int:
        return hash(("or", self.left, self.right))

    def __getnewargs__(self) -> tuple[BooleanExpression, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"Or({self.left!r}, {self.right!r})"


class Not(BooleanExpression):
    """The complement; double negation and constants fold away on construction."""

    child: BooleanExpression

    def __new__(cls, child: BooleanExpression) -> BooleanExpression:  # type: ignore[misc]
        child = _check_expression(child)
        if child is AlwaysTrue():
            return AlwaysFalse()
        if child is AlwaysFalse():
            return AlwaysTrue()
        if isinstance(child, Not):
            return child.child
        obj = super().__new__(cls)
        obj.child = child
        return obj

    def negate(self) -> BooleanExpression:
        return self.child

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Not) and self.child == other.child

    def __hash__(self) -> int:
        return hash(("not", self.child))

    def __getnewargs__(self) -> tuple[BooleanExpression, ...]:
        return (self.child,)

    def __repr__(self) -> str:
        return f"Not({self.child!r})"


@dataclass(frozen=True, repr=False)
class UnboundPredicate(BooleanExpression):
    """A predicate on a column name, with literals as the caller gave them."""

    op: Operation
    term: str
    literals: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.term, str) or not self.term:
            raise ValidationError(f"a predicate needs a column name, got {self.term!r}")
        expected = "any number of" if self.op.is_set else ("no" if self.op.is_unary else "one")
        count = len(self.literals)
        single = not self.op.is_set and not self.op.is_unary
        if (self.op.is_unary and count) or (single and count != 1):
            raise ValidationError(f"{self.op.value} takes {expected} literals, got {count}")
        if any(v is None for v in self.literals):
            raise ValidationError(
                f"predicate on {self.term!r} has a null literal; use is_null / not_null"
            )

    @property
    def literal(self) -> Any:
        return self.literals[0]

    def negate(self) -> BooleanExpression:
        return UnboundPredicate(self.op.negated, self.term, self.literals)

    def __repr__(self) -> str:
        if self.op.is_unary:
            return f"{self.op.value}({self.term})"
        value = list(self.literals) if self.op.is_set else self.literal
        return f"{self.term} {self.op.value} {value!r}"


@dataclass(frozen=True, repr=False)
class BoundPredicate(BooleanExpression):
    """A predicate on a field id; literals are in the field type's in-memory representation.

    `literal` is set for comparisons, `literals` for in / not in. `column` is the name it was
    bound from (a dotted source column, or a partition field name), kept for messages.
    """

    op: Operation
    field: NestedField
    column: str
    literal: Any = None
    literals: frozenset[Any] = frozenset()

    @property
    def field_id(self) -> int:
        return self.field.field_id

    @property
    def field_type(self) -> Any:
        return self.field.field_type

    def negate(self) -> BooleanExpression:
        return BoundPredicate(self.op.negated, self.field, self.column, self.literal, self.literals)

    def __repr__(self) -> str:
        if self.op.is_unary:
            return f"{self.op.value}({self.column})"
        value = sorted(self.literals, key=repr) if self.op.is_set else self.literal
        return f"{self.column} {self.op.value} {value!r}"


def is_null(term: str) -> BooleanExpression:
    return UnboundPredicate(Operation.IS_NULL, term)


def not_null(term: str) -> BooleanExpression:
    return UnboundPredicate(Operation.NOT_NULL, term)


def is_nan(term: str) -> BooleanExpression:
    return UnboundPredicate(Operation.IS_NAN, term)


def not_nan(term: str) -> BooleanExpression:
    return UnboundPredicate(Operation.NOT_NAN, term)


def less_than(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.LT, term, (value,))


def less_than_or_equal(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.LT_EQ, term, (value,))


def greater_than(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.GT, term, (value,))


def greater_than_or_equal(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.GT_EQ, term, (value,))


def equal(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.EQ, term, (value,))


def not_equal(term: str, value: Any) -> BooleanExpression:
    return UnboundPredicate(Operation.NOT_EQ, term, (value,))


def is_in(term: str, values: Iterable[Any]) -> BooleanExpression:
    """`term in values`; an empty set matches nothing."""
    values = tuple(values)
    return UnboundPredicate(Operation.IN, term, values) if values else AlwaysFalse()


def not_in(term: str, values: Iterable[Any]) -> BooleanExpression:
    """`term not in values`; an empty set excludes nothing."""
    values = tuple(values)
    return UnboundPredicate(Operation.NOT_IN, term, values) if values else AlwaysTrue()


def rewrite_not(expr: BooleanExpression) -> BooleanExpression:
    """The same filter with every Not pushed into the predicates (De Morgan).

    Inclusive evaluators answer "may match", and the complement of "may match" is not "cannot
    match"; they can only be correct on an expression without Not.
    """
    if isinstance(expr, Not):
        return rewrite_not(expr.child.negate())
    if isinstance(expr, And):
        return And(rewrite_not(expr.left), rewrite_not(expr.right))
    if isinstance(expr, Or):
        return Or(rewrite_not(expr.left), rewrite_not(expr.right))
    return expr


def bind(
    expr: BooleanExpression, struct: Schema | StructType, case_sensitive: bool = True
) -> BooleanExpression:
    """Resolve column names to fields of `struct` and literals to their in-memory values.

    Already-bound predicates are checked against `struct` (same id, same type), so handing an
    evaluator a bound expression for the wrong schema fails loudly instead of mis-pruning.
    """
    index = _FieldIndex(struct.struct if isinstance(struct, Schema) else struct, case_sensitive)
    return _bind(_check_expression(expr), index)


def _bind(expr: BooleanExpression, index: _FieldIndex) -> BooleanExpression:
    if isinstance(expr, And):
        return And(_bind(expr.left, index), _bind(expr.right, index))
    if isinstance(expr, Or):
        return Or(_bind(expr.left, index), _bind(expr.right, index))
    if isinstance(expr, Not):
        return Not(_bind(expr.child, index))
    if isinstance(expr, UnboundPredicate):
        return _bind_predicate(expr, index)
    if isinstance(expr, BoundPredicate):
        found = index.by_id.get(expr.field_id)
        if found is None or found[0].field_type != expr.field_type:
            raise ValidationError(
                f"predicate {expr!r} is bound to field {expr.field_id} ({expr.field_type}), "
                "which this struct does not have"
            )
        return expr
    return expr


def _bind_predicate(pred: UnboundPredicate, index: _FieldIndex) -> BooleanExpression:
    fld, required = index.find(pred.term)
    if not fld.field_type.is_primitive:
        raise ValidationError(f"column {pred.term!r} is a {fld.field_type}, not a primitive")
    op = pred.op
    if op in (Operation.IS_NAN, Operation.NOT_NAN) and not isinstance(
        fld.field_type, FloatType | DoubleType
    ):
        raise ValidationError(
            f"{op.value} needs a float or double column; {pred.term!r} is {fld.field_type}"
        )
    if op is Operation.IS_NULL and required:
        return AlwaysFalse()
    if op is Operation.NOT_NULL and required:
        return AlwaysTrue()
    if op.is_unary:
        return BoundPredicate(op, fld, pred.term)
    try:
        values = [to_literal(fld.field_type, v) for v in pred.literals]
    except ValidationError as exc:
        raise ValidationError(f"column {pred.term!r}: {exc}") from None
    if not op.is_set:
        return BoundPredicate(op, fld, pred.term, literal=values[0])
    unique = frozenset(values)
    if len(unique) == 1:
        single = Operation.EQ if op is Operation.IN else Operation.NOT_EQ
        return BoundPredicate(single, fld, pred.term, literal=next(iter(unique)))
    return BoundPredicate(op, fld, pred.term, literals=unique)


class _FieldIndex:
    """Fields reachable through structs only: a predicate on a list element or map value has
    no single value per row, so it cannot be bound."""

    def __init__(self, struct: StructType, case_sensitive: bool) -> None:
        self.case_sensitive = case_sensitive
        self.by_id: dict[int, tuple[NestedField, bool]] = {}
        self.by_name: dict[str, list[tuple[str, NestedField, bool]]] = {}
        for name, fld, required in _struct_fields(struct, "", True):
            self.by_id[fld.field_id] = (fld, required)
            key = name if case_sensitive else name.lower()
            self.by_name.setdefault(key, []).append((name, fld, required))

    def find(self, name: str) -> tuple[NestedField, bool]:
        matches = self.by_name.get(name if self.case_sensitive else name.lower(), [])
        if not matches:
            raise ValidationError(f"cannot find column {name!r} to filter on")
        if len(matches) > 1:
            names = ", ".join(repr(m[0]) for m in matches)
            raise ValidationError(f"column {name!r} is ambiguous without case: {names}")
        _, fld, required = matches[0]
        return fld, required


def _struct_fields(
    struct: StructType, prefix: str, parents_required: bool
) -> Iterator[tuple[str, NestedField, bool]]:
    for f in struct.fields:
        name = prefix + f.name
        required = parents_required and f.required
        yield name, f, required
        if isinstance(f.field_type, StructType):
            yield from _struct_fields(f.field_type, name + ".", required)
