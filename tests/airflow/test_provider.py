"""icefloe as an Airflow provider: what the real `airflow` CLI lists, and the connection form
that Airflow builds from the provider info alone (no hook code), as its UI asks for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from icefloe_airflow.provider_info import CONNECTION_TYPE, get_provider_info

pytestmark = pytest.mark.usefixtures("airflow_db")

AIRFLOW = Path(sys.executable).parent / "airflow"


def airflow(*args: str) -> str:
    done = subprocess.run(
        [str(AIRFLOW), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_airflow_lists_the_provider_its_connection_type_hook_and_link() -> None:
    providers = airflow("providers", "list")
    assert "icefloe" in providers and "Maintenance of Apache Iceberg tables" in providers
    hooks = airflow("providers", "hooks")
    [row] = [line for line in hooks.splitlines() if "icefloe_airflow.hook.IcebergHook" in line]
    assert f"| {CONNECTION_TYPE} " in row and "Iceberg catalog (icefloe)" in row
    assert "icefloe_airflow.links.IcebergTableLink" in airflow("providers", "links")
    assert "iceberg" in airflow("providers", "get", "icefloe", "--full", "-o", "json")


def test_the_connection_type_does_not_clash_with_airflows_iceberg_provider() -> None:
    """apache-airflow-providers-apache-iceberg owns `iceberg`."""
    types = [c["connection-type"] for c in get_provider_info()["connection-types"]]
    assert types == ["icefloe"]


def test_the_connection_form_comes_from_the_provider_info() -> None:
    """What Airflow 3's UI gets for the form (ProvidersManager's declarative metadata)."""
    probe = (
        "from airflow.providers_manager import ProvidersManager\n"
        "import json\n"
        "pm = ProvidersManager()\n"
        "widgets = {k: v.field for k, v in pm.connection_form_widgets.items() if 'icefloe' in k}\n"
        "print(json.dumps({'widgets': widgets, 'behaviour': pm.field_behaviours.get('icefloe')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json  # noqa: PLC0415

    form = json.loads(done.stdout.strip().splitlines()[-1])
    fields = form["widgets"]
    assert set(fields) == {
        f"extra__icefloe__{name}" for name in ("warehouse", "uri", "catalog_name", "properties")
    }
    assert fields["extra__icefloe__warehouse"]["schema"]["title"] == "Warehouse"
    assert fields["extra__icefloe__catalog_name"]["value"] == "default"
    behaviour = form["behaviour"]
    assert behaviour["hidden_fields"] == ["host", "schema", "login", "port"]
    assert behaviour["relabeling"] == {"password": "Catalog database password"}
