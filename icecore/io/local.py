"""Local disks (and NFS, and anything mounted): moves that never replace a file and never
lose one, and the directories they leave empty.

A move is a hard link, then the old name unlinked: the link refuses an existing target
atomically (a rename would replace it), and a kill between the two leaves one file under both
names. Where a filesystem has no hard links (some FUSE and network mounts) it is a rename
after a check; across devices, a copy the caller makes visible whole, then the unlink.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable

# What `link` answers on filesystems without hard links.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK})


def move(source: str, target: str, copy: Callable[[], None]) -> None:
    """Move `source` to `target`; `copy()` makes a complete copy at `target` (refusing an
    existing one) when they are on different devices. FileExistsError when `target` exists,
    FileNotFoundError when `source` does not; other OSErrors as the system raised them."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno in _NO_HARD_LINKS:
            if os.path.lexists(target):
                raise FileExistsError(errno.EEXIST, "exists", target) from None
            os.rename(source, target)
            return
        if exc.errno != errno.EXDEV:
            raise
        copy()
    os.unlink(source)


def remove_empty_directories(path: str) -> None:
    """Remove `path` and the directories below it that hold no file, deepest first; one
    that holds a file stays, whatever races it."""
    for directory, _, _ in sorted(os.walk(path), reverse=True):
        with contextlib.suppress(OSError):  # not empty, or gone
            os.rmdir(directory)
