"""Broker configuration over the wire: GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25) and
GET_BROKER_CLUSTER_ACL_INFO (52).

GET_BROKER_CONFIG answers the effective configuration as ``.properties`` text (every broker and store key,
:func:`~pocketmq.broker.config.format_broker_config`) with the config's ``DataVersion`` as JSON in the ``version``
header field, as RocketMQ does. UPDATE_BROKER_CONFIG takes ``.properties`` text too, but only the keys in
:data:`RUNTIME_KEYS` change while the broker runs (each is read where it is used, so the change is seen at
once); any other key is refused with SYSTEM_ERROR naming the keys that can change, and nothing is applied.
Changes live until restart: the broker's properties file is the operator's and is not rewritten.

GET_BROKER_CLUSTER_ACL_INFO answers RocketMQ's ``ClusterAclVersionInfo`` from the broker's own identity; with
``aclEnable`` false (or absent) the ACL versions are empty, which is what the dashboard's ACL page reads as
"no ACL configured".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

from pocketmq.broker.config import BrokerConfig, format_broker_config
from pocketmq.broker.metadata import SubscriptionGroupManager
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.config import parse_properties
from pocketmq.common.logs import get_logger
from pocketmq.common.topic_config import DataVersion, PermName
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import GetBrokerAclConfigResponseHeader, GetBrokerConfigResponseHeader
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler

log = get_logger("pocketmq.broker.admin_config")

#: Keys UPDATE_BROKER_CONFIG changes at run time: key → BrokerConfig field.
RUNTIME_KEYS = {
    "brokerPermission": "broker_permission",
    "autoCreateTopicEnable": "auto_create_topic_enable",
    "autoCreateSubscriptionGroup": "auto_create_subscription_group",
    "storeReplyMessageEnable": "store_reply_message_enable",
}
_VALID_PERMS = (PermName.PERM_READ, PermName.PERM_WRITE, PermName.PERM_READ | PermName.PERM_WRITE)
_BOOLS = {"true": True, "false": False}


def parse_runtime_changes(text: str) -> dict[str, object] | str:
    """``key=value`` lines as BrokerConfig field changes, or why they are refused."""
    props = parse_properties(text)
    if not props:
        return "no key=value in the body"
    unknown = sorted(set(props) - set(RUNTIME_KEYS))
    if unknown:
        return (f"cannot change {', '.join(unknown)} at run time; keys that can change: "
                f"{', '.join(sorted(RUNTIME_KEYS))}")
    changes: dict[str, object] = {}
    for key, raw in props.items():
        value = raw.strip()
        if key == "brokerPermission":
            if not value.lstrip("-").isdigit() or int(value) not in _VALID_PERMS:
                return f"brokerPermission must be one of {', '.join(str(int(p)) for p in _VALID_PERMS)}, not {raw!r}"
            changes[RUNTIME_KEYS[key]] = int(value)
        else:
            if value.lower() not in _BOOLS:
                return f"{key} must be true or false, not {raw!r}"
            changes[RUNTIME_KEYS[key]] = _BOOLS[value.lower()]
    return changes


class AdminConfigProcessor:
    def __init__(self, *, get_config: Callable[[], BrokerConfig], set_config: Callable[[BrokerConfig], None],
                 topics: TopicConfigManager, groups: SubscriptionGroupManager, broker_addr: Callable[[], str],
                 register_now: Callable[[], Awaitable[object]] | None = None) -> None:
        self.get_config = get_config
        self.set_config = set_config
        self.topics = topics
        self.groups = groups
        self.broker_addr = broker_addr
        self.register_now = register_now
        self.version = DataVersion.now()
        self.acl_version = DataVersion.now()

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_acl_info,
        }

    def get_broker_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = GetBrokerConfigResponseHeader(json.dumps(self.version.to_json_dict(), separators=(",", ":")))
        return req.response(ResponseCode.SUCCESS, ext_fields=header.to_fields(),
                            body=format_broker_config(self.get_config()).encode())

    async def update_broker_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            text = bytes(req.body or b"").decode("utf-8")
        except UnicodeDecodeError:
            return req.response(ResponseCode.SYSTEM_ERROR, "the body is not UTF-8 properties text")
        changes = parse_runtime_changes(text)
        if isinstance(changes, str):
            return req.response(ResponseCode.SYSTEM_ERROR, changes)
        before = self.get_config()
        after = dataclasses.replace(before, **changes)  # type: ignore[arg-type]
        self.set_config(after)
        self.topics.auto_create_topic_enable = after.auto_create_topic_enable
        self.groups.auto_create = after.auto_create_subscription_group
        self.version.next_version()
        log.info("broker_config_updated", changes=changes, by=conn.remote_addr)
        if after.broker_permission != before.broker_permission and self.register_now is not None:
            await self.register_now()  # name servers learn the new permission now, not in 30 s
        return req.response(ResponseCode.SUCCESS)

    def get_acl_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        config = self.get_config()
        enabled = bool(getattr(config, "acl_enable", False))
        all_versions: dict[str, object] = {}
        if enabled:
            all_versions["plain_acl.yml"] = self.acl_version.to_json_dict()
        header = GetBrokerAclConfigResponseHeader(
            version=json.dumps(self.acl_version.to_json_dict(), separators=(",", ":")),
            broker_name=config.broker_name, broker_addr=self.broker_addr(), cluster_name=config.broker_cluster_name,
            all_acl_file_version=json.dumps(all_versions, separators=(",", ":")),
        )
        body = {"aclConfigDataVersion": self.acl_version.to_json_dict(), "allAclConfigDataVersion": all_versions,
                "brokerAddr": self.broker_addr(), "brokerName": config.broker_name,
                "clusterName": config.broker_cluster_name}
        return req.response(ResponseCode.SUCCESS, ext_fields=header.to_fields(),
                            body=rd.encode_body(body, req.serialize_type))
