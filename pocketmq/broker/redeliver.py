"""A stored message written again elsewhere: to a retry topic, to ``%DLQ%<group>``, or from a timer to its real
topic. One builder (:func:`redelivered`) for CONSUMER_SEND_MSG_BACK, POP's revive and the timer service, so a copy
always keeps the body, flag, sys flag, born time and host of the original; one reader (:func:`stored_message`) for
the message at a queue offset."""

from __future__ import annotations

from collections.abc import Mapping

from pocketmq.common.message import MessageConst, encode_properties
from pocketmq.common.record import MessageRecord, message_id
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore


def stored_message(store: MessageStore, topic: str, queue_id: int, offset: int) -> MessageRecord | None:
    """The record at a queue offset; None when it is gone (or never was)."""
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None or not cq.min_offset <= offset < cq.max_offset:
        return None
    unit = cq.get_unit(offset)
    if unit is None or unit[1] == BLANK_UNIT_SIZE:
        return None
    return store.look_message_by_offset(unit[0], unit[1])


def redelivered(record: MessageRecord, *, topic: str, queue_id: int, properties: Mapping[str, str] | str,
                reconsume_times: int) -> MessageExtBrokerInner:
    """``record`` as a new message of ``topic``/``queue_id`` with ``properties`` (a dict, or the string itself)."""
    return MessageExtBrokerInner(
        topic=topic, body=bytes(record.body), queue_id=queue_id, flag=record.flag,
        properties=properties if isinstance(properties, str) else encode_properties(properties),
        sys_flag=record.sys_flag, born_timestamp=record.born_timestamp,
        born_host=bytes(record.born_host), reconsume_times=reconsume_times,
    )


def origin_message_id(record: MessageRecord, properties: Mapping[str, str]) -> str:
    """The id a consumer knew the message by: its UNIQ_KEY, else its offset message id."""
    return (properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            or message_id(bytes(record.store_host), record.physical_offset))


def mark_dead_letter(properties: dict[str, str], record: MessageRecord, origin_topic: str) -> None:
    """The properties a dead letter carries: where it came from (4.x's RETRY_TOPIC/ORIGIN_MESSAGE_ID and 5.x's
    DLQ_ORIGIN_TOPIC/DLQ_ORIGIN_MESSAGE_ID), no delay."""
    origin_id = origin_message_id(record, properties)
    properties.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, origin_topic)
    properties.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, origin_id)
    properties.setdefault(MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC, origin_topic)
    properties.setdefault(MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID, origin_id)
    properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
