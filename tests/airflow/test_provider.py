"""icefloe as an Airflow provider: what the real `airflow` CLI lists (its commands run by the
`airflow` script's own `main()`, all in one Python process), and the connection form that
Airflow builds from the provider info alone (no hook code), as its UI asks for it."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pytest
from icefloe_airflow.provider_info import CONNECTION_TYPE, get_provider_info

pytestmark = pytest.mark.usefixtures("airflow_db")

STATE_URI = "postgresql+psycopg2://icefloe:pw@db:5432/icefloe"
# The `airflow` commands the tests read, as the `airflow` script runs them (its `main()`,
# on these arguments), all in one Python process: each process start imports Airflow,
# seconds of CPU. The last reads `[icefloe] state_uri` from the variable set just before.
COMMANDS = (
    ("providers", "list"),
    ("providers", "hooks"),
    ("providers", "links"),
    ("providers", "get", "icefloe", "--full", "-o", "json"),
    ("config", "list", "--section", "icefloe", "--include-descriptions"),
    ("config", "get-value", "icefloe", "state_uri"),
)
# Then what Airflow 3's UI gets for the connection form (ProvidersManager's declarative
# metadata), as JSON on the last line.
PROBE = f"""
import contextlib, io, json, os, sys
from airflow.__main__ import main
printed = {{}}
for args in {COMMANDS!r}:
    if args[:2] == ("config", "get-value"):
        os.environ["AIRFLOW__ICEFLOE__STATE_URI"] = {STATE_URI!r}
    sys.argv = ["airflow", *args]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main()
        except SystemExit as exit:
            assert not exit.code, (args, exit.code)
    printed[" ".join(args)] = out.getvalue()
from airflow.providers_manager import ProvidersManager
pm = ProvidersManager()
widgets = {{k: v.field for k, v in pm.connection_form_widgets.items() if 'icefloe' in k}}
sensitive = sorted(k for k, v in pm.connection_form_widgets.items()
                   if 'icefloe' in k and v.is_sensitive)
form = {{'widgets': widgets, 'sensitive': sensitive,
        'behaviour': pm.field_behaviours.get('icefloe')}}
print(json.dumps({{'printed': printed, 'form': form}}))
"""


@functools.cache
def probed() -> dict[str, Any]:
    """What each of COMMANDS printed (by its arguments, space-separated), and the form."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def airflow(*args: str) -> str:
    """What `airflow <args>` printed (one of COMMANDS)."""
    return str(probed()["printed"][" ".join(args)])


def test_airflow_lists_the_provider_its_connection_type_hook_and_link() -> None:
    providers = airflow("providers", "list")
    assert "icefloe" in providers and "Maintenance of Apache Iceberg tables" in providers
    hooks = airflow("providers", "hooks")
    [row] = [line for line in hooks.splitlines() if "icefloe_airflow.hook.IcebergHook" in line]
    assert f"| {CONNECTION_TYPE} " in row and "Iceberg catalog (icefloe)" in row
    assert "icefloe_airflow.links.IcebergTableLink" in airflow("providers", "links")
    assert "iceberg" in airflow("providers", "get", "icefloe", "--full", "-o", "json")


def test_the_connection_type_does_not_clash_with_airflows_iceberg_provider() -> None:
    """apache-airflow-providers-apache-iceberg owns `iceberg`; installed beside icefloe, each
    provider keeps its connection type and hook."""
    types = [c["connection-type"] for c in get_provider_info()["connection-types"]]
    assert types == ["icefloe"]
    providers = airflow("providers", "list")
    assert "apache-airflow-providers-apache-iceberg" in providers and "icefloe" in providers
    hooks = {
        line.split("|")[0].strip(): line
        for line in airflow("providers", "hooks").splitlines()
        if line.count("|") >= 3
    }
    assert "airflow.providers.apache.iceberg.hooks.iceberg.IcebergHook" in hooks["iceberg"]
    assert "icefloe_airflow.hook.IcebergHook" in hooks["icefloe"]


def test_airflow_knows_the_state_store_option() -> None:
    """`[icefloe] state_uri` is Airflow configuration: listed, read from its environment
    variable, and sensitive (its value hidden unless asked for)."""
    assert airflow("config", "get-value", "icefloe", "state_uri").strip() == STATE_URI
    listed = airflow("config", "list", "--section", "icefloe", "--include-descriptions")
    assert "state_uri" in listed and "SQLAlchemy URL of icefloe's state store" in listed
    options = get_provider_info()["config"]["icefloe"]["options"]
    assert options["state_uri"]["sensitive"] is True
    assert "tables_config" in listed and options["tables_config"]["default"] == ""


def test_the_connection_form_comes_from_the_provider_info() -> None:
    """What Airflow 3's UI gets for the form (ProvidersManager's declarative metadata)."""
    form = probed()["form"]
    fields = form["widgets"]
    names = ("catalog_type", "uri", "warehouse", "catalog_name", "properties", "token")
    assert set(fields) == {f"extra__icefloe__{name}" for name in names}
    assert fields["extra__icefloe__warehouse"]["schema"]["title"] == "Warehouse"
    assert fields["extra__icefloe__catalog_name"]["value"] == "default"
    assert fields["extra__icefloe__catalog_type"]["schema"]["enum"] == [None, "sql", "rest"]
    assert fields["extra__icefloe__token"]["schema"]["format"] == "password"  # masked
    assert form["sensitive"] == ["extra__icefloe__token"]
    behaviour = form["behaviour"]
    assert behaviour["hidden_fields"] == ["host", "schema", "port"]
    assert behaviour["relabeling"] == {
        "login": "REST client ID",
        "password": "Database password / REST client secret",
    }
