"""Exceptions raised by icecore.

Every error that concerns a file names that file, so an operator reading an Airflow log
can go straight to the object that is wrong.
"""

from __future__ import annotations


class IcecoreError(Exception):
    """Base class of every error icecore raises on purpose."""


class ValidationError(IcecoreError):
    """A model (schema, spec, metadata) breaks a rule of the table spec."""


class FileError(IcecoreError):
    """A file could not be read or is not what the spec says it must be."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class MetadataError(FileError):
    """A table metadata JSON file is malformed or unsupported."""


class ManifestError(FileError):
    """A manifest or manifest list is missing, malformed or of the wrong schema."""


class NotFoundError(IcecoreError):
    """A snapshot, ref, schema or spec that was asked for does not exist."""


class CatalogError(IcecoreError):
    """A catalog operation failed for a reason the caller can act on."""


class NoSuchNamespaceError(CatalogError, NotFoundError):
    pass


class NoSuchTableError(CatalogError, NotFoundError):
    pass


class NamespaceNotEmptyError(CatalogError):
    pass


class AlreadyExistsError(CatalogError):
    """A table or namespace of that name exists already."""


class CommitFailedError(CatalogError):
    """The catalog's compare-and-swap lost: another commit changed the table first.

    Retryable: refresh, re-validate, re-apply.
    """


class CommitStateUnknownError(CatalogError):
    """The catalog may or may not have applied the swap (e.g. the connection dropped).

    Never retried and never cleaned up after: the new metadata file may be the table's
    current state, and deleting it would corrupt the table.
    """


class CommitConflictError(ValidationError):
    """A concurrent commit makes this one wrong by Iceberg's validation rules.

    Not retryable: the operation must be planned again. `snapshot_id` names the snapshot
    that conflicts, so an operator can look at what it changed.
    """

    def __init__(self, message: str, snapshot_id: int | None = None) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id
