"""`Param` building blocks shared by icefloe's DAG forms (the Trigger form in the Airflow UI and
the REST API's `conf`).

Each form field maps to one job flag, so Airflow validates a run's conf against the job's own
rules (types, ranges, closed choices) before a Spark application is ever submitted: a bad
click is refused with a 400 naming the field instead of failing minutes later in spark-submit.
Optional options are `null` by default, and the operators omit null options, so the job's own
default applies unless the user sets a value.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

# NAMESPACE.NAME, nested namespaces allowed (`a.b.events`); names as SQL identifiers.
TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"
# What the jobs' `--older-than`/`--min-age` accept: an age (`7d`, `1d12h`) or an ISO timestamp.
AGE_OR_TIMESTAMP_PATTERN = r"^(([0-9]+(ms|s|m|h|d|w))+|[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].+)?)$"
AGE_PATTERN = r"^([0-9]+(ms|s|m|h|d|w))+$"


def table_param(default: str = "") -> Param:
    """The table a run works on; no usable default, so every trigger must name one."""
    return Param(
        default,
        type="string",
        pattern=TABLE_PATTERN,
        title="Table",
        description="Iceberg table as NAMESPACE.NAME, e.g. db.events",
    )


def optional_int(description: str, *, minimum: int = 1) -> Param:
    """An integer option that keeps the job's default when left empty."""
    return Param(None, type=["null", "integer"], minimum=minimum, description=description)


def optional_string(description: str, *, pattern: str | None = None) -> Param:
    """A string option that keeps the job's default when left empty."""
    schema: dict[str, Any] = {"type": ["null", "string"], "minLength": 1}
    if pattern:
        schema["pattern"] = pattern
    return Param(None, description=description, **schema)


def flag(description: str, *, default: bool = False) -> Param:
    """A boolean job flag (passed bare when true, omitted when false)."""
    return Param(default, type="boolean", description=description)


def from_params(*names: str) -> dict[str, str]:
    """Operator `options` whose values are Jinja references to the run's params.

    The DAGs render templates as native objects, so integers stay integers, booleans stay
    booleans and null stays None (the operator then omits the flag).
    """
    return {name: f"{{{{ params.{name} }}}}" for name in names}
