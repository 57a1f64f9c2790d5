"""RocketMQ's ACL request signature (``AclClientRPCHook``, ``AclUtils``, ``AclSigner``), pure functions.

A client signs a request by adding ``AccessKey`` (and ``SecurityToken`` when it has one) to the ext fields,
then ``Signature`` = Base64(HmacSHA1(secretKey, content)), where content is the UTF-8 bytes of every ext-field
*value* (not the names), in the order of their names as Java's ``TreeMap`` sorts them (UTF-16 code units), the
``Signature`` field itself left out, followed by the body bytes. The broker recomputes it over what it received,
leaving out ``Signature`` and ``_UNIQUE_KEY_QUERY``.

Nothing in the content changes per request (no timestamp, no nonce): RocketMQ 4.x has no replay protection, and
a request repeated byte for byte validates again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pocketmq.remoting.command import Body, RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"

CLIENT_EXCLUDED = frozenset({SIGNATURE})
SERVER_EXCLUDED = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's keys (RocketMQ's ``SessionCredentials``); the secret never appears in ``repr``."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("credentials need an access key and a secret key")

    def sign(self, request: RemotingCommand) -> None:
        """Sign ``request`` in place (:func:`sign_request`)."""
        sign_request(request, self.access_key, self.secret_key, self.security_token)


def _java_order(name: str) -> bytes:
    """Java ``String.compareTo`` order: by UTF-16 code units (big-endian units compare as bytes)."""
    return name.encode("utf-16-be", "surrogatepass")


def _sorted_names(fields: Mapping[str, str]) -> list[str]:
    """Names in TreeMap order. For ASCII names (every real header) code-point order is the same."""
    names = sorted(fields)
    if not "".join(names).isascii():
        names.sort(key=_java_order)
    return names


def signature_content(ext_fields: Mapping[str, str] | None, body: Body | None,
                      excluded: Iterable[str] = CLIENT_EXCLUDED) -> bytes:
    """The bytes a signature covers (``AclUtils.combineRequestContent``)."""
    fields = ext_fields or {}
    values = "".join([fields[name] for name in _sorted_names(fields) if name not in excluded])
    head = values.encode("utf-8", "surrogatepass")
    return head + bytes(body) if body else head


def calculate_signature(content: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: Base64 of HmacSHA1 keyed with the secret's UTF-8 bytes."""
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8"), content, hashlib.sha1)).decode("ascii")


def sign_request(request: RemotingCommand, access_key: str, secret_key: str,
                 security_token: str | None = None) -> None:
    """What ``AclClientRPCHook.doBeforeRequest`` does to a request: its ext fields are replaced by a signed copy
    (the caller's dict, which may be shared, is left alone)."""
    ext = dict(request.ext_fields or {})
    request.ext_fields = ext
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    ext[SIGNATURE] = calculate_signature(signature_content(ext, request.body), secret_key)
