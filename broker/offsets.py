"""``ConsumerOffsetManager``: committed consumer offsets, ``topic@group → {queueId → offset}``.

Persisted to ``config/consumerOffset.json`` in RocketMQ's form (fastjson's unquoted integer keys) every
5 s when changed and at shutdown, by the controller, in a thread. Merging by maximum (never backwards)
is what a slave that served consumers while its master was down needs (apache/rocketmq#1094).
"""

from __future__ import annotations

from typing import Any

TOPIC_GROUP_SEPARATOR = "@"
#: Bound on distinct topic@group keys: every key can be created by any client's commit.
MAX_KEYS = 1_000_000


class ConsumerOffsetManager:
    def __init__(self) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self.key(topic, group)
        queues = self.table.get(key)
        if queues is None:
            if len(self.table) >= MAX_KEYS:
                raise OverflowError(f"more than {MAX_KEYS} topic@group offset keys")
            queues = self.table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when there is none."""
        return self.table.get(self.key(topic, group), {}).get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {key[len(prefix):] for key in self.table if key.startswith(prefix)}

    def topics_of_group(self, group: str) -> set[str]:
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {key[: -len(suffix)] for key in self.table if key.endswith(suffix)}

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(topic, group), {}))

    def merge_max(self, other: dict[str, dict[int, int]]) -> None:
        """Take ``other``'s offsets where they are ahead of ours (slave sync, failback)."""
        for key, queues in other.items():
            mine = self.table.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > mine.get(queue_id, -1):
                    mine[queue_id] = offset
                    self.dirty = True

    def to_json_dict(self) -> dict[str, Any]:
        return {"offsetTable": {key: dict(queues) for key, queues in self.table.items()}}

    def load_json_dict(self, data: Any) -> None:
        table = data.get("offsetTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            return
        for key, queues in table.items():
            if isinstance(key, str) and isinstance(queues, dict):
                self.table[key] = {int(q): int(o) for q, o in queues.items()}
