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

from icecore.jobs import JOBS

DAGS = Path(__file__).resolve().parents[2] / "dags"
JOB_DAGS = {f"icefloe_{job}" for job in JOBS}

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
    for job, spec in JOBS.items():
        dag = bag.get_dag(f"icefloe_{job}")
        assert dag.schedule is None, job  # hand-triggered
        assert "icefloe" in dag.tags and "| `--table` |" in dag.doc_md  # the option table
        assert [t.task_id for t in dag.tasks] == [job]
        form = {o.name for o in spec.options.options() if o.form}
        assert set(dag.params.keys()) == form  # the form is the declaration


def test_dag_forms_accept_text_and_refuse_only_what_is_not_a_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Airflow's own check of a conf only knows the form's shapes: a table must be named, a
    closed choice must be one of its values. Everything else arrives as typed text and is
    checked by the operator in the jobs' words (tests/airflow/test_forms.py), never turned
    into a schema dump or silently coerced."""
    from airflow.sdk.exceptions import ParamValidationError  # noqa: PLC0415

    monkeypatch.delenv("ICEFLOE_TABLES_CONFIG", raising=False)
    bag, _ = _dagbag(DAGS)
    ingest = bag.get_dag("icefloe_ingest").params
    with pytest.raises(ParamValidationError, match="table"):
        ingest.validate()  # the defaults name no table: a trigger must
    good = {"table": "db.events", "source": "/data/in", "mode": "cdc", "key": "id"}
    for conf in ({**good, "mode": "merge"}, {**good, "source_format": "avro"}):
        with pytest.raises(ParamValidationError):
            _validate(ingest, conf)
    _validate(ingest, good)
    _validate(ingest, {**good, "source_format": None, "create": None})  # cleared: defaults

    rewrite = bag.get_dag("icefloe_rewrite_data_files").params
    with pytest.raises(ParamValidationError):
        _validate(rewrite, {"table": "db.t", "strategy": "zorder"})
    for text in ("128MB", "512 MiB", "12 parsecs", "64"):  # the operator judges these
        _validate(rewrite, {"table": "db.t", "target_file_size_bytes": text})
    assert rewrite.get_param("rewrite_all").schema["type"] == ["boolean", "null"]  # not required


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
    # The table's Asset: its ingest's events, and its watcher's, which any engine's commits
    # set off (one trigger per table, sharing the catalog's poll loop in the triggerer).
    [asset] = events.schedule
    assert (asset.name, asset.uri) == (table_asset("db.events").name, table_asset("db.events").uri)
    [watcher] = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "icefloe_airflow.catalog_watch.trigger.TableChangesTrigger"
    assert (kwargs["iceberg_conn_id"], kwargs["tables"]) == ("iceberg_default", ["db.events"])
    assert (kwargs["poll_seconds"], kwargs["min_interval_seconds"]) == (20.0, 60.0)
    assert kwargs["thresholds"] == {"small_file_bytes": 384 * 1024**2, "min_commits": 100}
    assert bag.get_dag("icefloe_optimize__a__b__users").schedule == "0 3 * * *"
    assert bag.get_dag("icefloe_optimize__db__manual").schedule is None
    both = bag.get_dag("icefloe_optimize__db__both")
    # After each ingest into the `lake` catalog's db.both, and hourly whatever happens.
    [asset] = both.timetable.asset_condition.objects
    assert asset.uri == table_asset("db.both", "lake").uri and len(asset.watchers) == 1
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
