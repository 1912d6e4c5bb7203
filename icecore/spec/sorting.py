"""Sort orders: how writers should order rows within data files (spec: "Sort Orders")."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.transforms import Transform, parse_transform


class SortDirection(Enum):
    ASC = "asc"
    DESC = "desc"


class NullOrder(Enum):
    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"


@dataclass(frozen=True)
class SortField:
    source_id: int
    transform: Transform
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder = NullOrder.NULLS_FIRST

    def to_json(self) -> dict[str, Any]:
        return {
            "transform": str(self.transform),
            "source-id": self.source_id,
            "direction": self.direction.value,
            "null-order": self.null_order.value,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortField:
        try:
            return cls(
                source_id=int(obj["source-id"]),
                transform=parse_transform(obj["transform"]),
                direction=SortDirection(obj["direction"]),
                null_order=NullOrder(obj["null-order"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValidationError(f"bad sort field {obj!r}: {exc}") from None


@dataclass(frozen=True)
class SortOrder:
    """Order id 0 is reserved for the unsorted order."""

    order_id: int = 0
    fields: tuple[SortField, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.order_id == 0 and self.fields:
            raise ValidationError("sort order id 0 is reserved for the unsorted order")

    @property
    def is_unsorted(self) -> bool:
        return not self.fields

    def to_json(self) -> dict[str, Any]:
        return {"order-id": self.order_id, "fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortOrder:
        try:
            return cls(int(obj["order-id"]), tuple(SortField.from_json(f) for f in obj["fields"]))
        except KeyError as exc:
            raise ValidationError(f"sort order {obj!r} lacks {exc.args[0]!r}") from None


UNSORTED = SortOrder()
