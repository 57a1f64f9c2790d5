"""A PULL_MESSAGE response as the consumer sees it: :class:`PullStatus` and :class:`PullResult`
(RocketMQ's ``PullAPIWrapper.processPullResult``). The request's sysFlag bits are the model's
(:class:`pocketmq.common.sysflag.PullSysFlag`).

Response code → status: 0 SUCCESS → FOUND, 19 PULL_NOT_FOUND → NO_NEW_MSG,
20 PULL_RETRY_IMMEDIATELY → NO_MATCHED_MSG, 21 PULL_OFFSET_MOVED → OFFSET_ILLEGAL; any other code is the
broker's error (:func:`pocketmq.remoting.errors.error_for_response`). The response header always carries
``nextBeginOffset``, ``minOffset``, ``maxOffset`` and ``suggestWhichBrokerId``.

For FOUND the body is decoded (:func:`pocketmq.client.core.message_ext.decode_messages`, or its compiled twin
:func:`pocketmq.client.consumer.fast_decode.decode_records` when that build runs); the broker filtered by tag hash
code only, so messages whose ``TAGS`` string is not subscribed are dropped here, and every remaining
message gets the ``MIN_OFFSET``/``MAX_OFFSET`` properties and the queue's broker name, as in the Java
client.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt, decode_messages
from pocketmq.common.compiled import loaded_from_extension
from pocketmq.common.message import MessageConst
from pocketmq.common.subscription import SubscriptionData
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.command import Body
from pocketmq.remoting.errors import InvalidHeaderError, error_for_response

__all__ = [
    "PullResult",
    "PullStatus",
    "pull_result_from_response",
    "pull_status_for_code",
]


class PullStatus(enum.Enum):
    FOUND = ResponseCode.SUCCESS
    NO_NEW_MSG = ResponseCode.PULL_NOT_FOUND
    NO_MATCHED_MSG = ResponseCode.PULL_RETRY_IMMEDIATELY
    OFFSET_ILLEGAL = ResponseCode.PULL_OFFSET_MOVED


_STATUS_BY_CODE: dict[int, PullStatus] = {int(status.value): status for status in PullStatus}



def _decoder() -> Callable[..., list[MessageExt]]:
    """The compiled decoder when its extension is loaded; in plain Python the model's own (the faster of the two
    there; the typed source needs the ``cython`` shim, which only the build requires)."""
    try:
        from pocketmq.client.consumer import fast_decode
    except ImportError:
        return decode_messages
    return fast_decode.decode_records if loaded_from_extension(fast_decode) else decode_messages


_decode = _decoder()
decode_body = _decode
"""The decoder of a response body of stored records (a pull's or a pop's): compiled when it is built."""


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's outcome. ``messages`` is empty unless FOUND (and may be empty even then, when the
    client-side tag filter dropped them all: pull again from ``next_begin_offset`` at once)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


def pull_status_for_code(code: int, remark: str | None = None, addr: str | None = None) -> PullStatus:
    """The status for a pull response code; raises the broker's :class:`~pocketmq.remoting.errors.ResponseError`
    for any code that is not one of the four pull outcomes."""
    status = _STATUS_BY_CODE.get(code)
    if status is None:
        raise error_for_response(code, remark, addr)
    return status


def _required_int(ext_fields: Mapping[str, object], name: str) -> int:
    raw = ext_fields.get(name)
    if raw is None:
        raise InvalidHeaderError(f"pull response lacks {name}")
    try:
        return int(str(raw))
    except ValueError:
        raise InvalidHeaderError(f"pull response has a non-integer {name}: {raw!r}") from None


def pull_result_from_response(
    code: int,
    ext_fields: Mapping[str, object] | None,
    body: Body | None,
    *,
    message_queue: MessageQueue,
    subscription: SubscriptionData | None = None,
    remark: str | None = None,
    addr: str | None = None,
    decompress: bool = True,
    check_crc: bool = False,
) -> PullResult:
    """Turn a PULL_MESSAGE response into a :class:`PullResult`.

    Raises the broker's error for a non-pull code, :class:`~pocketmq.remoting.errors.InvalidHeaderError` when an
    offset field is missing, and :class:`~pocketmq.client.core.message_ext.MessageDecodeError` for a bad body.
    """
    status = pull_status_for_code(code, remark, addr)
    fields = ext_fields or {}
    next_begin = _required_int(fields, "nextBeginOffset")
    min_offset = _required_int(fields, "minOffset")
    max_offset = _required_int(fields, "maxOffset")
    suggest = _required_int(fields, "suggestWhichBrokerId")
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND and body:
        # MIN_OFFSET / MAX_OFFSET properties and the broker name on every message, as the Java client does.
        suffix = (f"\x02{MessageConst.PROPERTY_MIN_OFFSET}\x01{min_offset}"
                  f"\x02{MessageConst.PROPERTY_MAX_OFFSET}\x01{max_offset}")
        messages = _decode(body, decompress=decompress, check_crc=check_crc,
                                   broker_name=message_queue.broker_name, properties_suffix=suffix)
        if subscription is not None and not subscription.is_all:
            matches = subscription.matches
            messages = [message for message in messages if matches(message.tags)]
    return PullResult(status, next_begin, min_offset, max_offset, messages, suggest)
