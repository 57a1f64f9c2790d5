"""Topic rules (RocketMQ's ``TopicValidator`` and the topic parts of ``MixAll``): which names are legal,
which topics the system keeps for itself, and the per-group retry and dead-letter topics.

A topic name is 1 to 127 characters of ``[%|a-zA-Z0-9_-]``. ``%RETRY%<group>`` holds a consumer group's
messages to be consumed again and ``%DLQ%<group>`` those that failed too often; both are created on demand.
"""

from __future__ import annotations

import re

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
"""The default topic brokers auto-create others from (when ``autoCreateTopicEnable``); a route to look up,
never a destination."""
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Delayed messages wait here, in queue ``level - 1``; their consume-queue tag code is the delivery time."""
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RMQ_SYS_WHEEL_TIMER_TOPIC = "rmq_sys_wheel_timer"
"""Timer messages wait here (queue 0) until they are due; their consume-queue tag code is the delivery time."""

NOT_ALLOWED_SEND_TOPIC_SET = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
})
"""System topics no producer may send to directly."""

RMQ_SYS_TOPIC_PREFIX = "RMQ_SYS_"
"""The prefix of the broker's transaction topics (``RMQ_SYS_TRANS_HALF_TOPIC``, ``RMQ_SYS_TRANS_OP_HALF_TOPIC``)."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

TOPIC_MAX_LENGTH = 127
"""Longest topic name: the record's TOPICLENGTH is one signed byte."""
VALID_CHARACTERS = "%|a-zA-Z0-9_-"
"""The characters of a legal topic or group name (a regular-expression character class)."""
_VALID_NAME = re.compile(f"[{VALID_CHARACTERS}]+").fullmatch


def is_topic_or_group_illegal(name: str) -> bool:
    """Whether ``name`` holds a character outside :data:`VALID_CHARACTERS` (or is empty)."""
    return _VALID_NAME(name) is None


def validate_topic(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name, or None when it is (the broker's wording, as Java's)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[{VALID_CHARACTERS}]+$"
    return None


def retry_topic(consumer_group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back from."""
    return RETRY_GROUP_TOPIC_PREFIX + consumer_group


def dlq_topic(consumer_group: str) -> str:
    """``%DLQ%<group>``: where messages go after ``max_reconsume_times`` failures."""
    return DLQ_GROUP_TOPIC_PREFIX + consumer_group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
"""``<cluster>_REPLY_TOPIC``: the topic replies are sent to (RocketMQ's ``MixAll.REPLY_TOPIC_POSTFIX``)."""


def reply_topic(cluster_name: str) -> str:
    """``<cluster>_REPLY_TOPIC``: where the replies of requests answered in ``cluster_name`` are sent; every broker
    of the cluster has it (one queue), so it is routable, and a reply is pushed to its requester, not stored for
    consumers (unless ``storeReplyMessageEnable``)."""
    return f"{cluster_name}_{REPLY_TOPIC_POSTFIX}"
