"""``broker.addr`` in a running broker's store directory: the address at which that broker answers requests.

A tool that finds a store locked (``lock``: a broker runs on it) reads this file to ask that broker what its
files hold, instead of trusting the checkpoint, which lags the flushed data by up to a second
(``rmq-admin export``). The broker writes it once it serves requests and removes it when it stops; after a
crash it stays behind, but then nobody holds the lock and no tool reads it. RocketMQ does not write it; a
RocketMQ broker's store simply has none. A disk too full to take the file does not stop a broker: the record is
only a shortcut, and without it the tools fall back to the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pocketmq.common.files import write_atomically

ADDRESS_FILE = "broker.addr"


def write_address(store_root: str | Path, addr: str) -> OSError | None:
    """Record ``addr`` (``host:port``) in the store; the error, when the disk would not take it.

    On failure an earlier run's record is removed (a removal needs no space), so no tool asks a dead address.
    Blocking: run it in a thread from async code.
    """
    path = Path(store_root) / ADDRESS_FILE
    try:
        write_atomically(path, f"{addr}\n".encode())
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return exc
    return None


def remove_address(store_root: str | Path, addr: str) -> None:
    """Remove the record, if it is still this broker's. Blocking: run it in a thread from async code."""
    path = Path(store_root) / ADDRESS_FILE
    if read_address(store_root) == addr:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def read_address(store_root: str | Path) -> str | None:
    """The address a broker recorded in the store, or ``None`` when there is none."""
    try:
        text = (Path(store_root) / ADDRESS_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return text or None
