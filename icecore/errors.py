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
