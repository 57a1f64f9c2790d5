"""The messages POP writes back: an expired message to its POP retry topic (RocketMQ's ``reviveRetry``), or, past
the group's ``retryMaxTimes``, to ``%DLQ%<group>``."""

from __future__ import annotations

from pocketmq.broker.pop.records import PopCheckPoint
from pocketmq.broker.redeliver import mark_dead_letter, redelivered
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.message import MessageConst, parse_properties
from pocketmq.common.pop import normal_topic, pop_retry_topic
from pocketmq.common.record import MessageRecord
from pocketmq.common.topic import dlq_topic, is_retry_topic
from pocketmq.common.topic_config import PermName
from pocketmq.store.message import MessageExtBrokerInner

_READ_WRITE = PermName.PERM_READ | PermName.PERM_WRITE


def retry_message(record: MessageRecord, ck: PopCheckPoint, topics: TopicConfigManager) -> MessageExtBrokerInner:
    """``record`` (popped under ``ck`` and not acked in time) for ``%RETRY%<group>_<topic>`` queue 0, reconsume
    times + 1, first pop time kept (the retry topic is created on first use, one queue)."""
    topic = ck.topic if is_retry_topic(ck.topic) else pop_retry_topic(ck.topic, ck.group)
    topics.create_system_topic(topic, 1, _READ_WRITE)
    props = parse_properties(record.properties)
    if record.reconsume_times == 0 or MessageConst.PROPERTY_FIRST_POP_TIME not in props:
        props[MessageConst.PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
    return redelivered(record, topic=topic, queue_id=0, properties=props, reconsume_times=record.reconsume_times + 1)


def dead_letter_message(record: MessageRecord, ck: PopCheckPoint,
                        topics: TopicConfigManager) -> MessageExtBrokerInner:
    """``record`` for ``%DLQ%<group>`` (one queue, created on first use)."""
    topic = dlq_topic(ck.group)
    topics.create_system_topic(topic, 1, _READ_WRITE)
    props = parse_properties(record.properties)
    mark_dead_letter(props, record, normal_topic(ck.topic, ck.group))
    return redelivered(record, topic=topic, queue_id=0, properties=props, reconsume_times=record.reconsume_times + 1)
