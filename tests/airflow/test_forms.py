"""Every field of every job's form, checked against the job's declaration: what a person types
reaches the job's command line unchanged (parsed by the job's own parser), or is refused in
one line that names the field as the form shows it, before anything else runs.

The forms are the DAGs' params (`icefloe_airflow.forms`); the values go through the operator
exactly as a triggered run's params do (`from_params=True`). No Spark, no server: these are
the operator's own checks; tests/airflow/test_trigger_forms.py drives the real UI.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException
from icefloe_airflow.forms import job_params
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.operators import OPERATORS

from icecore.jobs import JOBS, Option
from icecore.jobs.argv import parse_job_args
from icecore.jobs.options import BOOLEAN, DURATION, INSTANT

pytestmark = pytest.mark.usefixtures("iceberg_connection")

MIB = 1024**2


def good_and_bad(option: Option) -> tuple[Any, Any, str | None]:
    """(a value a person would type, the typed value the job must get, a wrong value or None
    when the kind has no wrong text: free text, column lists)."""
    kind = option.kind
    if kind.name == "size":
        return "128MB", 128 * MIB, "128 parsecs"
    if kind is DURATION:
        return "36h", 36 * 3_600_000, "7 days"
    if kind is INSTANT:
        return "2024-01-07T00:00:00Z", "2024-01-07T00:00:00Z", "yesterday-ish"
    if kind is BOOLEAN:
        return (not option.default), (not option.default), "maybe"
    if kind.choices:
        other = next(c for c in kind.choices if c != option.default)
        return other, other, "zorder"
    if kind.name == "integer":
        return "7", 7, "seven"
    if kind.name == "ratio":
        return "0.15", 0.15, "1.5"
    if kind.name == "pairs":
        return "a=1\nb=x=y", {"a": "1", "b": "x=y"}, "no equals sign"
    if kind.name == "columns":
        return "id, ts", ["id", "ts"], None
    if kind.name == "locations":
        return "/wh/other\n/wh/more", ["/wh/other", "/wh/more"], None
    if kind.name == "filter":
        return "id > 3", "id > 3", "this is not sql"
    if kind.name == "sort order":
        return "ts desc, id", "ts desc, id", "ts sideways"
    if kind.name == "partition spec":
        return "day(ts), bucket(16, id)", "day(ts), bucket(16, id)", "day(ts"
    return "id > 3", "id > 3", None


def form_fields() -> list[tuple[str, Option]]:
    return [
        (job, option)
        for job, spec in JOBS.items()
        for option in spec.options.options()
        if option.form and option.name != "table"
    ]


def base_params(job: str) -> dict[str, Any]:
    params: dict[str, Any] = {"table": "db.events"}
    if job == "ingest":
        params["source"] = "/in/batch.parquet"
    return params


def operator_for(job: str) -> Any:
    return OPERATORS[job](task_id=job, from_params=True)


def argv_of(job: str, params: dict[str, Any]) -> list[str]:
    operator = operator_for(job)
    options = operator.checked_options({"params": params})
    return operator.build_application_args(IcebergHook(operator.iceberg_conn_id), options)


def test_every_form_field_is_a_declared_option() -> None:
    for job, spec in JOBS.items():
        params = job_params(spec)
        assert set(params) == {o.name for o in spec.options.options() if o.form}
        for option in spec.options.options():
            if option.form:
                schema = params[option.name].schema
                assert schema["title"] == option.title
                if option.name != "table":
                    kinds = schema.get("type") or [k["type"] for k in schema["anyOf"]]
                    assert "null" in kinds, (job, option.name)  # not required
                if "enum" in schema:  # clearing sends null: it reads as the job's default
                    assert schema["values_display"]["null"].startswith("the job's default")


@pytest.mark.parametrize(("job", "option"), form_fields(), ids=lambda v: getattr(v, "name", v))
def test_what_is_typed_reaches_the_job_unchanged(job: str, option: Option) -> None:
    typed, expected, _ = good_and_bad(option)
    params = {**base_params(job), option.name: typed}
    if option.name == "sort_order":
        params["strategy"] = "sort"
    if job == "remove_orphan_files" and option.name == "min_age":
        params["force"] = True  # a floor of 36h with the default older-than of 3d is fine
    argv = argv_of(job, params)
    assert argv[0] == job
    parsed = parse_job_args(JOBS[job], argv[1:]).options
    assert getattr(parsed, option.name) == expected


@pytest.mark.parametrize(("job", "option"), form_fields(), ids=lambda v: getattr(v, "name", v))
def test_a_wrong_value_is_refused_in_words_naming_the_field(job: str, option: Option) -> None:
    _, _, wrong = good_and_bad(option)
    if wrong is None:
        pytest.skip(f"{option.kind.name}: any text is a value")
    params = {**base_params(job), option.name: wrong}
    if option.name == "sort_order":
        params["strategy"] = "sort"
    started = time.monotonic()
    with pytest.raises(AirflowException) as refused:
        argv_of(job, params)
    message = str(refused.value)
    assert message.startswith(f'"{option.title}": '), message
    assert ("expected" in message and repr(wrong) in message) or wrong in message
    assert "\n" not in message
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("job", "params", "message"),
    [
        ("rewrite_data_files", {"target_file_size_bytes": "64"}, "files under 1MB"),
        # The form's own switch, not the command line's flag.
        (
            "rewrite_position_deletes",
            {"target_file_size_bytes": "512k"},
            '^"Target file size": files under 1MB .*; switch on "Force" in the form to do it',
        ),
        ("expire_snapshots", {"retain_last": "0"}, "at least 1"),
        (
            "remove_orphan_files",
            {"older_than": "12h"},
            'commits in progress would be deleted; switch on "Force" in the form if nothing else',
        ),
        ("remove_orphan_files", {"older_than": "12h", "min_age": "6h"}, None),
        ("rewrite_data_files", {"target_file_size_bytes": "64", "force": True}, None),
    ],
)
def test_harmful_values_need_an_explicit_override(
    job: str, params: dict[str, Any], message: str | None
) -> None:
    full = {**base_params(job), **params}
    if message is None:
        assert argv_of(job, full)
        return
    with pytest.raises(AirflowException, match=message) as refused:
        argv_of(job, full)
    assert "--force" not in str(refused.value)  # the form has no flags


def test_options_given_in_code_are_forced_by_their_key() -> None:
    operator = OPERATORS["rewrite_data_files"](
        task_id="t", table="db.events", options={"target-file-size-bytes": "64k"}
    )
    with pytest.raises(AirflowException) as refused:
        operator.checked_options({})
    assert str(refused.value) == (
        "--target-file-size-bytes: files under 1MB multiply the table's file count and slow "
        "every reader; set force=True in the options to do it anyway"
    )


def test_the_table_is_named_as_the_form_names_it() -> None:
    with pytest.raises(AirflowException, match=r'^"Table": expected NAMESPACE\.NAME.*\'events\''):
        argv_of("rewrite_data_files", {"table": "events"})
    with pytest.raises(AirflowException, match=r'^"Table": required'):
        argv_of("rewrite_data_files", {"table": ""})


def test_options_given_in_code_are_named_by_their_key() -> None:
    operator = OPERATORS["rewrite_data_files"](
        task_id="t", table="db.events", options={"target-file-size-bytes": "12 parsecs"}
    )
    with pytest.raises(AirflowException, match=r"^--target-file-size-bytes: expected a size"):
        operator.checked_options({})
    unknown = OPERATORS["rewrite_data_files"](task_id="t", table="db.events", options={"zorder": 1})
    with pytest.raises(AirflowException, match="rewrite_data_files has no option 'zorder'"):
        unknown.checked_options({})


def test_a_jobs_own_refusal_names_the_forms_switch() -> None:
    """The expiry floor is checked by the job, against the table's snapshots: its cause names
    the command line's flag, which a run from the form says as the form's switch."""
    cause = (
        "JobError: 2 snapshots are younger than the floor (committed after 2026-01-01); "
        "pass --force to expire them anyway"
    )
    from_form = operator_for("expire_snapshots")
    assert from_form.in_callers_words(cause).endswith(
        'switch on "Force" in the form to expire them anyway'
    )
    in_code = OPERATORS["expire_snapshots"](task_id="t", table="db.events")
    assert in_code.in_callers_words(cause).endswith(
        "set force=True in the options to expire them anyway"
    )
    ingest = operator_for("ingest")  # no switch to name: the cause stays as the job said it
    assert ingest.in_callers_words(cause) == cause
