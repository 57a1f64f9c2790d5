"""Who is calling, and may they: the metadata every 5.x client sends (``x-mq-client-id``, ``x-mq-language``,
``x-mq-client-version``, ``x-mq-date-time``, ``authorization``), and with ``aclEnable=true`` the check of
``authorization`` against the same ``plain_acl.yml`` accounts and permissions as the brokers' remoting ACL.

``authorization`` is ``MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>``, the
signature the HmacSHA1 of the ``x-mq-date-time`` value under the account's secret key (RocketMQ 5's
``DefaultAuthenticationContextBuilder``). Each call needs what RocketMQ's ``DefaultAuthorizationContextBuilder``
asks for: SendMessage, EndTransaction and RecallMessage the topic's PUB; ReceiveMessage, AckMessage, QueryAssignment and
ForwardMessageToDeadLetterQueue the group's and the topic's SUB; Heartbeat, ChangeInvisibleDuration and
NotifyClientTermination the group's SUB; QueryRoute PUB or SUB of the topic; Telemetry what its settings name.
A refusal is UNAUTHORIZED with the remoting ACL's wording.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from grpc import aio

from pocketmq.common.topic import retry_topic
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.errors import Code, ProxyError
from pocketmq.remoting.plain_acl.permission import ANY, PUB, SUB
from pocketmq.remoting.plain_acl.service import PlainAclService
from pocketmq.remoting.plain_acl.validator import AclDenied, check_perms, client_ip

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_SCHEME = "MQv2-HMAC-SHA1"


class CallIdentity:
    """The caller of one call, from its metadata and peer address, each read from the call only when first asked
    for (a send of a client without ACL needs neither)."""

    __slots__ = ("_context", "_metadata", "_remote")

    def __init__(self, context: aio.ServicerContext[Any, Any]) -> None:
        self._context = context
        self._metadata: dict[str, str] | None = None
        self._remote: str | None = None

    @classmethod
    def of(cls, context: aio.ServicerContext[Any, Any]) -> CallIdentity:
        return cls(context)

    @property
    def metadata(self) -> Mapping[str, str]:
        if self._metadata is None:
            self._metadata = {str(k): v if isinstance(v, str) else v.decode(errors="replace")
                              for k, v in (self._context.invocation_metadata() or ())}
        return self._metadata

    @property
    def client_id(self) -> str:
        return self.metadata.get("x-mq-client-id", "")

    @property
    def language(self) -> str:
        return self.metadata.get("x-mq-language", "OTHER")

    @property
    def version(self) -> str:
        return self.metadata.get("x-mq-client-version", "")

    @property
    def remote(self) -> str:
        if self._remote is None:
            self._remote = peer_address(self._context.peer())
        return self._remote


def peer_address(peer: str) -> str:
    """``host:port`` of gRPC's ``ipv4:h:p`` / ``ipv6:[h]:p`` peer names."""
    scheme, sep, rest = peer.partition(":")
    return rest if sep and scheme in ("ipv4", "ipv6") else peer


def parse_authorization(value: str) -> tuple[str, str]:
    """``(accessKey, signature)`` of an ``authorization`` value; ProxyError UNAUTHORIZED when malformed."""
    scheme, _, rest = value.partition(" ")
    if scheme != _SCHEME or not rest:
        raise ProxyError(Code.UNAUTHORIZED, "authentication header is incorrect.")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, text = item.strip().partition("=")
        if not sep:
            raise ProxyError(Code.UNAUTHORIZED, "authentication keyValues length is incorrect.")
        fields[key] = text
    access_key = fields.get("Credential", "").split("/")[0]
    if not access_key or "Signature" not in fields:
        raise ProxyError(Code.UNAUTHORIZED, "No accessKey is configured")
    return access_key, fields["Signature"]


def signature(secret_key: str, date_time: str) -> str:
    """The hex HmacSHA1 a 5.x client puts in ``Signature``."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def resources_of(method: str, request: Any) -> dict[str, int]:
    """What a call needs (the module docstring); resources are topics and groups' retry topics."""
    if isinstance(request, spb.SendMessageRequest):
        return {request.messages[0].topic.name: PUB} if request.messages else {}
    if isinstance(request, spb.EndTransactionRequest | spb.RecallMessageRequest):
        return {request.topic.name: PUB}
    if isinstance(request, spb.ReceiveMessageRequest):
        return {retry_topic(request.group.name): SUB, request.message_queue.topic.name: SUB}
    if isinstance(request, spb.AckMessageRequest | spb.QueryAssignmentRequest
                  | spb.ForwardMessageToDeadLetterQueueRequest):
        return {retry_topic(request.group.name): SUB, request.topic.name: SUB}
    if isinstance(request, spb.HeartbeatRequest | spb.ChangeInvisibleDurationRequest
                  | spb.NotifyClientTerminationRequest):
        return {retry_topic(request.group.name): SUB} if request.group.name else {}
    if isinstance(request, spb.QueryRouteRequest):
        return {request.topic.name: ANY}
    if isinstance(request, spb.TelemetryCommand) and request.HasField("settings"):
        settings = request.settings
        if settings.HasField("publishing"):
            return {t.name: PUB for t in settings.publishing.topics}
        if settings.HasField("subscription"):
            needs = {e.topic.name: SUB for e in settings.subscription.subscriptions}
            needs[retry_topic(settings.subscription.group.name)] = SUB
            return needs
    return {}


class Authenticator:
    """The ACL of gRPC calls over a :class:`PlainAclService` (its file, reloaded when it changes)."""

    def __init__(self, acl: PlainAclService) -> None:
        self.acl = acl

    def check(self, method: str, request: Any, identity: CallIdentity) -> None:
        """Return when allowed; ProxyError UNAUTHORIZED otherwise."""
        config = self.acl.validator.config
        ip = client_ip(identity.remote)
        if any(white.matches(ip) for white in config.global_white_remote_addresses):
            return
        value = identity.metadata.get(AUTHORIZATION)
        if not value:
            raise ProxyError(Code.UNAUTHORIZED, "No accessKey is configured")
        access_key, given = parse_authorization(value)
        account = config.accounts.get(access_key)
        if account is None:
            raise ProxyError(Code.UNAUTHORIZED, f"No acl config for {access_key}")
        if account.white_remote_address.matches(ip):
            return
        date_time = identity.metadata.get(DATE_TIME, "")
        if not date_time:
            raise ProxyError(Code.UNAUTHORIZED, "datetime is null.")
        if not hmac.compare_digest(signature(account.secret_key, date_time), given.lower()):
            raise ProxyError(Code.UNAUTHORIZED, f"Check signature failed for accessKey={access_key}")
        if request is None:
            return
        try:
            check_perms(-1, resources_of(method, request), account)
        except AclDenied as denied:
            raise ProxyError(Code.UNAUTHORIZED, denied.reason) from None
