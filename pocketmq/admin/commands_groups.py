"""``rmq-admin`` subscription-group commands, with mqadmin's names and flags: ``updateSubGroup``,
``deleteSubGroup``, ``subGroupList`` (every group of each master) and ``getSubGroup`` (one group)."""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.output import Command, bool_arg, emit, key_values, table, where_flags


async def cmd_update_sub_group(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await api_ops.targets(admin, args.broker, args.cluster)
    config: dict[str, Any] = {
        "groupName": args.group, "consumeEnable": args.consume_enable,
        "consumeFromMinEnable": args.consume_from_min_enable, "consumeBroadcastEnable": args.consume_broadcast_enable,
        "retryQueueNums": args.retry_queue_nums, "retryMaxTimes": args.retry_max_times, "brokerId": args.broker_id,
        "whichBrokerWhenConsumeSlowly": args.which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": args.notify_consumer_ids_changed,
        "consumeMessageOrderly": args.consume_message_orderly,
    }
    await api_ops.update_sub_group(admin, config, addrs)
    emit(args, {"group": config, "brokers": addrs},
         "\n".join(f"create subscription group to {a} success." for a in addrs) + "\n" + key_values(config))


async def cmd_delete_sub_group(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await api_ops.targets(admin, args.broker, args.cluster)
    await api_ops.delete_sub_group(admin, args.group, addrs, remove_offset=args.remove_offset)
    emit(args, {"group": args.group, "brokers": addrs, "removeOffset": args.remove_offset},
         "\n".join(f"delete subscription group [{args.group}] from broker [{a}] success." for a in addrs))


async def _all_groups(admin: AdminClient, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for addr in await api_ops.targets(admin, args.broker, args.cluster):
        for name, config in sorted((await api_ops.sub_groups(admin, addr)).items()):
            rows.append({"brokerAddr": addr, **config, "groupName": config.get("groupName", name)})
    return rows


def _group_rows(groups: list[dict[str, Any]]) -> str:
    return table(["#Broker", "#Group", "#ConsumeEnable", "#Broadcast", "#RetryQueues", "#RetryMaxTimes", "#BrokerId"],
                 [[g["brokerAddr"], g["groupName"], g.get("consumeEnable"), g.get("consumeBroadcastEnable"),
                   g.get("retryQueueNums"), g.get("retryMaxTimes"), g.get("brokerId")] for g in groups])


async def cmd_sub_group_list(admin: AdminClient, args: argparse.Namespace) -> None:
    groups = await _all_groups(admin, args)
    emit(args, groups, _group_rows(groups))


async def cmd_get_sub_group(admin: AdminClient, args: argparse.Namespace) -> None:
    groups = [g for g in await _all_groups(admin, args) if g["groupName"] == args.group]
    if not groups:
        raise AdminError(f"subscription group [{args.group}] not found on any master")
    emit(args, groups, _group_rows(groups))



def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    s = sub.add_parser("updateSubGroup", parents=[common], help="create or change a subscription group")
    where_flags(s)
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-s", "--consume-enable", type=bool_arg, default=True)
    s.add_argument("-m", "--consume-from-min-enable", type=bool_arg, default=True)
    s.add_argument("-d", "--consume-broadcast-enable", type=bool_arg, default=True)
    s.add_argument("-q", "--retry-queue-nums", type=int, default=1)
    s.add_argument("-r", "--retry-max-times", type=int, default=16)
    s.add_argument("-i", "--broker-id", type=int, default=0)
    s.add_argument("-w", "--which-broker-when-consume-slowly", type=int, default=1)
    s.add_argument("-a", "--notify-consumer-ids-changed", type=bool_arg, default=True)
    s.add_argument("-o", "--consume-message-orderly", type=bool_arg, default=False,
                   help="RocketMQ 5: the group consumes FIFO message groups in order")
    s = sub.add_parser("deleteSubGroup", parents=[common], help="delete a subscription group")
    where_flags(s)
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-r", "--remove-offset", type=bool_arg, nargs="?", const=True, default=False,
                   help="also forget the group's consumer offsets")
    s = sub.add_parser("subGroupList", parents=[common], help="every subscription group of each master")
    where_flags(s)
    s = sub.add_parser("getSubGroup", parents=[common], help="one subscription group on each master")
    where_flags(s)
    s.add_argument("-g", "--group", required=True)
    return {"updateSubGroup": cmd_update_sub_group, "deleteSubGroup": cmd_delete_sub_group,
            "subGroupList": cmd_sub_group_list, "getSubGroup": cmd_get_sub_group}
