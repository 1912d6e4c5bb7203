"""Fixtures shared by every test module."""

# `catalog` (a fresh SqlCatalog) and `backend` (sqlite, postgresql) for catalog-backed tests.
from tests.support.catalogs import backend, catalog  # noqa: F401

# `spark`: the one local SparkSession of the run.
from tests.support.spark import spark  # noqa: F401
