"""Delayed messages (a DELAY property), rewritten as RocketMQ's CommitLog does before the append.

A message with delay level ``n`` is stored under topic SCHEDULE_TOPIC_XXXX, queue ``n - 1``, with its real topic
and queue in the REAL_TOPIC/REAL_QID properties; its consume-queue tag code is its delivery time (store time plus
the level's delay), so the broker's schedule service reads due messages of a level in order. The put path
(:mod:`store.put_path`) rewrites on append; the consume-queue table (:mod:`store.queue_table`) computes the same
tag code when it indexes a record found by recovery or received by a slave.
"""

from __future__ import annotations

from pocketmq.common.message import MessageConst, get_property, join_properties, tags_code_of
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store.message import MessageExtBrokerInner

DELAY_MARKER = MessageConst.PROPERTY_DELAY_TIME_LEVEL + "\x01"
"""Where a properties string holds a delay level (``in`` on the string is the put path's cheap first test)."""

_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE


def deliver_time(levels: tuple[int, ...], level: int, store_timestamp: int) -> int:
    """The tag code of a SCHEDULE_TOPIC_XXXX unit: when a message of delay ``level`` (clamped to the
    configured levels, whose delays in ms are ``levels``) stored at ``store_timestamp`` is due."""
    return store_timestamp + levels[min(max(level, 1), len(levels)) - 1]


def schedule(msg: MessageExtBrokerInner, levels: tuple[int, ...]) -> MessageExtBrokerInner:
    """``msg`` rewritten to SCHEDULE_TOPIC_XXXX when it carries a valid delay level (clamped to the last of
    ``levels``) and is not a transaction's prepared or rolled-back half; otherwise ``msg`` itself."""
    if msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
        return msg
    level_text = get_property(msg.properties, MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if not level_text or not level_text.isdigit() or int(level_text) <= 0:
        return msg
    if msg.sys_flag & _TXN_MASK not in (0, _TXN_COMMIT):
        return msg
    level = min(int(level_text), len(levels))
    props = msg.properties
    if int(level_text) != level:
        props = props.replace(f"{DELAY_MARKER}{level_text}", f"{DELAY_MARKER}{level}", 1)
    props = join_properties(props, f"{MessageConst.PROPERTY_REAL_TOPIC}\x01{msg.topic}\x02"
                                   f"{MessageConst.PROPERTY_REAL_QUEUE_ID}\x01{msg.queue_id}")
    tags = msg.tags_code if msg.tags_code is not None else tags_code_of(msg.properties)
    return MessageExtBrokerInner(
        topic=RMQ_SYS_SCHEDULE_TOPIC, body=msg.body, queue_id=level - 1, flag=msg.flag, properties=props,
        tags_code=tags, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
        store_host=msg.store_host, reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, wait_store_msg_ok=msg.wait_store_msg_ok)
