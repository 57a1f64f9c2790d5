"""What the parts of a started push consumer share (:class:`PushContext`): its settings, its subscriptions,
its broker requests, its offsets and their committer, and its logger. The pull service, the rebalance
service and the consumer itself each get the one context instead of the same six arguments. A lite pull
consumer runs the same pull and rebalance services over a context of its own settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pocketmq.client.consumer.broker_api import ConsumerAPI
from pocketmq.client.consumer.config import ConsumerConfig, LitePullConsumerConfig
from pocketmq.client.consumer.offset_store import OffsetCommitter, OffsetTable
from pocketmq.common.subscription import SubscriptionData

__all__ = ["PushContext"]


@dataclass(frozen=True, slots=True)
class PushContext:
    """The shared pieces of one started push consumer."""

    config: ConsumerConfig | LitePullConsumerConfig
    #: Topic → subscription: the consumer's own dict, so ``subscribe`` after start is seen at once.
    subscriptions: Mapping[str, SubscriptionData]
    api: ConsumerAPI
    offsets: OffsetTable
    committer: OffsetCommitter
    #: The consumer's logger, bound to its group.
    log: Any
