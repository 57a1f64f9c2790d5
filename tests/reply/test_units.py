"""Request-reply's pure pieces: the reply a consumer makes (``create_reply_message``), the push decoded on the
requester (``decode_pushed_reply``), the table of waiting requests, the reply's request code, and the broker's
index of clients by id."""

from __future__ import annotations

import asyncio
import zlib
from typing import cast

import pytest

from pocketmq.broker.client_manager import ClientManager, HeartbeatData
from pocketmq.client import Message, ProducerStateError, ReplyMessageError, RequestExpiredError, RequestTableFullError
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.reply import create_reply_message, decode_pushed_reply, is_reply
from pocketmq.client.core.uniq import default_generator
from pocketmq.client.producer.config import ProducerConfig
from pocketmq.client.producer.headers import SendHeaderTemplate
from pocketmq.client.producer.outgoing import MessagePreparer
from pocketmq.client.producer.request import RequestFutureTable
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import ReplyMessageRequestHeader

BORN = 1_700_000_000_000


def request_message(**props: str) -> MessageExt:
    base = {"CLUSTER": "Prod", "REPLY_TO_CLIENT": "10.0.0.1@app", "CORRELATION_ID": "c-1", "TTL": "3000",
            "UNIQ_KEY": "REQ", "TAGS": "t"}
    base.update(props)
    return MessageExt.of("Orders", b"question", born_timestamp=BORN,
                         properties={k: v for k, v in base.items() if v})


def test_the_reply_carries_the_request_s_identity_to_the_cluster_s_reply_topic() -> None:
    reply = create_reply_message(request_message(), b"answer", now_ms=BORN + 10)
    assert reply.topic == "Prod_REPLY_TOPIC" and reply.body == b"answer"
    assert {k: reply.properties[k] for k in ("MSG_TYPE", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL")} == {
        "MSG_TYPE": "reply", "CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": "10.0.0.1@app", "TTL": "3000"}
    assert "TAGS" not in reply.properties and "UNIQ_KEY" not in reply.properties
    assert is_reply(reply) and not is_reply(Message("Orders", b"x"))


@pytest.mark.parametrize("missing", ["CLUSTER", "REPLY_TO_CLIENT", "CORRELATION_ID"])
def test_a_message_that_is_not_a_request_gets_no_reply(missing: str) -> None:
    with pytest.raises(ReplyMessageError, match=rf"property\[{missing}\] is null") as caught:
        create_reply_message(request_message(**{missing: ""}), b"answer", now_ms=BORN)
    assert caught.value.response_code == 10007 and not caught.value.retriable


def test_a_request_whose_ttl_has_passed_gets_no_reply() -> None:
    assert create_reply_message(request_message(), b"ok", now_ms=BORN + 3000).body == b"ok"  # the last ms
    with pytest.raises(RequestExpiredError, match=r"c-1 of 10\.0\.0\.1@app expired 1 ms ago"):
        create_reply_message(request_message(), b"late", now_ms=BORN + 3001)
    # No TTL, or a request that is not a received message: nothing to check against.
    assert create_reply_message(request_message(TTL=""), b"ok", now_ms=BORN + 10**9).body == b"ok"
    plain = Message("Orders", b"q", properties={"CLUSTER": "C", "REPLY_TO_CLIENT": "x@y", "CORRELATION_ID": "c"})
    assert create_reply_message(plain, b"ok").topic == "C_REPLY_TOPIC"


def push_command(body: bytes, sys_flag: int = 0, **changes: str) -> RemotingCommand:
    header = ReplyMessageRequestHeader(
        producer_group="ReplyPG", topic="Prod_REPLY_TOPIC", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=sys_flag, born_timestamp=BORN, flag=3, born_host="10.0.0.2:51000",
        store_host="10.0.0.3:10911", store_timestamp=BORN + 5,
        properties="MSG_TYPE\x01reply\x02CORRELATION_ID\x01c-1\x02PUSH_REPLY_TIME\x011", reconsume_times=0)
    fields = {**header.to_fields(), **changes}
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body)


def test_a_pushed_reply_becomes_a_received_message() -> None:
    msg = decode_pushed_reply(push_command(b"answer"), arrive_ms=BORN + 7)
    assert (msg.topic, msg.body, msg.flag, msg.born_timestamp, msg.store_timestamp) == (
        "Prod_REPLY_TOPIC", b"answer", 3, BORN, BORN + 5)
    assert (msg.born_host, msg.store_host) == ("10.0.0.2:51000", "10.0.0.3:10911")
    assert msg.get_property("CORRELATION_ID") == "c-1" and msg.get_property("ARRIVE_TIME") == str(BORN + 7)
    inflated = decode_pushed_reply(push_command(zlib.compress(b"big answer" * 100), sys_flag=1))
    assert inflated.body == b"big answer" * 100
    named = decode_pushed_reply(push_command(b"x", bornHost="replier.example:1"))
    assert named.born_host == ""  # not an address a record can hold
    fields = push_command(b"x").ext_fields or {}
    del fields["storeHost"]
    with pytest.raises(InvalidHeaderError):
        decode_pushed_reply(RemotingCommand.request(326, fields, b"x"))


async def test_the_table_of_waiting_requests() -> None:
    table = RequestFutureTable(2)
    first, second = table.add("a"), table.add("b")
    with pytest.raises(RequestTableFullError):
        table.add("c")
    reply = MessageExt.of("T", b"r")
    assert table.take("a", reply) and first.result() is reply
    assert not table.take("a", reply) and not table.take("unknown", reply)
    table.discard("b")
    assert len(table) == 0 and not second.done()
    third = table.add("c")
    table.fail_all(ProducerStateError("stopping"))
    with pytest.raises(ProducerStateError):
        await asyncio.wait_for(third, 1)
    assert len(table) == 0


def test_replies_use_the_reply_codes_and_are_never_coalesced() -> None:
    assert SendHeaderTemplate("PG", "T", reply=True).code == RequestCode.SEND_REPLY_MESSAGE_V2
    assert SendHeaderTemplate("PG", "T", reply=True, smart=False).code == RequestCode.SEND_REPLY_MESSAGE
    preparer = MessagePreparer(ProducerConfig(group="PG", namesrv_addr="127.0.0.1:1"), default_generator())
    reply = preparer.prepare(create_reply_message(request_message(), b"answer", now_ms=BORN))
    assert reply.template.code == RequestCode.SEND_REPLY_MESSAGE_V2 and not reply.batchable
    plain = preparer.prepare(Message("Prod_REPLY_TOPIC", b"not a reply"))
    assert plain.template.code == RequestCode.SEND_MESSAGE_V2


class _Conn:
    def __init__(self) -> None:
        self.is_closed = False


def test_the_broker_finds_a_client_by_its_id() -> None:
    clients = ClientManager()
    producer_conn, consumer_conn = _Conn(), _Conn()
    clients.heartbeat(HeartbeatData("p@1", ("PG",), ()), cast(Connection, producer_conn))
    clients.heartbeat(HeartbeatData("c@1", (), ()), cast(Connection, consumer_conn))
    found = clients.find_channel("p@1")
    assert found is not None and found.connection is cast(Connection, producer_conn)
    assert clients.find_channel("c@1") is not None  # any heartbeat registers a client
    assert clients.find_channel("nobody") is None
    clients.unregister("p@1", "PG", None)
    assert clients.find_channel("p@1") is None  # no group left here
    consumer_conn.is_closed = True
    assert clients.find_channel("c@1") is None
    clients.connection_closed(cast(Connection, consumer_conn))
    assert clients.find_channel("c@1") is None
