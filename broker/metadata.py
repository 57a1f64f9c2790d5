"""The broker's ``config/topics.json`` (RocketMQ's TopicConfigSerializeWrapper JSON).

Blocking file work: callers run these methods in a thread. Writes are atomic (temp file, fsync, rename,
fsync of the directory), so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remoting import fastjson
from remoting.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper


@dataclass(slots=True)
class StoredTopics:
    topics: list[TopicConfig] = field(default_factory=list)
    data_version: DataVersion | None = None


_write_lock = threading.Lock()


def write_atomically(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename, fsync the directory. Writers are serialised so
    two persists of one file (a topic change racing shutdown) cannot interleave."""
    with _write_lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BrokerMetadata:
    """``config/`` of a broker's store: topics.json, consumerOffset.json, subscriptionGroup.json,
    delayOffset.json — RocketMQ's file names and JSON shapes."""

    def __init__(self, config_dir: str) -> None:
        self.config_dir = Path(config_dir)
        self.topics_path = self.config_dir / "topics.json"

    def load_json(self, name: str) -> Any:
        """The parsed content of ``config/<name>``, or None when it does not exist."""
        path = self.config_dir / name
        if not path.exists():
            return None
        return fastjson.loads(path.read_bytes())

    def save_json(self, name: str, data: Any) -> None:
        write_atomically(self.config_dir / name, fastjson.dumps(data))

    def load_topics(self) -> StoredTopics:
        if not self.topics_path.exists():
            return StoredTopics()
        raw = fastjson.loads(self.topics_path.read_bytes())
        wrapper = TopicConfigSerializeWrapper.from_json_dict(raw)
        return StoredTopics(list(wrapper.topic_config_table.values()), wrapper.data_version)

    def save_topics(self, wrapper: TopicConfigSerializeWrapper) -> None:
        write_atomically(self.topics_path, fastjson.dumps(wrapper.to_json_dict()))
