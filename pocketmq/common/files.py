"""Crash-safe file replacement, for every process (the store's metadata, the name server's KV config, the SDK's
local offsets, exports).

A temporary file is named ``.<name>.<random>.tmp`` beside its target, so that an owner can recognise and remove
the leftovers of a write a crash interrupted (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path | str, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, fsync the directory.

    A crash at any moment leaves the old file or the new one, never an empty or half-written file.
    Blocking: run it in a thread from async code.
    """
    path = Path(path)
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


def remove_stale_temporaries(path: Path | str) -> None:
    """Remove the temporary files of writes to ``path`` that a kill interrupted (the rename never happened)."""
    path = Path(path)
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.parent / name)
