"""Typed access to fields of parsed JSON objects.

`json.loads` accepts anything, and Python would happily treat `true` as 1 or keep "5" as a
string until it broke arithmetic far from the file; these readers check each field's JSON type
where it is read, so the error names the field.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from icecore.errors import ValidationError

T = TypeVar("T")


class _Missing:
    """Marks a required field; None cannot, since None is a legal default."""


_MISSING: Any = _Missing()


def require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def require_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError(f"{what} must be a JSON array, got {type(value).__name__}")
    return value


@overload
def get_int(obj: dict[str, Any], name: str) -> int: ...
@overload
def get_int(obj: dict[str, Any], name: str, default: T) -> int | T: ...
def get_int(obj: dict[str, Any], name: str, default: Any = _MISSING) -> Any:
    """`obj[name]` as an int; a missing or null field gives `default`, or is an error."""
    value = obj.get(name)
    if value is None:
        if default is _MISSING:
            raise ValidationError(f"required field {name!r} is missing")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name!r} must be an integer, got {value!r}")
    return value


@overload
def get_str(obj: dict[str, Any], name: str) -> str: ...
@overload
def get_str(obj: dict[str, Any], name: str, default: T) -> str | T: ...
def get_str(obj: dict[str, Any], name: str, default: Any = _MISSING) -> Any:
    value = obj.get(name)
    if value is None:
        if default is _MISSING:
            raise ValidationError(f"required field {name!r} is missing")
        return default
    if not isinstance(value, str):
        raise ValidationError(f"{name!r} must be a string, got {value!r}")
    return value


def get_string_map(obj: dict[str, Any], name: str) -> dict[str, str]:
    """A string-to-string map such as table properties or a snapshot summary; absent is empty."""
    value = require_object(obj.get(name, {}), repr(name))
    for key, item in value.items():
        if not isinstance(item, str):
            raise ValidationError(f"{name!r} value of {key!r} must be a string, got {item!r}")
    return dict(value)
