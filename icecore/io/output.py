"""An output file that commits on `close()` and on nothing else.

pyarrow's object-store output streams make the object visible when they are closed, and they
close themselves when leaving a `with` block that raised, or when garbage-collected: a writer
that fails halfway would leave a truncated Parquet file or manifest at its final location.
`OutputFile` keeps that from happening:

- it holds the first `part_bytes` in memory and opens the store's stream only once more than
  that has been written, so a small file (metadata, manifests, most failed writes) sends
  nothing before `close()`, and then one request;
- on S3, `part_bytes` is pyarrow's multipart part size, so once the stream is open a multipart
  upload exists; `abort()` aborts it, after which pyarrow's close cannot complete it;
- where no upload can be aborted (GCS, Azure), `abort()` closes the stream and deletes what it
  committed: for a moment an unreferenced object exists, never a referenced one;
- leaving a `with` block by an exception, or dropping the file unclosed, aborts.

Nothing is ever written elsewhere and renamed: object stores have no atomic rename.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import TracebackType

import pyarrow as pa

# pyarrow's S3 part size: a write of at least this much starts a multipart upload at once.
PART_BYTES = 10 * 1024 * 1024


class OutputFile:
    """A writable binary file for `FileIO.open_output`; use as a context manager, or call
    `close()` to commit and `abort()` to give up. Accepted by pyarrow writers as a file."""

    def __init__(
        self,
        open_stream: Callable[[], pa.NativeFile],
        discard: Callable[[pa.NativeFile, bool], None],
        fail: Callable[[str, BaseException], Exception],
        part_bytes: int = PART_BYTES,
        open_now: bool = False,
    ) -> None:
        """`open_stream` opens the store's stream; `discard(stream, close_failed)` undoes an
        opened one (see the module docstring), or cleans up after its close failed;
        `fail(action, error)` turns an error into the FileError to raise. `open_now` opens the
        stream at once: where opening is what reserves the name (an exclusive create on a
        local disk), an abandoned file must still be cleaned up.
        """
        self._open_stream = open_stream
        self._discard = discard
        self._fail = fail
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._stream: pa.NativeFile | None = None
        self._position = 0
        self._closed = False
        self._parts_sent = open_now  # whether the store may hold something of this file
        self._closing = False
        if open_now:
            self._stream = open_stream()

    # File-like surface used by pyarrow (PythonFile), fastavro and plain Python callers.
    mode = "wb"

    @property
    def closed(self) -> bool:
        return self._closed

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        """Does nothing on purpose: flushing an Azure stream commits its blocks, making a
        partial file visible. Data is sent as parts fill up and committed by `close()`."""

    def write(self, data: bytes | bytearray | memoryview | pa.Buffer) -> int:
        if self._closed:
            raise ValueError("write to a closed file")
        view = memoryview(data).cast("B")
        self._buffer += view
        self._position += len(view)
        if len(self._buffer) >= self._part_bytes:
            self._send()
        return len(view)

    def _send(self) -> None:
        try:
            if self._stream is None:
                self._stream = self._open_stream()
                self._parts_sent = not self._closing
            self._stream.write(self._buffer)
        except Exception as exc:
            self.abort()
            raise self._fail("cannot write", exc) from None
        self._buffer = bytearray()

    def close(self) -> None:
        """Send what is left and commit the file; on failure nothing is committed."""
        if self._closed:
            return
        self._closing = True
        if self._buffer or self._stream is None:
            self._send()
        stream, self._stream = self._stream, None
        assert stream is not None
        self._closed = True
        try:
            stream.close()
        except Exception as exc:
            # A lone PUT that failed left nothing; parts sent earlier must not linger. The
            # store may have committed despite the error (the answer was lost): the caller
            # retrying must check (see FileIO.write_bytes), not assume either way.
            if self._parts_sent:
                with contextlib.suppress(Exception):
                    self._discard(stream, True)
            raise self._fail("cannot write", exc) from None

    def abort(self) -> None:
        """Give up: whatever was sent is discarded, the location is left as it was before
        (for a file not yet sent) or without the partial file. Never raises."""
        if self._closed:
            return
        self._closed = True
        self._buffer = bytearray()
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):
                self._discard(stream, False)

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # An unclosed file was not finished: it must not become visible.
        with contextlib.suppress(Exception):
            self.abort()
