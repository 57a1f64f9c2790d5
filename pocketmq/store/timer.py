"""Timer messages (RocketMQ 5's ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``), rewritten before the
append as :mod:`pocketmq.store.delay` does for delay levels (RocketMQ's ``HookUtils.transformTimerMessage``).

A message due in the future is stored under ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` (its delivery
time, ms), ``REAL_TOPIC`` and ``REAL_QID`` added; its consume-queue tag code is the delivery time, so the timer
queue is the persistent timer log (replicated and recovered as every queue is) and the broker's timer service
(:mod:`pocketmq.broker.timer`) knows when each is due without reading it. Unlike RocketMQ (which rounds down to
``timerPrecisionMs``, one second), the exact millisecond is kept: a timer never fires early.

Not rewritten: a message with ``TIMER_OUT_MS`` already (a timer that fired, on its way to its real topic); a
transaction's half message in ``RMQ_SYS_TRANS_HALF_TOPIC`` (the committed message is rewritten when it is put, so a
rolled-back transaction never reaches the timer queue); a message with a delay level (the level wins and the timer
properties are dropped, as in RocketMQ); one due now or in the past (delivered at once). One due more than
``timerMaxDelaySec`` ahead, or whose property is not a number, is refused (WHEEL_TIMER_MSG_ILLEGAL).
"""

from __future__ import annotations

import dataclasses

from pocketmq.common.message import MessageConst, get_property, join_properties
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_WHEEL_TIMER_TOPIC
from pocketmq.store.message import MessageExtBrokerInner

TIMER_MARKER = "TIMER_"
"""In every timer property name: ``in`` on the properties string is the put path's cheap first test."""
_DELIVER_MS = MessageConst.PROPERTY_TIMER_DELIVER_MS
_DELAY_SEC = MessageConst.PROPERTY_TIMER_DELAY_SEC
_DELAY_MS = MessageConst.PROPERTY_TIMER_DELAY_MS
_OUT_MS = MessageConst.PROPERTY_TIMER_OUT_MS
_TIMER_INPUTS = (_DELIVER_MS, _DELAY_SEC, _DELAY_MS)
_NEVER_TIMED = (RMQ_SYS_WHEEL_TIMER_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC)
"""A half message waits for its transaction, not its timer (it carries the timer properties to its commit)."""
_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE


class TimerIllegal(ValueError):
    """A timer property that is not a whole number, or a delivery time beyond the maximum delay."""


def deliver_ms(properties: str, now: int) -> int | None:
    """When a message with these properties is due (ms), or None when it has no timer property; relative delays
    count from ``now``. Raises :class:`TimerIllegal` for a value that is not a whole number."""
    for name, scale in ((_DELAY_SEC, 1000), (_DELAY_MS, 1), (_DELIVER_MS, 0)):
        raw = get_property(properties, name)
        if raw is None:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise TimerIllegal(f"{name}={raw!r} is not a whole number") from None
        return value if scale == 0 else now + value * scale
    return None


def is_timer_candidate(properties: str) -> bool:
    """A message whose timer properties may make it a timer (it has one, and has not fired yet)."""
    return TIMER_MARKER in properties and get_property(properties, _OUT_MS) is None and any(
        get_property(properties, name) is not None for name in _TIMER_INPUTS)


def check_timer(properties: str, now: int, max_delay_ms: int) -> int | None:
    """The delivery time of a timer message that will wait, None when it is not one (or is due already);
    :class:`TimerIllegal` when it cannot be taken. For the broker's checks before a put."""
    if not is_timer_candidate(properties):
        return None
    due = deliver_ms(properties, now)
    if due is None or due <= now:
        return None
    if due - now > max_delay_ms:
        raise TimerIllegal(f"the delivery time is {due - now} ms ahead, beyond the max delay {max_delay_ms} ms")
    return due


def delay_level_wins(properties: str) -> bool:
    """A delay level above 0 is set: the message is scheduled by its level and its timer properties are dropped."""
    level = get_property(properties, MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    return bool(level and level.isdigit() and int(level) > 0)


def strip_timer(properties: str) -> str:
    """``properties`` without the timer inputs (a delay level wins over them)."""
    markers = tuple(f"{name}\x01" for name in _TIMER_INPUTS)
    return "\x02".join(p for p in properties.split("\x02") if p and not p.startswith(markers))


def schedule_timer(msg: MessageExtBrokerInner, now: int, max_delay_ms: int) -> MessageExtBrokerInner | None:
    """``msg`` rewritten to the timer queue when it is a timer message due later, ``msg`` itself when it is not
    one (see the module docstring), None when it must be refused."""
    props = msg.properties
    if msg.topic in _NEVER_TIMED or not is_timer_candidate(props):
        return msg
    if msg.sys_flag & _TXN_MASK not in (0, _TXN_COMMIT):
        return msg
    if delay_level_wins(props):
        return dataclasses.replace(msg, properties=strip_timer(props))
    try:
        due = check_timer(props, now, max_delay_ms)
    except TimerIllegal:
        return None
    if due is None:
        return msg
    props = join_properties(props, f"{_OUT_MS}\x01{due}\x02{MessageConst.PROPERTY_REAL_TOPIC}\x01{msg.topic}\x02"
                                   f"{MessageConst.PROPERTY_REAL_QUEUE_ID}\x01{msg.queue_id}")
    return MessageExtBrokerInner(
        topic=RMQ_SYS_WHEEL_TIMER_TOPIC, body=msg.body, queue_id=0, flag=msg.flag, properties=props, tags_code=due,
        sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
        reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
        wait_store_msg_ok=msg.wait_store_msg_ok)


def timer_out_ms(properties: str) -> int:
    """The delivery time a stored timer message carries (0 when it has none, or a bad one)."""
    raw = get_property(properties, _OUT_MS)
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0
