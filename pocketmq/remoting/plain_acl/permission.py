"""Permissions and resources of RocketMQ 4.9's plain ACL (``Permission``, ``PlainAccessResource``).

A permission is a bit set: DENY 1, ANY 2, PUB 4, SUB 8, written in ``plain_acl.yml`` as ``DENY``, ``PUB``,
``SUB`` and ``PUB|SUB`` (or ``SUB|PUB``); anything else (or nothing) reads as DENY. Groups are resources too,
named by their retry topic ``%RETRY%<group>`` as RocketMQ does, and checked against ``groupPerms`` /
``defaultGroupPerm``.

:func:`required_resources` is ``PlainAccessValidator.parse``: which resources and permissions a request needs,
by request code (send: its topic PUB; pull: topic SUB and group SUB; heartbeat: every consumer group and
subscribed topic SUB; offsets, unregistering, consumer lists: the group SUB). Other codes need no resource,
only a valid signature; :data:`ADMIN_CODES` need an ``admin: true`` account.
"""

from __future__ import annotations

from typing import Any

from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic, retry_topic
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.GET_COMMIT_LOG_TAIL,  # ours: every topic's raw bytes (broker.tail_recovery)
})
"""Codes only an admin account may send (RocketMQ's ``Permission.ADMIN_CODE``, plus our GET_COMMIT_LOG_TAIL)."""

_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: an unknown or missing permission is DENY."""
    return _PERMS.get(str(text).strip(), DENY) if text is not None else DENY


def is_valid_perm(text: str) -> bool:
    return text.strip() in _PERMS


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY wins; ANY needs PUB or SUB; otherwise any needed bit owned."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


is_group = is_retry_topic
"""A group's resource is its retry topic."""


def describe(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``group:G`` or ``topic:T``."""
    if is_group(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


def required_resources(request: RemotingCommand) -> dict[str, int]:
    """Resource -> permission the request needs (empty: none beyond a valid signature).

    Raises ValueError for a body that cannot be read (a heartbeat), which the validator answers as a denial."""
    ext = request.ext_fields or {}
    code = request.code
    needs: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            needs[resource] = perm

    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        v1 = code == RequestCode.SEND_MESSAGE
        topic, group = (ext.get("topic"), ext.get("producerGroup")) if v1 else (ext.get("b"), ext.get("a"))
        if topic and is_group(topic):
            add(retry_topic(group) if group else None, SUB)
        else:
            add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(_group_resource(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(ext.get("topic"), SUB)
        add(_group_resource(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.RECALL_MESSAGE:  # RocketMQ 5's authorization asks the topic's PUB for a recall
        add(ext.get("topic"), PUB)
    elif code == RequestCode.HEART_BEAT:
        _heartbeat_resources(request, add)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add(_group_resource(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(_group_resource(ext.get("consumerGroup")), SUB)
        add(ext.get("topic"), SUB)
    return needs


def _group_resource(group: str | None) -> str | None:
    return retry_topic(group) if group else None


def _heartbeat_resources(request: RemotingCommand, add: Any) -> None:
    raw = rd.decode_body(bytes(request.body or b""), request.serialize_type) if request.body else {}
    consumers = raw.get("consumerDataSet") if isinstance(raw, dict) else None
    for consumer in _items(consumers):
        group = consumer.get("groupName")
        add(_group_resource(group) if isinstance(group, str) else None, SUB)
        for sub in _items(consumer.get("subscriptionDataSet")):
            topic = sub.get("topic")
            add(topic if isinstance(topic, str) else None, SUB)


def _items(value: object) -> list[dict[str, Any]]:
    """The objects of a JSON list (anything else in a heartbeat body names no resource)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
