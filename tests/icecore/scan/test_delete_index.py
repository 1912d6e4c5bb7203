"""`DeleteFileIndex`'s one-DV-per-data-file rule: a corrupt table in one snapshot, a history
of replacements across the snapshots a commit validates (`successive_dvs`)."""

from __future__ import annotations

import pytest

from icecore.errors import ValidationError
from icecore.scan.delete_index import DeleteFileIndex
from icecore.spec.manifest import DataFile, FileContent, FileFormat

DATA = DataFile("s3://b/t/data/a.parquet", FileFormat.PARQUET, (), 10, 1000)


def dv(puffin: str, referenced: str = DATA.file_path) -> DataFile:
    return DataFile(
        f"s3://b/t/data/{puffin}.puffin", FileFormat.PUFFIN, (), 1, 100,
        FileContent.POSITION_DELETES, referenced_data_file=referenced,
        content_offset=4, content_size_in_bytes=40,
    )  # fmt: skip


def test_two_dvs_for_one_data_file_in_one_snapshot_are_a_corrupt_table() -> None:
    index = DeleteFileIndex([0])
    index.add(dv("one"), 2)
    with pytest.raises(ValidationError, match=r"corrupt table: data file .*a\.parquet has two"):
        index.add(dv("two"), 3)


def test_successive_dvs_stand_for_the_newest_whatever_the_order_added() -> None:
    for order in ((2, 5, 3), (5, 3, 2)):
        index = DeleteFileIndex([0], successive_dvs=True)
        for seq in order:
            index.add(dv(f"seq-{seq}"), seq)
        index.freeze()
        assert [f.file_path for f in index.for_data_file(DATA, 1)] == [dv("seq-5").file_path]


def test_two_dvs_with_one_sequence_number_stay_corrupt_across_snapshots() -> None:
    """One snapshot adding two DVs for a file is corrupt whatever window is indexed."""
    index = DeleteFileIndex([0], successive_dvs=True)
    index.add(dv("one"), 4)
    with pytest.raises(ValidationError, match="two deletion vectors"):
        index.add(dv("two"), 4)
