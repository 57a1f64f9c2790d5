"""The producer's send request headers, templated for sending.

Send requests come in two spellings of one header (RocketMQ's ``SendMessageRequestHeader`` and its V2)::

    key (10)               key (310/320)  value
    producerGroup          a              producer group
    topic                  b              topic
    defaultTopic           c              "TBW102": the topic a broker auto-creates others from
    defaultTopicQueueNums  d              queues asked for on auto-creation (4)
    queueId                e              target queue on that broker
    sysFlag                f              MessageSysFlag bits (0x1 = zlib body)
    bornTimestamp          g              epoch ms, set per attempt
    flag                   h              the message's user flag
    properties             i              ``k\\x01v\\x02...`` (client.core.message)
    reconsumeTimes         j              0 (from RECONSUME_TIME for %RETRY% topics)
    unitMode               k              "false"
    maxReconsumeTimes      l              only for %RETRY% topics (from MAX_RECONSUME_TIMES)
    batch                  m              "true" for SEND_BATCH_MESSAGE

Replies (``MSG_TYPE=reply``) use the same header under SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325).

The response (every one of these codes) carries ``msgId``, ``queueId``, ``queueOffset``, ``MSG_REGION``, ``TRACE_ON``
and maybe ``transactionId``.

The typed headers (``SendMessageRequestHeader`` and its V2, in :mod:`pocketmq.remoting.headers`) are what tests and
tools read; the hot path uses :class:`SendHeaderTemplate`, which keeps the fields that never change for a
(group, topic) in one dict and copies it per request, so a send costs one dict copy and five stores instead
of a dataclass and a conversion per field.
"""

from __future__ import annotations

from pocketmq.client.core.config import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
from pocketmq.remoting.codes import RequestCode

__all__ = ["SendHeaderTemplate"]

_TRUE = "true"
_FALSE = "false"


# Wire keys of the per-request fields, per spelling: queueId, sysFlag, bornTimestamp, flag, properties.
_V1_KEYS = ("queueId", "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "maxReconsumeTimes")
_V2_KEYS = ("e", "f", "g", "h", "i", "j", "l")
#: str() of small ints, looked up instead of formatted (queue ids, flags).
_SMALL = tuple(str(i) for i in range(256))


def _int_str(value: int) -> str:
    return _SMALL[value] if 0 <= value < 256 else str(value)


class SendHeaderTemplate:
    """The ext fields of one (producer group, topic, request code), built once and copied per request."""

    __slots__ = ("_base", "_k_born", "_k_flag", "_k_max_reconsume", "_k_props", "_k_queue", "_k_reconsume",
                 "_k_sys", "code", "topic")

    def __init__(
        self,
        group: str,
        topic: str,
        *,
        batch: bool = False,
        reply: bool = False,
        smart: bool = True,
        default_topic: str = DEFAULT_TOPIC,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    ) -> None:
        self.topic = topic
        if batch:
            self.code = RequestCode.SEND_BATCH_MESSAGE
            smart = True  # 320 only exists with short names
        elif reply:  # a reply (MSG_TYPE=reply) is pushed to its requester, not stored for consumers
            self.code = RequestCode.SEND_REPLY_MESSAGE_V2 if smart else RequestCode.SEND_REPLY_MESSAGE
        else:
            self.code = RequestCode.SEND_MESSAGE_V2 if smart else RequestCode.SEND_MESSAGE
        if smart:
            self._base = {"a": group, "b": topic, "c": default_topic, "d": str(default_topic_queue_nums),
                          "j": "0", "k": _FALSE, "m": _TRUE if batch else _FALSE}
            keys = _V2_KEYS
        else:
            self._base = {"producerGroup": group, "topic": topic, "defaultTopic": default_topic,
                          "defaultTopicQueueNums": str(default_topic_queue_nums), "reconsumeTimes": "0",
                          "unitMode": _FALSE, "batch": _FALSE}
            keys = _V1_KEYS
        (self._k_queue, self._k_sys, self._k_born, self._k_flag, self._k_props, self._k_reconsume,
         self._k_max_reconsume) = keys

    def fields(self, queue_id: int, sys_flag: int, born_timestamp: int, flag: int, properties: str) -> dict[str, str]:
        """A fresh ext-fields dict for one request."""
        ext = self._base.copy()
        ext[self._k_queue] = _int_str(queue_id)
        ext[self._k_sys] = _int_str(sys_flag)
        ext[self._k_born] = str(born_timestamp)
        ext[self._k_flag] = _int_str(flag)
        ext[self._k_props] = properties
        return ext

    def set_reconsume(self, ext: dict[str, str], reconsume_times: str | None, max_reconsume_times: str | None) -> None:
        """Fill ``reconsumeTimes`` / ``maxReconsumeTimes`` (messages sent back to a %RETRY% topic)."""
        if reconsume_times is not None:
            ext[self._k_reconsume] = reconsume_times
        if max_reconsume_times is not None:
            ext[self._k_max_reconsume] = max_reconsume_times
