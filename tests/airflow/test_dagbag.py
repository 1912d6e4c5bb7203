"""dags/ loads as the DAG processor loads it: no import errors, no deprecation warnings, every
DAG serializable (what the processor stores), forms and schedules as documented."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.assets import table_asset
from icefloe_airflow.policy import JOB_ORDER

DAGS = Path(__file__).resolve().parents[2] / "dags"
JOB_DAGS = {
    "icefloe_ingest",
    "icefloe_rewrite_position_deletes",
    "icefloe_convert_equality_deletes",
    "icefloe_rewrite_data_files",
    "icefloe_expire_snapshots",
}

pytestmark = pytest.mark.usefixtures("airflow_db")


def _dagbag(folder: Path) -> tuple[Any, list[warnings.WarningMessage]]:
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415 (after conftest's env)
    from airflow.serialization.serialized_objects import DagSerialization  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(folder))
        for dag in bag.dags.values():
            DagSerialization.to_dict(dag)
    ours = [
        w
        for w in caught
        if issubclass(w.category, DeprecationWarning | PendingDeprecationWarning | FutureWarning)
        or "deprecat" in str(w.message).lower()
    ]
    return bag, ours


def _validate(params: Any, conf: dict[str, Any]) -> None:
    """What a trigger does with a conf: the DAG's params, updated with it, validated."""
    merged = copy.deepcopy(params)
    for key, value in conf.items():
        merged[key] = value
    merged.validate()


def test_dags_load_without_errors_or_deprecation_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shipped tables.yaml (the default config location: the dags folder).
    monkeypatch.delenv("ICEFLOE_TABLES_CONFIG", raising=False)
    bag, deprecations = _dagbag(DAGS)

    assert bag.import_errors == {}
    relevant = [f"{w.filename}:{w.lineno}: {w.message}" for w in deprecations]
    assert relevant == []
    assert set(bag.dag_ids) == {*JOB_DAGS, "icefloe_optimize__demo__events"}
    for dag_id in JOB_DAGS:
        dag = bag.get_dag(dag_id)
        assert dag.schedule is None, dag_id  # hand-triggered
        assert "icefloe" in dag.tags and dag.doc_md
        assert dag.params.get_param("table").value == ""  # every trigger names its table
    expire = bag.get_dag("icefloe_expire_snapshots")
    assert [t.task_id for t in expire.topological_sort()] == [
        "expire_snapshots",
        "remove_orphan_files",
    ]


def test_dag_forms_validate_like_the_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import ParamValidationError  # noqa: PLC0415

    monkeypatch.delenv("ICEFLOE_TABLES_CONFIG", raising=False)
    bag, _ = _dagbag(DAGS)
    ingest = bag.get_dag("icefloe_ingest").params
    with pytest.raises(ParamValidationError, match="table"):
        ingest.validate()  # the defaults name no table: a trigger must
    good = {"table": "db.events", "source": "/data/in", "mode": "cdc", "key": "id"}
    bad = [
        {**good, "table": "events"},  # no namespace
        {**good, "table": "db.ev ents"},
        {**good, "mode": "merge"},  # closed choice
        {**good, "source": ""},
        {**good, "source_format": "avro"},
    ]
    for conf in bad:
        with pytest.raises(ParamValidationError):
            _validate(ingest, conf)
    _validate(ingest, good)

    rewrite = bag.get_dag("icefloe_rewrite_data_files").params
    for conf in (
        {"table": "db.t", "strategy": "zorder"},
        {"table": "db.t", "target_file_size_bytes": 0},
        {"table": "db.t", "target_file_size_bytes": "big"},
        {"table": "db.t", "delete_ratio_threshold": 1.5},
    ):
        with pytest.raises(ParamValidationError):
            _validate(rewrite, conf)
    _validate(rewrite, {"table": "db.t", "strategy": "sort", "sort_order": "ts"})

    expire = bag.get_dag("icefloe_expire_snapshots").params
    with pytest.raises(ParamValidationError):
        _validate(expire, {"table": "db.t", "older_than": "a week"})
    for age in ("7d", "1d12h", "2024-01-01T00:00:00Z"):
        _validate(expire, {"table": "db.t", "older_than": age})


def test_self_optimizing_dags_follow_tables_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "tables:\n"
        "  - table: db.events\n    schedule: asset\n"
        "  - table: a.b.users\n    schedule: '0 3 * * *'\n"
        "  - table: db.manual\n    schedule: null\n"
        "  - table: db.both\n    schedule: [asset, '@hourly']\n    catalog_name: lake\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    bag, deprecations = _dagbag(DAGS / "icefloe_self_optimizing.py")

    assert bag.import_errors == {} and deprecations == []
    events = bag.get_dag("icefloe_optimize__db__events")
    assert events.schedule == [table_asset("db.events")]
    assert bag.get_dag("icefloe_optimize__a__b__users").schedule == "0 3 * * *"
    assert bag.get_dag("icefloe_optimize__db__manual").schedule is None
    both = bag.get_dag("icefloe_optimize__db__both")
    # After each ingest into the `lake` catalog's db.both, and hourly whatever happens.
    assert list(both.timetable.asset_condition.objects) == [table_asset("db.both", "lake")]
    assert both.timetable.timetable.expression == "0 * * * *"
    assert events.max_active_runs == 1
    group = "self_optimizing."
    chain = [t.task_id.removeprefix(group) for t in events.topological_sort()]
    expected = ["health"]
    for job in JOB_ORDER:
        expected += [f"{job}_due", job]
    assert chain == [*expected, "health_after"]
    # A skipped job must not skip the rest: the gates and the final check run when the job
    # before them was skipped, and stop when it failed.
    for job in JOB_ORDER:
        assert events.get_task(f"{group}{job}_due").trigger_rule == "none_failed"
    assert events.get_task(f"{group}health_after").trigger_rule == "none_failed"


def test_a_mistake_in_tables_yaml_is_an_import_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text("tables:\n  - table: db.events\n    schedule: sometimes\n")
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    bag, _ = _dagbag(DAGS / "icefloe_self_optimizing.py")

    (error,) = bag.import_errors.values()
    assert str(config) in error and "schedule" in error and "sometimes" in error
