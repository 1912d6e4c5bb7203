"""Arrow <-> NumPy through buffers (`icecore.data.arrow_numpy`): the same values as pyarrow's
own conversions, at any offset of a sliced array, and without pyarrow's import of pandas."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from icecore.data.arrow_numpy import flags, int64s, integers, repeated_string, strings

INTEGER_LIKE = [
    (pa.int8(), [-128, 0, 5, 127, -1, 3, 9, 2, 1]),
    (pa.int16(), [-(2**15), 7, 2**15 - 1, 0, 4, 1, 2, 3, 5]),
    (pa.int32(), [-(2**31), 2**31 - 1, 0, 11, 12, 13, 14, 15, 16]),
    (pa.int64(), [-(2**63), 2**63 - 1, 0, 1, 2, 3, 4, 5, 6]),
    (pa.uint8(), [0, 255, 7, 8, 9, 10, 11, 12, 13]),
    (pa.uint32(), [0, 2**32 - 1, 1, 2, 3, 4, 5, 6, 7]),
    (pa.date32(), [dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in range(-4, 5)]),
    (pa.time64("us"), [dt.time(0, 0, s) for s in range(9)]),
    (pa.timestamp("us", "UTC"), [dt.datetime(2024, 1, 1, i, tzinfo=dt.UTC) for i in range(9)]),
]


@pytest.mark.parametrize(("kind", "values"), INTEGER_LIKE, ids=[str(k) for k, _ in INTEGER_LIKE])
@pytest.mark.parametrize(("offset", "length"), [(0, 9), (3, 5), (8, 1), (4, 0)])
def test_integers_are_the_stored_values_of_any_slice(
    kind: pa.DataType, values: list[object], offset: int, length: int
) -> None:
    array = pa.array(values, kind).slice(offset, length)
    signed = "u" if pa.types.is_unsigned_integer(kind) else ""
    stored = array.view(pa.type_for_alias(f"{signed}int{kind.bit_width}"))
    view = integers(array)
    assert view.tolist() == stored.to_pylist()
    assert view.dtype.itemsize * 8 == kind.bit_width


def test_integers_of_a_column_with_nulls_are_right_where_valid() -> None:
    array = pa.array([1, None, 3, None, 5, 6], pa.int64()).slice(1)
    view = integers(array)
    valid = flags(array.is_valid())
    assert valid.tolist() == [False, True, False, True, True]
    assert view[valid].tolist() == [3, 5, 6]


@pytest.mark.parametrize(
    "kind", [pa.string(), pa.float64(), pa.bool_(), pa.month_day_nano_interval()]
)
def test_integers_refuse_what_is_not_stored_as_integers(kind: pa.DataType) -> None:
    with pytest.raises(TypeError, match="not stored as integers"):
        integers(pa.nulls(2, kind))


@pytest.mark.parametrize("offset", range(10))
def test_flags_unpack_the_bits_of_any_slice(offset: int) -> None:
    bits = [i % 3 == 0 or i % 7 == 1 for i in range(29)]
    array = pa.array(bits).slice(offset, 29 - 2 * offset)
    assert flags(array).tolist() == array.to_pylist()
    assert flags(pa.array(bits).slice(offset, 0)).tolist() == []


def test_flags_refuse_nulls_and_other_types() -> None:
    with pytest.raises(ValueError, match="1 nulls"):
        flags(pa.array([True, None]))
    with pytest.raises(TypeError, match="not boolean"):
        flags(pa.array([1, 0]))


def test_int64s_share_contiguous_memory_and_copy_the_rest() -> None:
    values = np.arange(10, dtype=np.int64)
    shared = int64s(values)
    assert shared.to_pylist() == list(range(10))
    assert shared.buffers()[1].address == values.ctypes.data
    assert int64s(values[::3]).to_pylist() == [0, 3, 6, 9]
    assert int64s(np.array([-1, 2**31], dtype=np.int64)).type == pa.int64()
    assert int64s(np.array([7, 8], dtype=np.int32)).to_pylist() == [7, 8]
    assert int64s(np.empty(0, dtype=np.int64)).to_pylist() == []


@pytest.mark.parametrize(
    "values", [[], [""], ["a", "", "ünï", "s3://b/k/00001.parquet"], ["x" * 70_000] * 3]
)
def test_strings(values: list[str]) -> None:
    array = strings(values)
    assert array.type == pa.string() and array.to_pylist() == values
    assert array.equals(pa.array(values, pa.string()))


@pytest.mark.parametrize("count", [0, 1, 4])
def test_repeated_string(count: int) -> None:
    value = "s3://bucket/dátá/00001-ü.parquet"
    array = repeated_string(value, count)
    assert array.type == pa.string() and array.to_pylist() == [value] * count


_USE_ALL = """\
import sys
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from icecore.data.arrow_numpy import flags, int64s, integers, repeated_string, strings

ids = int64s(np.arange(100, dtype=np.int64))
hit = flags(pc.is_in(ids, value_set=ids.slice(10, 5)))
assert flags(pc.is_in(strings(["a", "b"]), value_set=strings(["b"]))).tolist() == [False, True]
table = pa.Table.from_arrays([repeated_string("f.parquet", int(hit.sum())),
                              int64s(integers(ids)[hit])], names=["file_path", "pos"])
pq.write_table(table, sys.argv[1])
assert pq.ParquetFile(sys.argv[1]).read().num_rows == 5
print("pandas" in sys.modules)
pa.array([1])
print("pandas" in sys.modules)
"""


def test_the_crossings_import_no_pandas_where_pyarrow_s_own_do(tmp_path: Path) -> None:
    """The point of the module: a fresh process converting, computing and writing through it
    has not imported pandas; its first `pa.array` then does (so the check can see it)."""
    done = subprocess.run(
        [sys.executable, "-c", _USE_ALL, str(tmp_path / "p.parquet")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
