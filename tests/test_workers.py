"""How `make test` splits the suite (tests/support/workers.py): a module is one scope, every
module of the Airflow deployment the same scope, and a module using the deployment that the
list lacks stops the collection."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.workers import DEPLOYMENT_MODULES, ModuleScheduling, check_deployment_modules

ROOT = Path(__file__).resolve().parents[1]


def _item(nodeid: str, *fixtures: str) -> pytest.Item:
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))  # type: ignore[return-value]


def test_a_module_is_a_scope_and_the_deployments_modules_are_one() -> None:
    scope = ModuleScheduling._split_scope
    deployment = {scope(None, f"{m}::test_x[p]") for m in DEPLOYMENT_MODULES}  # type: ignore[arg-type]
    assert len(deployment) == 1
    spark = scope(None, "tests/spark/test_races.py::test_a[1]")  # type: ignore[arg-type]
    assert spark == scope(None, "tests/spark/test_races.py::test_b")  # type: ignore[arg-type]
    assert spark == "tests/spark/test_races.py" and spark not in deployment


def test_a_module_using_the_deployment_must_be_listed() -> None:
    listed = next(iter(DEPLOYMENT_MODULES))
    check_deployment_modules(
        [_item(f"{listed}::test_a", "deployment"), _item("tests/spark/test_x.py::test_b", "spark")]
    )
    with pytest.raises(pytest.UsageError, match=r"tests/airflow/test_new\.py use the Airflow"):
        check_deployment_modules([_item("tests/airflow/test_new.py::test_c", "deployment")])


def test_every_listed_module_exists() -> None:
    """A renamed module left in the list would no longer be kept with the others."""
    assert all((ROOT / m).is_file() for m in DEPLOYMENT_MODULES), sorted(DEPLOYMENT_MODULES)
