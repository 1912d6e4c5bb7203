"""Fixtures shared by every test module, and the suite's tiers: a test is marked `servers` by
the fixtures it takes, or by its module or itself (`browser`, `spark_submit`, and the modules
that start a server themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

# `catalog` (a fresh SqlCatalog) and `backend` (sqlite, postgresql) for catalog-backed tests.
from tests.support.catalogs import backend, catalog  # noqa: F401

# `s3_store`, `s3_proxy`, `gcs_store`, `azure_store`: real object-store servers on 127.0.0.1,
# started once per session when a test asks for one; `held_s3_proxy`: the proxy for one test.
from tests.support.objectstores import (  # noqa: F401
    azure_store,
    gcs_store,
    held_s3_proxy,
    s3_proxy,
    s3_store,
)

# `rest_catalog_server`: Apache Iceberg's own REST catalog handlers behind OAuth2 on 127.0.0.1,
# started once per session when a test asks for it.
from tests.support.rest_catalog import rest_catalog_server_fixture  # noqa: F401

# `spark`: the one local SparkSession of the run; `spark_conf_dir`: every spark-submit's
# settings (autouse).
from tests.support.spark import spark, spark_conf_dir  # noqa: F401

# `spark_connect`: a stock Spark Connect server from the pinned pyspark on 127.0.0.1, started
# once per session when a test asks for it; `job_runner`: a job run both ways (tests/spark).
from tests.support.spark_connect import job_runner, spark_connect_fixture  # noqa: F401

# How `make test`'s two pytest-xdist workers share the suite.
from tests.support.workers import ModuleScheduling, check_deployment_modules

if TYPE_CHECKING:
    from xdist.remote import Producer

# Fixtures that start a server process (once per session).
_SERVER_FIXTURES = frozenset(
    {
        "rest_catalog_server",
        "s3_store",
        "s3_proxy",
        "gcs_store",
        "azure_store",
        "spark_connect",
        "iceberg_java",
    }
)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> ModuleScheduling:
    """`make test`'s two workers: modules whole, the deployment's together (workers.py)."""
    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        connect = callspec is not None and callspec.params.get("job_runner") == "connect"
        if connect or fixtures & _SERVER_FIXTURES:
            item.add_marker(pytest.mark.servers)
    check_deployment_modules(items)
