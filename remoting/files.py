"""Crash-safe file replacement for the processes above the ground floor (name server, SDK).

The store keeps its own copy (``store.metadata.atomic_write``) because the store may not depend on
``remoting``; both follow the same recipe.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, fsync the directory.

    A crash at any moment leaves the old file or the new one, never an empty or half-written file.
    Blocking: run it in a thread from async code.
    """
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(directory)


def fsync_directory(directory: Path) -> None:
    """Make a rename durable; where a directory cannot be opened this is best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
