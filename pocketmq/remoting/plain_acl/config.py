"""``plain_acl.yml``: RocketMQ 4.9's plain ACL file, read into frozen objects (``PlainPermissionManager.load``).

Shape (every key optional but ``accounts[].accessKey`` and ``secretKey``)::

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.{1,2}"]
    accounts:
      - accessKey: RocketMQ          # longer than 6 characters
        secretKey: 12345678          # longer than 6 characters (YAML numbers are read as text)
        whiteRemoteAddress: 192.168.1.*
        admin: false
        defaultTopicPerm: DENY       # DENY (also when missing), PUB, SUB, PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY, groupB=SUB]

Addresses (``RemoteAddressStrategyFactory``): blank matches nobody; ``*``, ``*.*.*.*`` and ``*:*:*:*:*:*:*:*``
match everybody; ``a.b.c.{1,2,3}`` and ``x,y`` are lists; IPv4 patterns have per-part ``*`` and ``lo-hi``
ranges (``192.168.*``, ``10.0.1.1-100``); anything else is one exact address.

A file that breaks these rules raises :class:`AclConfigError` (never with a secret in its message); the broker
then keeps the configuration it had (or refuses to start, for the first load).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml  # type: ignore[import-untyped]

from pocketmq.common.config import ConfigError
from pocketmq.common.topic import retry_topic
from pocketmq.remoting.plain_acl.permission import DENY, is_valid_perm, parse_perm

KEY_MIN_LENGTH = 6
"""Access and secret keys must be longer than this (RocketMQ's ACCESS_KEY_MIN_LENGTH/SECRET_KEY_MIN_LENGTH)."""


class AclConfigError(ConfigError):
    """A plain_acl.yml that cannot be used (or none to use)."""


class AddressMatcher:
    """One ``whiteRemoteAddress`` pattern; :meth:`matches` takes a bare IP (no port)."""

    __slots__ = ("_any", "_exact", "_parts")

    def __init__(self, pattern: str | None) -> None:
        self._any = False
        self._exact: frozenset[str] = frozenset()
        self._parts: list[tuple[int, int]] | None = None
        text = (pattern or "").strip()
        if not text:
            return  # blank: matches nobody
        if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
            self._any = True
        elif text.endswith("}"):
            prefix, brace, listed = text.partition("{")
            if not brace or not prefix:
                raise AclConfigError(f"bad address list {text!r}")
            self._exact = frozenset(_normal(prefix + item.strip()) for item in listed[:-1].split(","))
        elif "," in text:
            self._exact = frozenset(_normal(item.strip()) for item in text.split(",") if item.strip())
        elif ("*" in text or "-" in text) and ":" not in text:
            self._parts = _ipv4_ranges(text)
        else:
            self._exact = frozenset((_normal(text),))

    def matches(self, ip: str) -> bool:
        if self._any:
            return True
        if self._parts is not None:
            pieces = ip.split(".")
            if len(pieces) != 4 or not all(p.isdigit() for p in pieces):
                return False
            return all(lo <= int(p) <= hi for p, (lo, hi) in zip(pieces, self._parts, strict=True))
        return bool(self._exact) and _normal(ip) in self._exact


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return address.strip()


def _ipv4_ranges(text: str) -> list[tuple[int, int]]:
    parts = text.split(".")
    if len(parts) > 4:
        raise AclConfigError(f"bad address range {text!r}")
    ranges: list[tuple[int, int]] = []
    for part in parts + ["*"] * (4 - len(parts)):
        if part == "*":
            ranges.append((0, 255))
            continue
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise AclConfigError(f"bad address range {text!r}")
        lo, hi = int(low), int(high) if dash else int(low)
        if not 0 <= lo <= hi <= 255:
            raise AclConfigError(f"bad address range {text!r}")
        ranges.append((lo, hi))
    return ranges


@dataclass(frozen=True, slots=True)
class Account:
    """One ``accounts`` entry. ``perms`` maps topics and group retry topics to permission bits."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressMatcher
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlainAclConfig:
    global_white_remote_addresses: tuple[AddressMatcher, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


def load_plain_acl(text: str) -> PlainAclConfig:
    """Parse a plain_acl.yml text; raises AclConfigError."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"plain_acl.yml is not valid YAML: {exc}") from None
    if raw is None:
        return PlainAclConfig()
    if not isinstance(raw, dict):
        raise AclConfigError("plain_acl.yml must be a mapping")
    whites = tuple(AddressMatcher(_text(item)) for item in _list(raw.get("globalWhiteRemoteAddresses")))
    accounts: dict[str, Account] = {}
    for entry in _list(raw.get("accounts")):
        if not isinstance(entry, dict):
            raise AclConfigError("each account must be a mapping")
        account = _account(entry)
        if account.access_key in accounts:
            raise AclConfigError(f"accessKey {account.access_key} appears twice")
        accounts[account.access_key] = account
    return PlainAclConfig(whites, accounts)


def _account(entry: Mapping[str, Any]) -> Account:
    access_key, secret_key = _text(entry.get("accessKey")), _text(entry.get("secretKey"))
    if len(access_key) <= KEY_MIN_LENGTH:
        raise AclConfigError(f"accessKey {access_key!r} must be longer than {KEY_MIN_LENGTH} characters")
    if len(secret_key) <= KEY_MIN_LENGTH:
        raise AclConfigError(f"the secretKey of accessKey {access_key} must be longer than {KEY_MIN_LENGTH} characters")
    perms: dict[str, int] = {}
    for key, as_group in (("topicPerms", False), ("groupPerms", True)):
        for item in _list(entry.get(key)):
            name, sep, perm = _text(item).partition("=")
            if not sep or not name.strip() or "=" in perm or not is_valid_perm(perm):
                raise AclConfigError(f"{key} of {access_key}: expected 'name=DENY|PUB|SUB|PUB|SUB', got {item!r}")
            perms[retry_topic(name.strip()) if as_group else name.strip()] = parse_perm(perm)
    return Account(
        access_key=access_key, secret_key=secret_key,
        white_remote_address=AddressMatcher(_text(entry.get("whiteRemoteAddress"))),
        admin=entry.get("admin") is True or _text(entry.get("admin")).lower() == "true",
        default_topic_perm=parse_perm(entry.get("defaultTopicPerm")),
        default_group_perm=parse_perm(entry.get("defaultGroupPerm")),
        perms=perms,
    )


def _text(value: object) -> str:
    """A scalar as text (YAML reads ``12345678`` as a number); None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _list(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"expected a list, got {type(value).__name__}")
    return value
