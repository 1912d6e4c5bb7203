"""The trigger form of each job's DAG, derived from the job's option declarations.

Every field is what the job takes (`icecore.jobs.jobs`), with the option's title, its
words and its unit. Values are typed as text and parsed by the jobs' own grammar when the
task starts (`icefloe_airflow.operators.base`), so what a person types reaches the job
unchanged or is refused in words naming the field: no number field silently drops `MB` from
`128MB`, no JSON-schema pattern answers a typo with a schema dump. Switches are optional
booleans (never marked required), choices list only real values, and an empty field keeps
the job's own default.

The form's values arrive as the DAG run's params; `job_options_from_params` turns them into
the options the operator checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Param

from icecore.jobs.jobs import TABLE
from icecore.jobs.options import BOOLEAN, TEXT, JobSpec, Option

_NUMERIC = frozenset({"size", "integer", "ratio"})


def _description(option: Option) -> str:
    text = option.help[:1].upper() + option.help[1:]
    if option.kind in (BOOLEAN, TABLE, TEXT) or option.kind.choices:
        return f"{text}."
    expected = option.kind.expected
    if option.kind.multiline:
        expected = f"{expected}, one per line"
    default = (
        "" if option.default in (None, [], {}) else f" Default: {option.show(option.default)}."
    )
    return f"{text}. Expected: {expected}.{default}"


def param_for(option: Option) -> Param:
    """The form field of one option."""
    common: dict[str, Any] = {"title": option.title, "description": _description(option)}
    if option.kind is TABLE:
        return Param(type="string", minLength=1, **common)
    if option.kind is BOOLEAN:
        return Param(bool(option.default), type=["boolean", "null"], **common)
    if option.kind.choices:
        # Airflow's dropdown can always be cleared, which sends null: null is a choice, shown
        # in words ("the job's default: ..."), never as a literal `null`.
        default = option.default_words or option.default
        labels = {"null": f"the job's default ({default})" if default else "the job's default"}
        return Param(
            option.default,
            type=["string", "null"],
            enum=[*option.kind.choices, None],
            values_display=labels,
            **common,
        )
    if option.kind.multiline:
        default = None
        if option.default:
            default = "\n".join(option.kind.lines(option.default))
        return Param(default, type=["string", "null"], format="multiline", **common)
    default = None if option.default in (None, [], {}) else option.show(option.default)
    if option.kind.name in _NUMERIC:
        # A run triggered through the REST API or `airflow dags trigger --conf` may send a JSON
        # number, which the job's grammar reads as the text (`7`, `134217728`, `0.15`). Said
        # with anyOf, not a list of types: Airflow's form renders a list of types as a JSON box.
        kinds = [{"type": "string"}, {"type": "number"}, {"type": "null"}]
        return Param(default, anyOf=kinds, **common)
    return Param(default, type=["string", "null"], **common)


def job_params(spec: JobSpec) -> dict[str, Param]:
    """Every form field of `spec`'s job, in declaration order."""
    return {o.name: param_for(o) for o in spec.options.options() if o.form or o.kind is TABLE}


def job_options_from_params(spec: JobSpec, params: Mapping[str, Any]) -> dict[str, Any]:
    """The run's params that are the job's form fields; empty ones left out (the job's
    default applies)."""
    fields = {o.name for o in spec.options.options() if o.form and o.name != "table"}
    out = {}
    for name, value in params.items():
        if name not in fields or value is None:
            continue
        if isinstance(value, str) and not value.strip():
            continue
        out[name] = value
    return out
