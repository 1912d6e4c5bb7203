"""NumPy views of Arrow arrays, and Arrow arrays of NumPy ones, made from their buffers.

    values = integers(batch.column("id"))          # a NumPy view of an Arrow column, no copy
    column = int64s(np.flatnonzero(hit))            # Arrow int64 array over NumPy memory
    paths = repeated_string(data_file_path, count)  # one value, `count` times
    wanted = strings(sorted(paths_of_the_task))     # a value set for `pc.is_in`

pyarrow imports pandas, when it is installed, the first time it converts between Arrow and
NumPy or Python values (`Array.to_numpy`, `pa.array`, `pa.scalar`, compute calls given a
Python scalar), to check whether the value is a pandas object: about 0.3 s of a process. A
conversion of equality deletes small enough to match in the driver is done in about as long
again (issue 26's bar: 20M rows), and never needs pandas, so the arrays it matches and writes
cross between Arrow and NumPy here, through their buffers, which imports nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def integers(array: pa.Array) -> np.ndarray:
    """An array of fixed-width integers (or dates, times, timestamps: their stored integers)
    as a read-only NumPy view of its values buffer. A null's slot holds whatever the buffer
    has there: callers that allow nulls mask them with the validity."""
    kind = array.type
    if not (pa.types.is_integer(kind) or pa.types.is_temporal(kind)) or pa.types.is_interval(kind):
        raise TypeError(f"{kind} is not stored as integers")
    width = kind.bit_width // 8
    dtype = np.dtype(f"<{'u' if pa.types.is_unsigned_integer(kind) else 'i'}{width}")
    values = array.buffers()[1]
    if values is None or not len(array):
        return np.empty(0, dtype=dtype)
    return np.frombuffer(values, dtype=dtype, count=len(array), offset=array.offset * width)


def flags(array: pa.Array) -> np.ndarray:
    """A boolean array without nulls as NumPy booleans (Arrow packs them eight to a byte)."""
    if array.type != pa.bool_():
        raise TypeError(f"{array.type} is not boolean")
    if array.null_count:
        raise ValueError(f"boolean array has {array.null_count} nulls: no NumPy flags")
    bits = array.buffers()[1]
    if bits is None or not len(array):
        return np.zeros(0, dtype=bool)
    unpacked = np.unpackbits(
        np.frombuffer(bits, dtype=np.uint8), count=array.offset + len(array), bitorder="little"
    )
    return unpacked[array.offset :].view(bool)


def int64s(values: np.ndarray) -> pa.Array:
    """An Arrow int64 array over `values`' memory (copied only when it is not contiguous
    int64)."""
    held = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(held), [None, pa.py_buffer(held)])


def strings(values: Sequence[str]) -> pa.Array:
    """An Arrow string array of `values` (none null)."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{offsets[-1]} bytes of strings: more than one Arrow string array holds")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def repeated_string(value: str, count: int) -> pa.Array:
    """A string array of `value`, `count` times (one copy of its bytes per row, as Arrow's
    string layout has it)."""
    return pa.repeat(strings([value])[0], count)
