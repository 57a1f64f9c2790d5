"""Request-reply's messages ("RPC over MQ", RocketMQ 4.6+): the reply a consumer makes for a request, and the
reply a broker pushes to the requesting client.

A request is an ordinary message with three properties the requester's producer adds
(:meth:`pocketmq.client.producer.producer.Producer.request`): ``CORRELATION_ID`` (a UUID), ``REPLY_TO_CLIENT``
(the requester's client id) and ``TTL`` (how long it waits, ms); the broker that stores it adds ``CLUSTER``.
:func:`create_reply_message` is RocketMQ's ``MessageUtil.createReplyMessage``: a message to
``<cluster>_REPLY_TOPIC`` with ``MSG_TYPE=reply`` and the request's three properties, which a producer sends
with SEND_REPLY_MESSAGE(_V2) (``producer.send(reply)``). The broker pushes it to the requester's connection
(PUSH_REPLY_MESSAGE_TO_CLIENT, 326); :func:`decode_pushed_reply` turns that push into a :class:`MessageExt`
with ``ARRIVE_TIME`` set.
"""

from __future__ import annotations

import time

from pocketmq.client.core.compression import decompress_body
from pocketmq.client.core.errors import ReplyMessageError, RequestExpiredError
from pocketmq.client.core.message import Message
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.message import MessageConst, parse_properties
from pocketmq.common.record import parse_host_port
from pocketmq.common.topic import reply_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import ReplyMessageRequestHeader

__all__ = ["create_reply_message", "decode_pushed_reply", "is_reply", "request_deadline_ms"]

_CLUSTER = MessageConst.PROPERTY_CLUSTER
_REPLY_TO = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
_CORRELATION_ID = MessageConst.PROPERTY_CORRELATION_ID
_TTL = MessageConst.PROPERTY_MESSAGE_TTL
_MSG_TYPE = MessageConst.PROPERTY_MESSAGE_TYPE
_REPLY = MessageConst.REPLY_MESSAGE_FLAG


def is_reply(msg: Message) -> bool:
    """Whether ``msg`` is a reply (``MSG_TYPE=reply``): a producer sends it with SEND_REPLY_MESSAGE(_V2)."""
    return msg.properties.get(_MSG_TYPE) == _REPLY


def request_deadline_ms(request: MessageExt) -> int | None:
    """When (epoch ms, the requester's clock) the requester stops waiting: born timestamp + ``TTL``; None when
    the message does not say (no TTL, or no born timestamp)."""
    ttl = request.get_property(_TTL)
    born: int = request.born_timestamp
    if not ttl or not born:
        return None
    try:
        return born + int(ttl)
    except ValueError:
        return None


def create_reply_message(request: MessageExt | Message, body: bytes, *, now_ms: int | None = None) -> Message:
    """The reply to ``request`` (a received request message), carrying ``body``: RocketMQ's
    ``MessageUtil.createReplyMessage``. Send it with any producer's ``send``.

    Raises :class:`ReplyMessageError` when ``request`` is not a request (no ``CLUSTER``, ``REPLY_TO_CLIENT`` or
    ``CORRELATION_ID``), and its :class:`RequestExpiredError` when the request's ``TTL`` has passed since it was
    born (``now_ms``, default now): the requester has given up and would refuse the reply. The check compares
    this host's clock with the requester's; hosts whose clocks disagree by more than the TTL should pass an
    adjusted ``now_ms``.
    """
    props = request.properties
    cluster = props.get(_CLUSTER)
    if not cluster:
        raise ReplyMessageError(f"create reply message fail, requestMessage error, property[{_CLUSTER}] is null.")
    for name in (_REPLY_TO, _CORRELATION_ID):
        if not props.get(name):
            raise ReplyMessageError(f"create reply message fail, requestMessage error, property[{name}] is null.")
    if isinstance(request, MessageExt):
        deadline = request_deadline_ms(request)
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if deadline is not None and now > deadline:
            raise RequestExpiredError(
                f"the request {props[_CORRELATION_ID]} of {props[_REPLY_TO]} expired {now - deadline} ms ago "
                f"(TTL {props[_TTL]} ms): its requester no longer waits for a reply")
    reply_props = {_MSG_TYPE: _REPLY, _CORRELATION_ID: props[_CORRELATION_ID], _REPLY_TO: props[_REPLY_TO]}
    if props.get(_TTL):
        reply_props[_TTL] = props[_TTL]
    return Message(reply_topic(cluster), body, properties=reply_props)


def decode_pushed_reply(request: RemotingCommand, arrive_ms: int | None = None) -> MessageExt:
    """The reply a broker pushed (PUSH_REPLY_MESSAGE_TO_CLIENT): its header fields, its body inflated when its sys
    flag says so, and ``ARRIVE_TIME`` (``arrive_ms``, default now). Raises
    :class:`~pocketmq.remoting.errors.InvalidHeaderError` for a header that lacks a required field and
    :class:`~pocketmq.client.core.errors.CompressionError` for a body that does not inflate."""
    header = ReplyMessageRequestHeader.from_command(request)
    body = bytes(decompress_body(request.body or b"", header.sys_flag))
    props = parse_properties(header.properties or "")
    props[MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(time.time_ns() // 1_000_000
                                                                 if arrive_ms is None else arrive_ms)
    return MessageExt.of(
        header.topic, body, queue_id=header.queue_id, sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp, born_host=_host(header.born_host),
        store_timestamp=header.store_timestamp, store_host=_host(header.store_host),
        reconsume_times=header.reconsume_times or 0, flag=header.flag, properties=props,
    )


def _host(address: str) -> str:
    """``address`` when it is an ``ip:port`` a record can hold, else "" (a host name, a malformed value)."""
    try:
        parse_host_port(address)
    except (ValueError, OSError):
        return ""
    return address
