"""Plain ACL on a real broker, over the wire. Requests are signed here the way the Java client's
``AclClientRPCHook`` signs them, with hmac/hashlib/base64 directly (independent of the SDK and of
``remoting.acl``): allowed and denied for each permission kind, white-listed addresses, admin-only codes, wrong
and replayed signatures, reload on file change; then the SDK's producer, consumer and admin client with
credentials."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer, PushConsumer, SessionCredentials
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from pocketmq.remoting.plain_acl import AclConfigError
from tests.client.consumer.consumer_support import FAST, Recorder, instance_name
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually

USER, USER_SECRET = "appUser01", "appSecret01"
ADMIN, ADMIN_SECRET = "adminUser01", "adminSecret01"
WHITE, WHITE_SECRET = "whiteUser01", "whiteSecret01"

ACL = f"""
globalWhiteRemoteAddresses:
accounts:
  - accessKey: {USER}
    secretKey: {USER_SECRET}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - pubOnly=PUB
      - subOnly=SUB
      - both=PUB|SUB
      - denied=DENY
    groupPerms:
      - deniedGroup=DENY
  - accessKey: {ADMIN}
    secretKey: {ADMIN_SECRET}
    admin: true
  - accessKey: {WHITE}
    secretKey: {WHITE_SECRET}
    whiteRemoteAddress: 127.0.0.*
    defaultTopicPerm: DENY
