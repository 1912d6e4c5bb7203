"""The Python workers' zip importers re-read an archive only when it changed, and still do
when it has (spark_jobs.common.worker)."""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
from pathlib import Path

import pytest

from spark_jobs.common.worker import cheap_cache_invalidation


def _zip(path: Path, source: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("zipped_probe.py", source)


def test_a_changed_archive_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "probe.zip"
    _zip(archive, "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(archive))
    monkeypatch.delitem(sys.modules, "zipped_probe", raising=False)
    assert importlib.import_module("zipped_probe").VALUE == 1

    cheap_cache_invalidation()
    importer = sys.path_importer_cache[str(archive)]
    assert type(importer).__name__ == "_ChangedZipImporter"
    files = importer._files  # the directory it read
    importlib.invalidate_caches()  # what PySpark calls before every task
    assert importer._files is files  # unchanged: not read again

    _zip(archive, "VALUE = 2\nMORE = 3\n")
    os.utime(archive, ns=(1, 1))  # a different modification time, whatever the clock says
    importlib.invalidate_caches()
    del sys.modules["zipped_probe"]
    reloaded = importlib.import_module("zipped_probe")
    assert (reloaded.VALUE, reloaded.MORE) == (2, 3)
    del sys.modules["zipped_probe"]
