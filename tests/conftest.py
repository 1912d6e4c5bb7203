"""Fixtures shared by every test module, and the suite's tiers: a test is marked `servers` by
the fixtures it takes, or by its module or itself (`browser`, `spark_submit`, and the modules
that start a server themselves)."""

from collections import defaultdict

import pytest

# `catalog` (a fresh SqlCatalog) and `backend` (sqlite, postgresql) for catalog-backed tests.
from tests.support.catalogs import backend, catalog  # noqa: F401

# `s3_store`, `s3_proxy`, `gcs_store`, `azure_store`: real object-store servers on 127.0.0.1,
# started once per session when a test asks for one.
from tests.support.objectstores import azure_store, gcs_store, s3_proxy, s3_store  # noqa: F401

# `rest_catalog_server`: Apache Iceberg's own REST catalog handlers behind OAuth2 on 127.0.0.1,
# started once per session when a test asks for it.
from tests.support.rest_catalog import rest_catalog_server_fixture  # noqa: F401

# `spark`: the one local SparkSession of the run; `spark_conf_dir`: every spark-submit's
# settings (autouse).
from tests.support.spark import spark, spark_conf_dir  # noqa: F401

# `spark_connect`: a stock Spark Connect server from the pinned pyspark on 127.0.0.1, started
# once per session when a test asks for it; `job_runner`: a job run both ways (tests/spark).
from tests.support.spark_connect import job_runner, spark_connect_fixture  # noqa: F401

# Fixtures that start a server process (once per session).
_SERVER_FIXTURES = frozenset(
    {"rest_catalog_server", "s3_store", "s3_proxy", "gcs_store", "azure_store", "spark_connect"}
)


# `make test` runs the suite on two pytest-xdist workers (`--dist loadgroup`); each worker has
# its own session (Spark, servers, Airflow home). A module goes to one worker whole, so its
# module-scoped fixtures start once; every module using the Airflow deployment goes to the
# same worker, so one deployment serves them all.
_SHARED_BY_MODULES = ("deployment",)


# First: xdist reads the groups in its own hook.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        connect = callspec is not None and callspec.params.get("job_runner") == "connect"
        if connect or fixtures & _SERVER_FIXTURES:
            item.add_marker(pytest.mark.servers)
    by_module: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_module[item.nodeid.split("::")[0]].append(item)
    for path, tests in by_module.items():
        used = {f for test in tests for f in getattr(test, "fixturenames", ())}
        group = next((f for f in _SHARED_BY_MODULES if f in used), path)
        for test in tests:
            test.add_marker(pytest.mark.xdist_group(group))