"""


def java_signature(ext: dict[str, str], body: bytes | None, secret: str) -> str:
    """AclClientRPCHook: the values of the ext fields in TreeMap (key) order, Signature left out, then the body;
    HmacSHA1 with the secret; Base64."""
    content = "".join(ext[key] for key in sorted(ext) if key != "Signature").encode("utf-8") + (body or b"")
    return base64.b64encode(hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()).decode()


def signed(code: int, fields: dict[str, str] | None, body: bytes | None, access_key: str | None,
           secret: str | None) -> RemotingCommand:
    ext = dict(fields or {})
    if access_key is not None:
        ext["AccessKey"] = access_key
        if secret is not None:
            ext["Signature"] = java_signature(ext, body, secret)
    return RemotingCommand.request(code, ext, body)


def send_request(topic: str, body: bytes = b"hello", group: str = "PG", **kw: str | None) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(group, topic, "TBW102", 4, 0, 0, int(time.time() * 1000), 0, "TAGS\x01t")
    return signed(RequestCode.SEND_MESSAGE_V2, header.to_fields(), body, kw.get("ak", USER),
                  kw.get("secret", USER_SECRET))


def pull_request(topic: str, group: str, ak: str = USER, secret: str = USER_SECRET) -> RemotingCommand:
    header = PullMessageRequestHeader(group, topic, 0, 0, 32, 0x4, -1, 0, 0, "*")
    return signed(RequestCode.PULL_MESSAGE, header.to_fields(), None, ak, secret)


def heartbeat_request(group: str, topic: str, ak: str = USER, secret: str = USER_SECRET) -> RemotingCommand:
    body = json.dumps({"clientID": "acl-test", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [
            {"classFilterMode": False, "topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
             "subVersion": 1, "expressionType": "TAG"}]}]}).encode()
    return signed(RequestCode.HEART_BEAT, None, body, ak, secret)


def create_topic_request(topic: str, ak: str, secret: str) -> RemotingCommand:
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    return signed(RequestCode.UPDATE_AND_CREATE_TOPIC, fields, None, ak, secret)


@dataclass
class AclCluster:
    namesrv: NamesrvController
    broker: BrokerController
    acl_file: Path
    client: RemotingClient

    async def ask(self, request: RemotingCommand) -> RemotingCommand:
        return await self.client.invoke(self.broker.addr, request, 5)


@pytest.fixture
async def acl(tmp_path: Path) -> AsyncIterator[AclCluster]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    ns = await start_namesrv(tmp_path)
    broker = await start_broker(tmp_path, "broker-acl", ns.addr,
                                {"aclEnable": "true", "plainAclFile": str(acl_file)})
    client = RemotingClient()
    try:
        yield AclCluster(ns, broker, acl_file, client)
    finally:
        await client.close()
        await broker.stop()
        await ns.stop()


def denied(resp: RemotingCommand, remark: str) -> bool:
    return resp.code == ResponseCode.NO_PERMISSION and resp.remark == remark


async def test_publish_permissions(acl: AclCluster) -> None:
    assert (await acl.ask(send_request("pubOnly"))).code == ResponseCode.SUCCESS
    assert (await acl.ask(send_request("both"))).code == ResponseCode.SUCCESS
    assert denied(await acl.ask(send_request("subOnly")), "No default permission for topic:subOnly")
    assert denied(await acl.ask(send_request("denied")), "No default permission for topic:denied")
    assert denied(await acl.ask(send_request("other")), "No default permission for topic:other")  # default DENY


async def test_subscribe_permissions(acl: AclCluster) -> None:
    assert (await acl.ask(send_request("both"))).code == ResponseCode.SUCCESS
    assert (await acl.ask(pull_request("both", "anyGroup"))).code == ResponseCode.SUCCESS
    assert denied(await acl.ask(pull_request("pubOnly", "anyGroup")), "No default permission for topic:pubOnly")
    assert denied(await acl.ask(pull_request("both", "deniedGroup")), "No default permission for group:deniedGroup")
    assert (await acl.ask(heartbeat_request("anyGroup", "subOnly"))).code == ResponseCode.SUCCESS
    assert denied(await acl.ask(heartbeat_request("anyGroup", "denied")), "No default permission for topic:denied")
    assert denied(await acl.ask(heartbeat_request("deniedGroup", "both")),
                  "No default permission for group:deniedGroup")


async def test_admin_only_codes(acl: AclCluster) -> None:
    resp = await acl.ask(create_topic_request("made", USER, USER_SECRET))
    assert denied(resp, f"Need admin permission for request code=17, but accessKey={USER} is not")
    assert (await acl.ask(create_topic_request("made", ADMIN, ADMIN_SECRET))).code == ResponseCode.SUCCESS
    # An admin account without resource lists may do anything.
    assert (await acl.ask(send_request("made", ak=ADMIN, secret=ADMIN_SECRET))).code == ResponseCode.SUCCESS


async def test_missing_unknown_and_wrong_credentials(acl: AclCluster) -> None:
    assert denied(await acl.ask(send_request("pubOnly", ak=None)), "No accessKey is configured")
    assert denied(await acl.ask(send_request("pubOnly", ak="nobody99", secret="whatever99")),
                  "No acl config for nobody99")
    wrong = f"Check signature failed for accessKey={USER}"
    assert denied(await acl.ask(send_request("pubOnly", secret="notTheSecret")), wrong)
    assert denied(await acl.ask(send_request("pubOnly", secret=None)), wrong)  # no Signature at all
    tampered = send_request("pubOnly")
    tampered.body = b"changed after signing"
    assert denied(await acl.ask(tampered), wrong)


async def test_replayed_signatures(acl: AclCluster) -> None:
    original = send_request("pubOnly", body=b"first")
    assert (await acl.ask(original)).code == ResponseCode.SUCCESS
    # A signature lifted onto another request (another topic) does not validate.
    other = send_request("both", body=b"first")
    assert other.ext_fields is not None and original.ext_fields is not None
    other.ext_fields["Signature"] = original.ext_fields["Signature"]
    assert denied(await acl.ask(other), f"Check signature failed for accessKey={USER}")
    # The same request sent again validates: RocketMQ 4.x signs no timestamp or nonce (README: no replay guard).
    again = RemotingCommand.request(original.code, dict(original.ext_fields), original.body)
    assert (await acl.ask(again)).code == ResponseCode.SUCCESS


async def test_white_listed_addresses(acl: AclCluster) -> None:
    # The account's whiteRemoteAddress (127.0.0.*) lets it in without a valid signature, permissions unchecked.
    assert (await acl.ask(send_request("denied", ak=WHITE, secret="wrong-secret"))).code == ResponseCode.SUCCESS
    # A global white list lets anybody in, even without an access key (after a reload).
    acl.acl_file.write_text(ACL.replace("globalWhiteRemoteAddresses:",
                                        "globalWhiteRemoteAddresses:\n  - 127.0.0.1"))
    assert acl.broker.acl is not None
    await eventually(lambda: acl.broker.acl is not None and acl.broker.acl.reloads >= 1, timeout=10,
                     message="ACL file reloaded")
    assert (await acl.ask(send_request("denied", ak=None))).code == ResponseCode.SUCCESS


async def test_reload_on_file_change_and_bad_files_keep_the_old_config(acl: AclCluster) -> None:
    assert denied(await acl.ask(send_request("subOnly")), "No default permission for topic:subOnly")
    acl.acl_file.write_text(ACL.replace("subOnly=SUB", "subOnly=PUB|SUB"))

    async def allowed() -> bool:
        return (await acl.ask(send_request("subOnly"))).code == ResponseCode.SUCCESS

    await eventually(allowed, timeout=10, message="new permission in force")
    service = acl.broker.acl
    assert service is not None
    reloads = service.reloads
    acl.acl_file.write_text("accounts: [{accessKey: x, secretKey: y}]  # invalid: keys too short")
    await eventually(lambda: service._stamp is not None and service._stamp[1] == acl.acl_file.stat().st_size,
                     timeout=10, message="bad file seen")
    assert service.reloads == reloads
    assert (await acl.ask(send_request("subOnly"))).code == ResponseCode.SUCCESS


async def test_denials_are_logged_once_per_client_and_reason(acl: AclCluster) -> None:
    service = acl.broker.acl
    assert service is not None
    for _ in range(5):
        await acl.ask(send_request("denied"))
        await acl.ask(send_request("subOnly", secret="bad-secret-1"))
    assert len(service.validator._logged) == 2


async def test_broker_refuses_to_start_without_its_acl_file(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    try:
        with pytest.raises(AclConfigError):
            await start_broker(tmp_path, "broker-noacl", ns.addr,
                               {"aclEnable": "true", "plainAclFile": str(tmp_path / "missing.yml")})
    finally:
        await ns.stop()


async def test_sdk_and_admin_with_credentials(acl: AclCluster) -> None:
    ns = acl.namesrv.addr
    admin_keys = SessionCredentials(ADMIN, ADMIN_SECRET)
    async with AdminClient([ns], credentials=SessionCredentials(USER, USER_SECRET)) as user_admin:
        with pytest.raises(AdminError, match="Need admin permission"):
            await user_admin.update_topic("both", read_queues=2, write_queues=2, broker_addr=acl.broker.addr)
    async with AdminClient([ns], credentials=admin_keys) as admin:
        await admin.update_topic("both", read_queues=2, write_queues=2, broker_addr=acl.broker.addr)
    user = SessionCredentials(USER, USER_SECRET)
    recorder = Recorder()
    consumer = PushConsumer("aclGroup", namesrv_addr=ns, instance_name=instance_name(), credentials=user, **FAST)
    consumer.subscribe("both", "*")
    consumer.register_handler(recorder)
    await consumer.start()
    try:
        async with Producer("aclPG", namesrv_addr=ns, instance_name=instance_name("p"), credentials=user) as p:
            for i in range(5):
                await p.send(Message("both", f"signed-{i}".encode()))
        await eventually(lambda: len(recorder.bodies) >= 5, timeout=20, message="signed messages consumed")
    finally:
        await consumer.shutdown()
    assert sorted(recorder.bodies) == [f"signed-{i}" for i in range(5)]
    async with Producer("aclPG2", namesrv_addr=ns, instance_name=instance_name("p"), send_msg_timeout=3.0,
                        retry_times_when_send_failed=0) as unsigned:
        with pytest.raises(Exception, match="No accessKey is configured"):
            await unsigned.send(Message("both", b"unsigned"))


async def test_rmq_admin_signs_with_its_key_flags_or_environment(acl: AclCluster,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from pocketmq.admin.cli import build_parser, run

    base = ["updateTopic", "-n", acl.namesrv.addr, "-t", "adminMade", "-b", acl.broker.addr]
    assert await run(build_parser().parse_args(base)) == 1
    assert "No accessKey is configured" in capsys.readouterr().err
    flags = ["--access-key", ADMIN, "--secret-key", ADMIN_SECRET]
    assert await run(build_parser().parse_args(base + flags)) == 0
    monkeypatch.setenv("POCKETMQ_ACCESS_KEY", USER)
    monkeypatch.setenv("POCKETMQ_SECRET_KEY", USER_SECRET)
    assert await run(build_parser().parse_args(base)) == 1
    assert "Need admin permission" in capsys.readouterr().err
