"""The Iceberg REST catalog client (see `RestCatalog`)."""

from icecore.catalog.rest.catalog import RestCatalog

__all__ = ["RestCatalog"]
