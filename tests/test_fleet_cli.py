"""The `icefloe` command on a generated catalog of 1,000 tables (10% due for known reasons),
run as users run it: the installed console script, in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from icecore.catalog import catalog_from_settings
from tests.support.fleet_catalog import (
    MIB,
    FleetTruth,
    make_fleet_catalog,
    record_orphan_runs,
    write_table,
)

ICEFLOE = Path(sys.executable).parent / "icefloe"
TABLES = 1_000  # the catalog: metadata only, written in a few seconds


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> FleetTruth:
    root = tmp_path_factory.mktemp("fleet")
    return make_fleet_catalog(root / "wh", TABLES, state_uri=f"sqlite:///{root / 'state.db'}")


def icefloe(fleet: FleetTruth, *args: str, cache: Path | None = None) -> list[Any]:
    """Run the command; its JSON lines."""
    root = fleet.warehouse.parent
    env = {"ICEFLOE_CACHE_DIR": str(cache or root / "cache"), "PATH": str(ICEFLOE.parent)}
    command = [str(ICEFLOE), *args[:1], "--warehouse", str(fleet.warehouse)]
    command += ["--state-uri", f"sqlite:///{root / 'state.db'}", *args[1:]]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def _order(truth: FleetTruth, tables: list[str]) -> list[str]:
    return sorted(tables, key=lambda t: (-truth.benefit[t], t))


def test_due_lists_the_due_tables_in_benefit_order_within_the_budget(fleet: FleetTruth) -> None:
    lines = icefloe(fleet, "due", "--json", "--max-tables", str(TABLES))
    assert [line["table"] for line in lines] == _order(fleet, list(fleet.due))
    assert [line["rank"] for line in lines] == list(range(1, len(fleet.due) + 1))
    for line in lines:
        assert [j["job"] for j in line["jobs"]] == fleet.due[line["table"]]
        assert all(j["reason"] for j in line["jobs"])
        assert line["benefit"] == pytest.approx(fleet.benefit[line["table"]], abs=1e-3)
        assert line["rewrite_bytes"] == fleet.rewrite_bytes[line["table"]]
        if fleet.kinds[line["table"]] == "manifests":  # one manifest per file, all listed
            assert line["manifests"] == fleet.benefit[line["table"]] + 1 > 20

    top = icefloe(fleet, "due", "--json", "--max-tables", "4")
    assert [line["table"] for line in top] == [line["table"] for line in lines[:4]]

    # 15 MiB of rewrites: the greedy walk down the ranking passes over what does not fit.
    budget, used, chosen = 15 * MIB, 0, []
    for table in _order(fleet, list(fleet.due)):
        if used + fleet.rewrite_bytes[table] <= budget:
            chosen.append(table)
            used += fleet.rewrite_bytes[table]
    assert len(chosen) < len(fleet.due)
    lines = icefloe(
        fleet, "due", "--json", "--max-tables", str(TABLES), "--max-bytes", "15MiB", "--all"
    )
    assert [line["table"] for line in lines if line["rank"]] == chosen
    deferred = [line for line in lines if not line["rank"]]
    assert {line["table"] for line in deferred} == set(fleet.due) - set(chosen)
    assert all("bytes" in line["deferred"] for line in deferred)


def test_policy_in_table_properties(fleet: FleetTruth) -> None:
    lines = {line["table"]: line for line in icefloe(fleet, "health", "--all", "--json")}
    assert len(lines) == TABLES
    for table in fleet.tables_of("disabled"):  # 40 small files, but its owner said no
        assert lines[table]["enabled"] is False and lines[table]["due"] == []
        assert lines[table]["health"]["small_files"] == 40
    for table in fleet.tables_of("raised"):  # 20 small files < its own threshold of 50
        assert lines[table]["due"] == []
        assert lines[table]["policy_properties"] == ["icefloe.minor.file-count"]
    for table in fleet.tables_of("lowered"):  # 6 small files >= its own threshold of 4
        assert [d["job"] for d in lines[table]["due"]] == ["rewrite_data_files"]
    # Partition detail only where a job is due.
    assert all(("partitions" in line) == bool(line["due"]) for line in lines.values())


def test_a_second_run_reads_the_cache_and_a_new_table_is_picked(
    fleet: FleetTruth, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = icefloe(fleet, "health", "--all", "--json", cache=cache)
    assert not any(line["cached"] for line in first)
    second = icefloe(fleet, "health", "--all", "--json", cache=cache)
    assert all(line["cached"] for line in second)
    assert [line["score"] for line in second] == [line["score"] for line in first]

    catalog = catalog_from_settings(warehouse=fleet.warehouse)
    location, _, (_due, benefit, rewrite) = write_table(
        f"{fleet.warehouse}/ns05/new_one", "small", 40, int(time.time() * 1000)
    )
    catalog.register_table("ns05.new_one", location)
    catalog.close()
    try:
        due = icefloe(fleet, "due", "--json", "--max-tables", str(TABLES + 1), cache=cache)
        picked = [line for line in due if line["table"] == "ns05.new_one"]
        assert len(due) == len(fleet.due) + 1 and len(picked) == 1
        # Ranked among the others by its priority (benefit, climbing while it waits).
        priorities = [line["priority"] for line in due]
        assert priorities == sorted(priorities, reverse=True)
        # It never ran anything: orphan removal is due on it too (housekeeping: benefit 1).
        jobs = [j["job"] for j in picked[0]["jobs"]]
        assert jobs == ["rewrite_data_files", "remove_orphan_files"]
        assert picked[0]["benefit"] == pytest.approx(benefit + 1)
        third = icefloe(fleet, "health", "--all", "--json", cache=cache)
        assert [line["cached"] for line in third if line["table"] == "ns05.new_one"] == [True]
    finally:
        catalog = catalog_from_settings(warehouse=fleet.warehouse)
        catalog.drop_table("ns05.new_one")
        catalog.close()
    assert rewrite == 52 * MIB


def test_tables_and_namespace_filters(fleet: FleetTruth) -> None:
    tables = [line["table"] for line in icefloe(fleet, "tables", "--json")]
    assert tables == sorted(fleet.kinds)
    some = icefloe(fleet, "tables", "--json", "--namespace", "ns0[12]", "--exclude", "ns02")
    assert {line["table"].split(".")[0] for line in some} == {"ns01"}
    one = icefloe(fleet, "health", "ns01.t0010", "--json")
    assert [line["table"] for line in one] == ["ns01.t0010"]
    assert [d["job"] for d in one[0]["due"]] == fleet.due["ns01.t0010"]


def test_the_command_imports_no_airflow(fleet: FleetTruth) -> None:
    code = (
        "import sys\n"
        "from icefloe_airflow.command.cli import main\n"
        f"main(['due', '--warehouse', {str(fleet.warehouse)!r}])\n"
        "assert 'airflow' not in sys.modules, 'airflow imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.spark_submit
def test_run_submits_the_job_under_the_lease_and_records_it(fleet: FleetTruth) -> None:
    """One real spark-submit (local[1]): a dry-run expiry of a table with an old snapshot."""
    from icefloe_airflow.state import MaintenanceStore  # noqa: PLC0415

    (table, *_) = fleet.tables_of("expire")
    root = fleet.warehouse.parent
    command = [str(ICEFLOE), "run", "expire_snapshots", table, "--warehouse", str(fleet.warehouse)]
    command += ["--state-uri", f"sqlite:///{root / 'state.db'}", "--master", "local[1]"]
    done = subprocess.run(
        [*command, "--dry-run"], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["dry_run"] is True and result["expired_snapshots_count"] == 1
    store = MaintenanceStore.open(f"sqlite:///{root / 'state.db'}")
    try:
        run = store.last_runs(table)["expire_snapshots"]
        assert store.lock_holder(table) is None  # released
    finally:
        store.close()
    assert run.state == "success" and run.result == result

    unknown = subprocess.run(
        [str(ICEFLOE), "run", "compact", table, "--warehouse", str(fleet.warehouse)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode != 0 and "unknown job 'compact'" in unknown.stderr


def test_a_table_that_waited_climbs(tmp_path: Path) -> None:
    """t0010 saves readers more than t0000, but t0000 has waited three days since its last
    maintenance (the others an hour): it climbs over t0010, and a one-table budget takes it."""
    truth = make_fleet_catalog(tmp_path / "wh", 20)
    assert truth.benefit["ns01.t0010"] > truth.benefit["ns00.t0000"]
    state = f"sqlite:///{tmp_path / 'state.db'}"
    now_ms = int(time.time() * 1000)
    others = [t for t in truth.kinds if t != "ns00.t0000"]
    record_orphan_runs(state, others, now_ms - 3_600_000)
    record_orphan_runs(state, ["ns00.t0000"], now_ms - 3 * 86_400_000)
    command = [str(ICEFLOE), "due", "--json", "--warehouse", str(tmp_path / "wh")]
    command += ["--state-uri", state, "--max-tables", "1"]
    env = {"ICEFLOE_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    (line,) = [json.loads(line) for line in out.splitlines()]
    assert line["table"] == "ns00.t0000"
    assert line["waited_s"] >= 3 * 86_400 - 60
    assert line["priority"] == pytest.approx(
        line["benefit"] * (1 + line["waited_s"] / 86_400), rel=1e-3
    )
