"""Request-reply with plain ACL on: a reply (324/325) needs a valid signature and, as in RocketMQ 4.9's
``PlainAccessValidator``, no topic or group permission (the reply topic is the cluster's, not the application's);
the request is an ordinary send and needs PUB on its topic. Raw frames signed as Java's ``AclClientRPCHook``
signs them, then the SDK with credentials end to end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, MessageExt, Producer, PushConsumer, SessionCredentials, create_reply_message
from pocketmq.namesrv.controller import NamesrvController
from tests.acl.test_acl_broker import ACL, USER, USER_SECRET, java_signature
from tests.client.consumer.consumer_support import FAST, instance_name
from tests.cluster import start_broker, start_namesrv
from tests.reply.test_wire import REPLY_TOPIC, reply_props, v2_fields
from tests.transaction.raw import RawClient


@dataclass
class AclBroker:
    namesrv: NamesrvController
    broker: BrokerController


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[AclBroker]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    ns = await start_namesrv(tmp_path)
    broker = await start_broker(tmp_path, "broker-acl", ns.addr, {"aclEnable": "true", "plainAclFile": str(acl_file)})
    try:
        yield AclBroker(ns, broker)
    finally:
        await broker.stop()
        await ns.stop()


def sign(ext: dict[str, str], body: bytes, access_key: str = USER, secret: str = USER_SECRET) -> dict[str, str]:
    signed = {**ext, "AccessKey": access_key}
    signed["Signature"] = java_signature(signed, body, secret)
    return signed


async def test_a_reply_needs_a_signature_but_no_topic_permission(secured: AclBroker) -> None:
    addr = secured.broker.addr
    requester, replier = await RawClient.connect(addr), await RawClient.connect(addr)
    try:
        heartbeat = json.dumps({"clientID": "127.0.0.1@acl-requester", "consumerDataSet": [],
                                "producerDataSet": [{"groupName": "RequestPG"}]}).encode()
        assert (await requester.request(34, sign({}, heartbeat), heartbeat)).code == 0
        body = b"reply under ACL"
        fields = v2_fields("ReplyPG", REPLY_TOPIC, reply_props("acl-1", "127.0.0.1@acl-requester"))
        unsigned = await replier.request(325, fields, body)
        assert (unsigned.code, unsigned.remark) == (16, "No accessKey is configured")
        forged = await replier.request(325, sign(fields, body, secret="not-the-secret"), body)
        assert (forged.code, forged.remark) == (16, f"Check signature failed for accessKey={USER}")
        assert requester.server_requests.empty()

        # USER's default topic permission is DENY: a plain send to the reply topic is refused, a reply is not.
        plain = await replier.request(310, sign(fields, body), body)
        assert (plain.code, plain.remark) == (16, f"No default permission for topic:{REPLY_TOPIC}")
        pending = asyncio.ensure_future(replier.request(325, sign(fields, body), body))
        push = await asyncio.wait_for(requester.server_requests.get(), 5)
        assert push.code == 326 and push.body == body
        requester.respond(push, 0)
        assert (await pending).code == 0
    finally:
        await requester.close()
        await replier.close()


async def test_sdk_request_reply_with_credentials(secured: AclBroker) -> None:
    creds = SessionCredentials(USER, USER_SECRET)
    addr = secured.namesrv.addr
    replier = Producer("AclReplyPG", namesrv_addr=addr, credentials=creds, instance_name=instance_name("r"))

    async def handle(msg: MessageExt) -> None:
        await replier.send(create_reply_message(msg, b"re:" + msg.body))

    consumer = PushConsumer("AclRpcCG", namesrv_addr=addr, credentials=creds, instance_name=instance_name(),
                            **FAST)
    consumer.subscribe("both", "*")  # USER has PUB|SUB on "both"
    consumer.register_handler(handle)
    await replier.start()
    await consumer.start()
    try:
        async with Producer("AclRequestPG", namesrv_addr=addr, credentials=creds,
                            instance_name=instance_name("q")) as requester:
            reply = await requester.request(Message("both", b"ping"), timeout=15)
            assert (reply.body, reply.topic) == (b"re:ping", REPLY_TOPIC)
    finally:
        await consumer.shutdown()
        await replier.shutdown()
