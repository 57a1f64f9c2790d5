"""Both protocols on one cluster: PocketMQ's SDK over remoting and the official RocketMQ 5 clients (Python and
Node.js) over gRPC read each other's messages (ids, tags, keys, user properties, born time and host survive both
ways); the broker's in-process endpoint ("local mode") serves the same clients; TLS when configured; with
``aclEnable`` the proxy checks the 5.x clients' ``authorization`` against the brokers' plain_acl.yml."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from grpc import aio

from pocketmq.client import Message, Producer
from pocketmq.client.core.message_ext import decode_messages
from pocketmq.common.consumer import ConsumeFromWhere
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.server import ProxyServer
from tests.client.consumer.consumer_support import Recorder, cluster, instance_name, push_consumer
from tests.grpc.support import (
    BROKER_PROPS,
    SDKS,
    SHORT_POLLS,
    ProxyCluster,
    born_near,
    create_topic,
    local_proxy_cluster,
    proxy_cluster,
)
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def pc(tmp_path: Path) -> AsyncIterator[ProxyCluster]:
    async with proxy_cluster(tmp_path, ("broker-a", "broker-b"), **SHORT_POLLS) as running:
        yield running


@pytest.mark.parametrize("sdk", sorted(SDKS))
async def test_remoting_producer_to_official_consumer(pc: ProxyCluster, sdk: str) -> None:
    await pc.topic("TCrossIn")
    sent = {}
    async with Producer("CrossPG", namesrv_addr=pc.namesrv_addr, instance_name=instance_name("p")) as producer:
        for i in range(5):
            result = await producer.send(Message("TCrossIn", f"body-{i}".encode(), tags="TagR", keys=[f"k{i}", "x"],
                                                 properties={"origin": "remoting"}))
            sent[result.msg_id] = i
    got = await pc.client("simple", topic="TCrossIn", group="GCrossIn", want=5, timeout_s=40, await_s=1, sdk=sdk)
    assert {m["message_id"] for m in got["received"]} == set(sent)
    for m in got["received"]:
        i = sent[m["message_id"]]
        assert m["body"] == f"body-{i}" and m["tag"] == "TagR" and m["keys"] == sorted([f"k{i}", "x"])
        assert m["properties"] == {"origin": "remoting"}
        assert m["born_host"].startswith("127.0.0.1:") and m["born_ms"] > 0


@pytest.mark.parametrize("sdk", sorted(SDKS))
async def test_official_producer_to_remoting_consumer(pc: ProxyCluster, sdk: str) -> None:
    await pc.topic("TCrossOut")
    sent = await pc.client("produce", topic="TCrossOut", count=5, tag="TagG", keys="key",
                           properties={"origin": "grpc"}, sdk=sdk)
    by_id = {s["message_id"]: s for s in sent["sent"]}
    recorder = Recorder()
    consumer = push_consumer(pc.cluster, "GCrossOut", "TCrossOut", recorder,
                             consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    await consumer.start()
    try:
        await eventually(lambda: len(recorder.got) >= 5, timeout=30, message="5 messages over remoting")
    finally:
        await consumer.shutdown()
    got = {msg.uniq_key or "": msg for msg in recorder.got}
    assert set(got) == set(by_id)
    for uniq, msg in got.items():
        i = by_id[uniq]["i"]
        assert msg.body == f"body-{i}".encode() and msg.tags == "TagG" and msg.key_list == [f"key-{i}"]
        assert msg.properties["origin"] == "grpc"
        # Born time is the client's, the client's host rides in __BORNHOST as RocketMQ 5 has it.
        assert born_near(msg.born_timestamp, by_id[uniq]["sent_ms"])
        assert msg.properties["__BORNHOST"]


@pytest.mark.parametrize("sdk", sorted(SDKS))
async def test_local_mode_broker_serves_the_official_client(tmp_path: Path, sdk: str) -> None:
    async with local_proxy_cluster(tmp_path, {"recallMessageEnable": "true"}, **SHORT_POLLS) as local:
        local.sdk = sdk
        await local.topic("TLocal")
        await local.topic("TLocalTx", "TRANSACTION")
        await local.topic("TLocalDelay", "DELAY")
        delayed = await local.client("produce", topic="TLocalDelay", count=2, kind="delay", delay_s=30,
                                     recall_every=2)
        assert delayed["recalled"] == [delayed["sent"][0]["message_id"]]  # RECALL_MESSAGE taken in-process
        sent = await local.client("produce", topic="TLocal", count=4)
        tx = await local.client("produce", topic="TLocalTx", count=1, kind="tx", commit=False, wait_check_s=30)
        assert tx["checked"] == [tx["sent"][0]["message_id"]]
        got = await local.client("push", topic="TLocal", group="GLocal", want=4, timeout_s=40, quiet_s=1)
        assert sorted(m["message_id"] for m in got["received"]) == sorted(s["message_id"] for s in sent["sent"])


async def test_local_mode_sends_reach_the_store_in_process(tmp_path: Path) -> None:
    """A send to a local-mode endpoint is handed to the broker's send processor in its process: the stored record's
    born host is the broker's own address, not a loopback socket of a remoting connection; the client's host rides
    in ``__BORNHOST`` and its id stays the ``UNIQ_KEY``, as over remoting."""
    async with local_proxy_cluster(tmp_path) as pc:
        await pc.topic("TLocalBorn")
        broker = pc.cluster.brokers["broker-a"]
        system = pb.SystemProperties(message_id="LOCAL-1", message_type=pb.NORMAL, keys=["born-key"],
                                     born_host="10.1.2.3")
        request = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="TLocalBorn"), body=b"local",
                                                              system_properties=system)])
        async with aio.insecure_channel(pc.endpoints) as channel:
            stub: Any = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                                            request_serializer=lambda m: m.SerializeToString(),
                                            response_deserializer=spb.SendMessageResponse.FromString)
            answer = await stub(request, metadata=(("x-mq-client-id", "local@1"),), timeout=10)
        assert answer.status.code == pb.Code.OK and answer.entries[0].message_id == "LOCAL-1"
        store = broker.store
        assert store is not None

        def indexed() -> list[bytes]:
            return store.query_message("TLocalBorn", "born-key", 4, 0, 2**62).records

        await eventually(lambda: bool(indexed()), message="the message indexed by its key")
        [stored] = decode_messages(indexed()[0])
        assert stored.body == b"local" and stored.uniq_key == "LOCAL-1"
        assert stored.born_host == broker.addr and stored.properties["__BORNHOST"] == "10.1.2.3"


@pytest.mark.parametrize("sdk", sorted(SDKS))
async def test_tls_when_configured(tmp_path: Path, sdk: str) -> None:
    cert, key = tmp_path / "proxy.crt", tmp_path / "proxy.key"
    done = await asyncio.create_subprocess_exec(
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    assert await done.wait() == 0
    async with proxy_cluster(tmp_path, tls_cert_path=str(cert), tls_key_path=str(key)) as pc:
        await pc.topic("TTls")
        home = tmp_path / "tls-client"
        # The client trusts the proxy's certificate through gRPC's root store override (both gRPC stacks read it).
        sent = await SDKS[sdk]("produce", {"endpoints": pc.endpoints, "topic": "TTls", "count": 2, "tls": True},
                               home=home, env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)})
        assert not sent["errors"] and len(sent["sent"]) == 2
        plain = await pc.client("produce", topic="TTls", count=1, request_timeout=1, sdk=sdk)
        assert not plain["sent"]  # a plaintext client gets nowhere


ACL_FILE = """\
accounts:
  - accessKey: RocketMQ5
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [TAcl=PUB|SUB]
"""


@pytest.mark.parametrize("sdk", sorted(SDKS))
async def test_acl_checks_the_official_clients_signature_and_permissions(tmp_path: Path, sdk: str) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_FILE)
    async with cluster(tmp_path, ("broker-a",), dict(BROKER_PROPS)) as c:
        await create_topic(c.namesrv_addr, "TAcl")
        await create_topic(c.namesrv_addr, "TAclDenied")
        proxy = ProxyServer(ProxyConfig(namesrv_addr=c.namesrv_addr, grpc_server_host="127.0.0.1", grpc_server_port=0,
                                        acl_enable=True, plain_acl_file=str(acl)))
        await proxy.start()
        try:
            pc = ProxyCluster(c, proxy, tmp_path, sdk)
            ok = await pc.client("produce", topic="TAcl", count=2, ak="RocketMQ5", sk="12345678")
            assert not ok["errors"] and len(ok["sent"]) == 2
            wrong = await pc.client("produce", topic="TAcl", count=1, ak="RocketMQ5", sk="wrong-secret")
            assert not wrong["sent"] and "route" in wrong["errors"][0]["error"]  # QueryRoute itself was refused
            denied = await pc.client("produce", topic="TAclDenied", count=1, ak="RocketMQ5", sk="12345678")
            assert not denied["sent"] and denied["errors"]
            refused = proxy.metrics.render().decode()
            assert 'code="UNAUTHORIZED",method="QueryRoute"' in refused  # both were refused by the proxy's ACL
            got = await pc.client("simple", topic="TAcl", group="GAcl", want=2, timeout_s=30, await_s=3,
                                  ak="RocketMQ5", sk="12345678")
            assert len([m for m in got["received"] if m["acked"]]) == 2
        finally:
            await proxy.stop()
        await asyncio.sleep(0)
