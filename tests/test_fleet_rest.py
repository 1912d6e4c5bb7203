"""The fleet on a REST catalog (Iceberg's own REST server): discovery through the REST
listing with namespace globs, and an unchanged table costs one catalog call the second time
(its load, which the listing needs for the metadata location), its metadata never re-read."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from icefloe_airflow.fleet.cache import HealthCache
from icefloe_airflow.fleet.config import PolicyLayers
from icefloe_airflow.fleet.survey import survey

from icecore.catalog import load_catalog
from tests.support.fleet_catalog import write_table
from tests.support.rest_catalog import (  # noqa: F401 - fixture
    RestCatalogServer,
    rest_catalog_server_fixture,
)


def test_fleet_on_a_rest_catalog(rest_catalog_server: RestCatalogServer, tmp_path: Path) -> None:
    server = rest_catalog_server
    server.reset()
    catalog = load_catalog("lake", server.properties())
    prefix = f"fleet_{uuid.uuid4().hex[:6]}"
    now_ms = int(time.time() * 1000)
    kinds = {"small": "worst", "healthy": "fine", "disabled": "off"}
    for namespace in (prefix, f"{prefix}_tmp"):
        catalog.create_namespace(namespace)
        for kind, name in kinds.items():
            location, *_ = write_table(str(tmp_path / namespace / name), kind, 3, now_ms)
            catalog.register_table(f"{namespace}.{name}", location)
    try:
        cache = HealthCache(tmp_path / "cache")
        include, exclude = [f"{prefix}*"], ["*_tmp"]
        first = survey(catalog, PolicyLayers(), include=include, exclude=exclude, cache=cache)
        assert [c.table for c in first.checks] == sorted(f"{prefix}.{n}" for n in kinds.values())
        # No state store: orphan removal never ran, so it is due on both enabled tables.
        assert [c.table for c in first.ranked] == [f"{prefix}.worst", f"{prefix}.fine"]
        assert not any(c.cached for c in first.checks)

        server.reset()
        second = survey(catalog, PolicyLayers(), include=include, exclude=exclude, cache=cache)
        assert all(c.cached for c in second.checks)
        assert [c.score for c in second.checks] == [c.score for c in first.checks]
        loads = [r for r in server.requests() if r.startswith("GET") and "/tables/" in r]
        # One load per listed table (the listing walks every namespace), none more.
        tables = [r.rsplit("/", 1)[-1] for r in loads]
        assert sorted(tables) == sorted([*kinds.values(), *kinds.values()])
        cache.close()
    finally:
        for namespace in (prefix, f"{prefix}_tmp"):
            for name in kinds.values():
                catalog.drop_table(f"{namespace}.{name}")
            catalog.drop_namespace(namespace)
        catalog.close()
