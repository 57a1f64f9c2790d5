"""``KVConfigManager``: the name server's namespaced key/value settings (PUT/GET/DELETE_KV_CONFIG, 100-102).

Kept in memory as namespace -> {key -> value} and stored as RocketMQ's ``kvConfig.json``::

    {"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;broker-b:4"}}}

Mutations happen on the event loop; :meth:`KVConfigManager.persist` does blocking file I/O and is meant
to run in a worker thread (``await asyncio.to_thread(manager.persist)``). A lock makes the snapshot it
writes consistent, and a second lock keeps two concurrent ``persist`` calls from interleaving, so the
file always ends up holding a complete, recent table. The file is replaced atomically: written to a
temporary file in the same directory, fsynced, renamed over the old one, then the directory is fsynced.

Sizes are bounded (entries, lengths, total characters) because a peer can grow the table at will.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from pocketmq.common.files import write_atomically
from pocketmq.remoting import fastjson
from pocketmq.remoting.errors import InvalidHeaderError, PocketMQError

__all__ = ["KVConfigError", "KVConfigFullError", "KVConfigManager"]

#: Defaults for the bounds; far above what ORDER_TOPIC_CONFIG and friends ever hold.
MAX_ENTRIES = 65_536
MAX_KEY_LENGTH = 1024
MAX_VALUE_LENGTH = 64 * 1024
MAX_TOTAL_CHARS = 32 * 1024 * 1024


class KVConfigError(PocketMQError, ValueError):
    """The stored KV config file cannot be read as ``{"configTable":{ns:{k:v}}}``."""


class KVConfigFullError(PocketMQError):
    """A put would exceed one of the manager's bounds."""


class KVConfigManager:
    """Namespaced string settings, optionally persisted at ``path``."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        max_entries: int = MAX_ENTRIES,
        max_key_length: int = MAX_KEY_LENGTH,
        max_value_length: int = MAX_VALUE_LENGTH,
        max_total_chars: int = MAX_TOTAL_CHARS,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.max_entries = max_entries
        self.max_key_length = max_key_length
        self.max_value_length = max_value_length
        self.max_total_chars = max_total_chars
        self._table: dict[str, dict[str, str]] = {}
        self._entries = 0
        self._total_chars = 0
        self._table_lock = threading.Lock()
        self._write_lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file at ``path`` if it exists (blocking; call at start-up). Bounds apply."""
        if self.path is None or not self.path.exists():
            return
        try:
            raw = fastjson.loads(self.path.read_bytes())
        except ValueError as exc:
            raise KVConfigError(f"{self.path}: {exc}") from None
        table = raw.get("configTable") if isinstance(raw, dict) else None
        if not isinstance(table, dict):
            raise KVConfigError(f"{self.path}: no configTable object")
        for namespace, entries in table.items():
            if not isinstance(entries, dict):
                raise KVConfigError(f"{self.path}: namespace {namespace!r} is not an object")
            for key, value in entries.items():
                if not all(isinstance(x, str) for x in (namespace, key, value)):
                    raise KVConfigError(f"{self.path}: non-string entry in namespace {namespace!r}")
                self.put_kv_config(namespace, key, value)

    # -- table operations ------------------------------------------------------------------------------

    def put_kv_config(self, namespace: str, key: str, value: str) -> bool:
        """Set ``namespace/key`` to ``value``; True if that changed anything."""
        self._check_key(namespace, "namespace")
        self._check_key(key, "key")
        if not isinstance(value, str):
            raise InvalidHeaderError(f"value must be a string, got {type(value).__name__}")
        if len(value) > self.max_value_length:
            raise KVConfigFullError(f"value longer than {self.max_value_length} characters")
        with self._table_lock:
            entries = self._table.get(namespace)
            old = entries.get(key) if entries is not None else None
            if old == value:
                return False
            # Each entry is charged its namespace, key and value; replacing a value charges the difference.
            grow = len(value) - len(old) if old is not None else len(namespace) + len(key) + len(value)
            if old is None and self._entries >= self.max_entries:
                raise KVConfigFullError(f"KV config holds the maximum of {self.max_entries} entries")
            if self._total_chars + grow > self.max_total_chars:
                raise KVConfigFullError(f"KV config would exceed {self.max_total_chars} characters")
            self._table.setdefault(namespace, {})[key] = value
            self._entries += old is None
            self._total_chars += grow
            return True

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        entries = self._table.get(namespace)
        return None if entries is None else entries.get(key)

    def delete_kv_config(self, namespace: str, key: str) -> bool:
        """Remove ``namespace/key``; True if it existed. An emptied namespace is dropped."""
        with self._table_lock:
            entries = self._table.get(namespace)
            if entries is None or key not in entries:
                return False
            value = entries.pop(key)
            if not entries:
                del self._table[namespace]
            self._entries -= 1
            self._total_chars -= len(namespace) + len(key) + len(value)
            return True

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's entries, or None if it has none."""
        entries = self._table.get(namespace)
        return None if entries is None else dict(entries)

    # Short names for the processors; the long ones keep RocketMQ's spelling.
    put = put_kv_config
    get = get_kv_config
    delete = delete_kv_config

    def __len__(self) -> int:
        return self._entries

    def _check_key(self, value: Any, what: str) -> None:
        if not isinstance(value, str) or not value:
            raise InvalidHeaderError(f"{what} must be a non-empty string")
        if len(value) > self.max_key_length:
            raise KVConfigFullError(f"{what} longer than {self.max_key_length} characters")

    # -- persistence -----------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The table as the bytes of ``kvConfig.json``."""
        with self._table_lock:
            table = {namespace: dict(entries) for namespace, entries in self._table.items()}
        return fastjson.dumps({"configTable": table})

    def persist(self) -> None:
        """Write the table to ``path`` atomically (blocking: run it in a thread). No-op without path."""
        if self.path is None:
            return
        with self._write_lock:
            write_atomically(self.path, self.snapshot())


