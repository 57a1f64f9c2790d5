"""``PlainAccessValidator``: is this request allowed? (RocketMQ 4.9's ``PlainPermissionManager.validate``.)

In order, as RocketMQ checks: a client whose IP matches ``globalWhiteRemoteAddresses`` is allowed; otherwise the
request must carry an ``AccessKey`` of a configured account; a client matching that account's
``whiteRemoteAddress`` is allowed without a signature; otherwise the ``Signature`` must be the HmacSHA1 of the
request (:mod:`remoting.acl`, compared in constant time); a PUB to the trace topic is allowed; an admin-only code
needs ``admin: true``; and every resource the request names (:func:`~.permission.required_resources`)
must be allowed by the account's ``topicPerms``/``groupPerms`` or its default permission.

A denial is NO_PERMISSION (16) with RocketMQ's message as the remark (RocketMQ 4.9 answers SYSTEM_ERROR with
the exception text; the code here is the one its clients treat as a permission problem). Each (client IP,
access key, reason) is logged once (a bounded set), never with a secret.
"""

from __future__ import annotations

import hmac

from pocketmq.common.logs import get_logger
from pocketmq.remoting.acl import ACCESS_KEY, SERVER_EXCLUDED, SIGNATURE, calculate_signature, signature_content
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.plain_acl.config import Account, PlainAclConfig
from pocketmq.remoting.plain_acl.permission import (
    ADMIN_CODES,
    PUB,
    check_permission,
    describe,
    is_group,
    required_resources,
)

log = get_logger("pocketmq.remoting.plain_acl")

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Distinct (client, key, reason) denials remembered for logging once; the set is cleared when it is full.
MAX_LOGGED_DENIALS = 4096


class AclDenied(Exception):
    """A request the ACL refuses; ``reason`` is RocketMQ's message (no secrets in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def client_ip(remote_addr: str) -> str:
    """``ip`` of ``ip:port`` (RocketMQ strips the port the same way: after the last colon)."""
    host, sep, _port = remote_addr.rpartition(":")
    return host.strip("[]") if sep else remote_addr


class PlainAccessValidator:
    """Checks requests against the current :class:`~.config.PlainAclConfig` (swapped on reload)."""

    def __init__(self, config: PlainAclConfig) -> None:
        self.config = config
        self._logged: set[tuple[str, str, str]] = set()

    def validate(self, request: RemotingCommand, remote_addr: str) -> None:
        """Return if allowed; raise AclDenied otherwise."""
        config = self.config
        ip = client_ip(remote_addr)
        if any(white.matches(ip) for white in config.global_white_remote_addresses):
            return
        ext = request.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclDenied("No accessKey is configured")
        account = config.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}")
        if account.white_remote_address.matches(ip):
            return
        expected = calculate_signature(signature_content(ext, request.body, SERVER_EXCLUDED), account.secret_key)
        if not hmac.compare_digest(expected.encode(), (ext.get(SIGNATURE) or "").encode()):
            raise AclDenied(f"Check signature failed for accessKey={access_key}")
        try:
            needs = required_resources(request)
        except ValueError as exc:
            raise AclDenied(f"cannot read the request to check its permissions: {exc}") from None
        if needs.get(TRACE_TOPIC) == PUB:
            return
        check_perms(request.code, needs, account)

    def check(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """The remoting server's pre-dispatch hook: None to go on, or the NO_PERMISSION answer."""
        try:
            self.validate(request, conn.remote_addr)
        except AclDenied as denied:
            self._log_once(conn.remote_addr, request, denied.reason)
            return request.response(ResponseCode.NO_PERMISSION, denied.reason)
        return None

    def _log_once(self, remote_addr: str, request: RemotingCommand, reason: str) -> None:
        key = (client_ip(remote_addr), str((request.ext_fields or {}).get(ACCESS_KEY)), reason)
        if key in self._logged:
            return
        if len(self._logged) >= MAX_LOGGED_DENIALS:
            self._logged.clear()
        self._logged.add(key)
        log.warning("acl_denied", client=remote_addr, access_key=key[1], code=request.code, reason=reason)


def check_perms(code: int, needs: dict[str, int], account: Account) -> None:
    """``PlainPermissionManager.checkPerm``: AclDenied unless ``account`` may use every resource of ``needs`` (and
    ``code``, when it is an admin-only code). The proxy checks gRPC calls with it too."""
    if code in ADMIN_CODES and not account.admin:
        raise AclDenied(f"Need admin permission for request code={code}, but accessKey={account.access_key} is not")
    if not needs or (not account.perms and account.admin):
        return
    for resource, needed in needs.items():
        owned = account.perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group(resource) else account.default_topic_perm
        if not check_permission(needed, owned):
            raise AclDenied(f"No default permission for {describe(resource)}")
