"""How `make test` shares the suite between its two pytest-xdist workers.

Each worker is a pytest session of its own (its Spark, its servers, its Airflow home), so a
module goes to one worker whole (its module-scoped fixtures start once) and the modules that
use the Airflow deployment (`tests/airflow/deployment.py`, four processes) all go to the same
worker, where one deployment serves them. Work is handed out in collection order
(`--no-loadscope-reorder`, as the Makefile runs it; xdist would otherwise send the modules with
the most tests first), the slow Airflow modules first, so that no long module starts near the
end.

The controller sees only node ids, not fixtures: `DEPLOYMENT_MODULES` names those modules, and
`check_deployment_modules` (run by each worker on its collection) fails the run if a module
using the `deployment` fixture is missing from it. (xdist's own `--dist loadgroup` renames
node ids, which pytest 9 no longer lets it do.)
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from xdist.scheduler import LoadScopeScheduling

DEPLOYMENT_MODULES = frozenset(
    {
        "tests/airflow/test_catalog_watch.py",
        "tests/airflow/test_fleet_deferral.py",
        "tests/airflow/test_rest_api.py",
        "tests/airflow/test_trigger_forms.py",
        "tests/airflow/test_ui.py",
        "tests/airflow/test_ui_fleet.py",
    }
)
_DEPLOYMENT = "the Airflow deployment"


class ModuleScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a module as the scope, and one scope for every module of
    the deployment."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return _DEPLOYMENT if module in DEPLOYMENT_MODULES else module


def check_deployment_modules(items: Sequence[pytest.Item]) -> None:
    """Fail the collection if a module using the deployment is not in DEPLOYMENT_MODULES."""
    using = {
        item.nodeid.split("::", 1)[0]
        for item in items
        if "deployment" in getattr(item, "fixturenames", ())
    }
    if missing := sorted(using - DEPLOYMENT_MODULES):
        raise pytest.UsageError(
            f"{', '.join(missing)} use the Airflow deployment: add them to "
            "tests/support/workers.py's DEPLOYMENT_MODULES, so that one worker runs them all"
        )
