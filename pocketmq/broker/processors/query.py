"""``QueryMessageProcessor``: QUERY_MESSAGE (12), RocketMQ's ``QueryMessageProcessor.queryMessage``.

The store's index finds the records of a key (a ``KEYS`` key, or a client unique id with
``_UNIQUE_KEY_QUERY=true``, then ``defaultQueryMaxNum`` replaces the client's ``maxNum``) stored in
``[beginTimestamp, endTimestamp]``; the answer's body is the raw stored records, concatenated, newest first,
and its header the index's newest entry (``indexLastUpdateTimestamp``, ``indexLastUpdatePhyoffset``). Nothing
found is QUERY_NOT_FOUND (22) with RocketMQ's remark. Masters and slaves answer alike (a slave builds its
own index from the replicated log). VIEW_MESSAGE_BY_ID stays in the admin processor.
"""

from __future__ import annotations

from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import UNIQUE_KEY_QUERY, QueryMessageRequestHeader, QueryMessageResponseHeader
from pocketmq.store.message_store import MessageStore

NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


class QueryMessageProcessor:
    """QUERY_MESSAGE against one store (see the module docstring)."""

    def __init__(self, *, store: MessageStore) -> None:
        self.store = store

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.QUERY_MESSAGE: self.query_message}

    def query_message(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_command(req)
        unique = (req.ext_fields or {}).get(UNIQUE_KEY_QUERY) == "true"
        max_num = self.store.config.default_query_max_num if unique else h.max_num
        if max_num <= 0:
            return req.response(ResponseCode.SYSTEM_ERROR, f"maxNum must be positive, got {h.max_num}")
        if h.begin_timestamp > h.end_timestamp:
            return req.response(ResponseCode.SYSTEM_ERROR, f"beginTimestamp {h.begin_timestamp} is after "
                                                           f"endTimestamp {h.end_timestamp}")
        if not self.store.config.message_index_enable:
            return req.response(ResponseCode.QUERY_NOT_FOUND, "the broker builds no message index "
                                                              "(messageIndexEnable=false)")
        result = self.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        fields = QueryMessageResponseHeader(result.index_last_update_timestamp,
                                            result.index_last_update_phyoffset).to_fields()
        if not result.records:
            return req.response(ResponseCode.QUERY_NOT_FOUND, NOT_FOUND_REMARK, ext_fields=fields)
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=b"".join(result.records))
