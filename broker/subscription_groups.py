"""``SubscriptionGroupManager``: consumer group configs, auto-created with RocketMQ's defaults (§8)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_GROUPS = 100_000


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json_dict(self) -> dict[str, Any]:
        return {"".join(w.capitalize() if i else w for i, w in enumerate(k.split("_"))): v
                for k, v in asdict(self).items()}


class SubscriptionGroupManager:
    def __init__(self, *, auto_create: bool) -> None:
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.dirty = False

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        config = self.table.get(group)
        if config is None and self.auto_create and len(self.table) < MAX_GROUPS:
            config = self.table[group] = SubscriptionGroupConfig(group)
            self.dirty = True
        return config

    def to_json_dict(self) -> dict[str, Any]:
        return {"subscriptionGroupTable": {name: c.to_json_dict() for name, c in self.table.items()},
                "dataVersion": {"counter": len(self.table), "timestamp": 0}}

    def load_json_dict(self, data: Any) -> None:
        table = data.get("subscriptionGroupTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            return
        for name, raw in table.items():
            if isinstance(raw, dict):
                self.table[name] = SubscriptionGroupConfig(
                    group_name=name,
                    consume_enable=bool(raw.get("consumeEnable", True)),
                    retry_queue_nums=int(raw.get("retryQueueNums", 1)),
                    retry_max_times=int(raw.get("retryMaxTimes", 16)),
                    broker_id=int(raw.get("brokerId", 0)),
                    which_broker_when_consume_slowly=int(raw.get("whichBrokerWhenConsumeSlowly", 1)),
                )
