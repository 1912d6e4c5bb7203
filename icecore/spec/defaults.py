"""Column default values (spec "Default values", v3): what a reader fills in for a column a
data file lacks (`initial-default`), and what a writer stores when given nothing
(`write-default`).

A `NestedField` keeps both as the JSON single-value form of Appendix D, exactly as the
metadata spelled it; here they are read into memory values, built from them, and checked
against the field's type. This sits apart from `types` because the JSON codec
(`icecore.spec.conversions`) dispatches on the type classes: a field that decoded its own
defaults would make the two modules import each other. A `Schema` checks every field's
defaults when it is built, so metadata with a default its column cannot hold is refused.
"""

from __future__ import annotations

from typing import Any

from icecore.errors import ValidationError
from icecore.spec.conversions import value_from_json, value_to_json
from icecore.spec.types import JSON_NULL, NULL_DEFAULT_ONLY, NestedField, StructType

_KEYS = {"initial_default": "initial-default", "write_default": "write-default"}


def initial_default_value(field: NestedField) -> Any:
    """The value of `field` in rows written before it was added (spec "Column Projection":
    a data file without the column reads this), in memory; None for null.

    A struct field's default is a struct whose missing fields take their own
    `initial-default` (spec "Default values": `{}` means "each field's default").
    """
    return _value(field, "initial_default")


def write_default_value(field: NestedField) -> Any:
    """The value a writer stores when it is not given one, in memory; None for null."""
    return _value(field, "write_default")


def with_defaults(field: NestedField, initial: Any = None, write: Any = None) -> NestedField:
    """`field` with defaults given as in-memory values (None: no default).

    A struct field's default may only be None or `{}`: its fields' defaults belong to those
    fields (spec "Default values").
    """

    def encode(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(field.field_type, StructType):
            if value != {}:
                raise ValidationError(
                    f"the default of struct field {field.name!r} can only be null or {{}}; "
                    "set its fields' defaults on the fields"
                )
            return {}
        return value_to_json(field.field_type, value)

    return NestedField(
        field.field_id,
        field.name,
        field.field_type,
        field.required,
        field.doc,
        encode(initial),
        encode(write),
    )


def check_defaults(field: NestedField) -> None:
    """Raise `ValidationError` if a default of `field` is not a value of its type (a
    struct's own: its fields' defaults are checked with those fields)."""
    for attribute, key in _KEYS.items():
        raw = getattr(field, attribute)
        if raw is not None and raw is not JSON_NULL:
            _parse(field, raw, key, shallow=True)


def _value(field: NestedField, attribute: str) -> Any:
    raw = getattr(field, attribute)
    if raw is None or raw is JSON_NULL:
        return None
    key = _KEYS[attribute]
    t = field.field_type
    if isinstance(t, StructType):
        _parse(field, raw, key, shallow=True)
        return {
            f.name: _child(field, f, raw[str(f.field_id)], key)
            if str(f.field_id) in raw
            else _value(f, attribute)
            for f in t.fields
        }
    return _parse(field, raw, key, shallow=False)


def _child(parent: NestedField, child: NestedField, raw: Any, key: str) -> Any:
    try:
        return value_from_json(child.field_type, raw)
    except ValidationError as exc:
        raise ValidationError(
            f"{key} of field {parent.name!r} (id {parent.field_id}), field {child.name!r}: {exc}"
        ) from None


def _parse(field: NestedField, raw: Any, key: str, *, shallow: bool) -> Any:
    """The in-memory value of a default; `shallow` checks a struct's own values only (its
    missing fields' defaults are checked with those fields)."""
    where = f"{key} of field {field.name!r} (id {field.field_id})"
    if isinstance(field.field_type, NULL_DEFAULT_ONLY):
        raise ValidationError(
            f"{where}: a {field.field_type} column must default to null, got {raw!r}"
        )
    if isinstance(field.field_type, StructType):
        if not isinstance(raw, dict):
            raise ValidationError(f"{where}: a struct default is a JSON object, got {raw!r}")
        if shallow:
            known = {str(f.field_id): f for f in field.field_type.fields}
            for k, v in raw.items():
                if k not in known:
                    raise ValidationError(f"{where}: the struct has no field id {k}")
                _child(field, known[k], v, key)
            return None
    try:
        return value_from_json(field.field_type, raw)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None
