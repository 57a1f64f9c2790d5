"""The SDK's signature (remoting.acl) is the Java client's: compared with one computed here from the algorithm of
``AclClientRPCHook``/``AclUtils``/``AclSigner`` with hmac, hashlib and base64 only."""

from __future__ import annotations

import base64
import hashlib
import hmac

from pocketmq.remoting.acl import SERVER_EXCLUDED, SessionCredentials, signature_content
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand


def java_signature(ext: dict[str, str], body: bytes, secret: str) -> str:
    ordered = sorted(ext, key=lambda name: [ord(unit) for unit in name.encode("utf-16-be").decode("latin-1")])
    content = "".join(ext[k] for k in ordered if k != "Signature").encode("utf-8") + body
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def test_sdk_signature_is_the_java_clients() -> None:
    fields = {"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
              "h": "0", "i": "TAGS\x01TagA\x02KEYS\x01k1", "j": "0", "k": "false", "m": "false"}
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(fields), "héllo".encode())
    SessionCredentials("RocketMQ", "12345678", security_token="tok").sign(request)
    ext = request.ext_fields
    assert ext is not None and ext["AccessKey"] == "RocketMQ" and ext["SecurityToken"] == "tok"
    assert ext["Signature"] == java_signature(ext, "héllo".encode(), "12345678")
    assert fields == {k: v for k, v in ext.items() if k not in ("AccessKey", "SecurityToken", "Signature")}


def test_no_body_and_java_key_order() -> None:
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
    SessionCredentials("accessKey1", "secretKey1").sign(request)
    assert request.ext_fields is not None
    assert request.ext_fields["Signature"] == java_signature(request.ext_fields, b"", "secretKey1")
    # TreeMap order is UTF-16 code units: a character above U+FFFF (a surrogate pair) sorts below U+FFFF.
    odd = {"\U0001F600": "a", "\uffff": "b", "z": "c"}
    assert signature_content(odd, None) == b"cab"


def test_server_leaves_out_the_unique_key_query_flag() -> None:
    ext = {"AccessKey": "ak", "Signature": "x", "_UNIQUE_KEY_QUERY": "true", "topic": "T"}
    assert signature_content(ext, b"!", SERVER_EXCLUDED) == b"akT!"
    assert signature_content(ext, b"!") == b"aktrueT!"  # "_" sorts between upper and lower case
