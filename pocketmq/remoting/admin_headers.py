"""Request and response headers of RocketMQ 4.9's admin codes (mqadmin, rocketmq-dashboard, rocketmq-exporter).

Field names are RocketMQ's (``extFields`` keys), one frozen dataclass per Java header class of the same name.
Kept apart from :mod:`pocketmq.remoting.headers` (the hot-path headers) because only admin traffic uses them.
"""

from __future__ import annotations

import dataclasses

from pocketmq.remoting.headers import CommandHeader, wire


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207); ``removeOffset`` (4.9.3+) also drops the group's offsets."""

    group_name: str
    remove_offset: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202), GET_TOPIC_CONFIG (351)."""

    topic: str


@dataclasses.dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str


@dataclasses.dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str
    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str
    stats_key: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool = wire("isOrder", False)


@dataclasses.dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307): admin → broker → the client named ``clientId``."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309); the broker adds the stored message as the body before forwarding."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220); ``timestamp`` -1 = the end."""

    topic: str
    group: str
    timestamp: int
    is_force: bool = wire("isForce", False)


@dataclasses.dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    client_addr: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26): the config's DataVersion as JSON."""

    version: str


@dataclasses.dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO (52)."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's ``SubscriptionGroupConfig`` (RocketMQ 5)."""

    group: str
