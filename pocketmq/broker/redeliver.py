"""A stored message written again elsewhere: to a retry topic, to ``%DLQ%<group>``, or from a timer to its real
topic. One builder (:func:`redelivered`) for CONSUMER_SEND_MSG_BACK, POP's revive and the timer service, so a copy
always keeps the body, flag, sys flag, born time and host of the original."""

from __future__ import annotations

from collections.abc import Mapping

from pocketmq.common.message import MessageConst, encode_properties
from pocketmq.common.record import MessageRecord, message_id
from pocketmq.store.message import MessageExtBrokerInner


def redelivered(record: MessageRecord, *, topic: str, queue_id: int, properties: Mapping[str, str],
                reconsume_times: int) -> MessageExtBrokerInner:
    """``record`` as a new message of ``topic``/``queue_id`` with ``properties``."""
    return MessageExtBrokerInner(
        topic=topic, body=bytes(record.body), queue_id=queue_id, flag=record.flag,
        properties=encode_properties(properties), sys_flag=record.sys_flag, born_timestamp=record.born_timestamp,
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
