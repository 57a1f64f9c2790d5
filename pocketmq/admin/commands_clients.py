"""``rmq-admin`` commands about clients and consumer offsets, with mqadmin's names and flags:
``consumerConnection``, ``producerConnection``, ``consumerStatus`` (each client's running info, asked through
a broker), ``resetOffsetByTime`` (``-s`` a timestamp in ms, ``now``, or ``yyyy-MM-dd#HH:mm:ss:SSS``; ``-f``
force, default true), ``skipAccumulatedMessage`` (reset to the end of every queue) and ``resendMessage`` (a stored
message, a dead letter included, produced again to one group's retry topic: only that group consumes it again)."""

from __future__ import annotations

import argparse
import datetime
import time
from typing import Any

from pocketmq.admin import api_ops, query_commands
from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.output import Command, bool_arg, emit, key_values, table


def parse_timestamp(text: str) -> int:
    """mqadmin's ``-s``: milliseconds, ``now``, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time)."""
    value = text.strip()
    if value == "now":
        return time.time_ns() // 1_000_000
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        stamp = datetime.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise argparse.ArgumentTypeError(f"timestamp {text!r}: want ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(stamp.timestamp() * 1000)



async def cmd_consumer_connection(admin: AdminClient, args: argparse.Namespace) -> None:
    data = await api_ops.consumer_connection(admin, args.group, await api_ops.targets(admin, args.broker, None))
    conns = sorted(data.get("connectionSet") or [], key=lambda c: str(c.get("clientId")))
    rows = [[i + 1, c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")]
            for i, c in enumerate(conns)]
    subs = [[t, s.get("subString")] for t, s in sorted((data.get("subscriptionTable") or {}).items())]
    text = (table(["#Id", "#ClientId", "#ClientAddr", "#Language", "#Version"], rows) + "\n\n"
            + table(["#Topic", "#SubExpression"], subs) + "\n\n"
            + key_values({"ConsumeType": data.get("consumeType"), "MessageModel": data.get("messageModel"),
                          "ConsumeFromWhere": data.get("consumeFromWhere")}))
    emit(args, data, text)


async def cmd_producer_connection(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await api_ops.topic_masters(admin, args.topic) if args.topic else await api_ops.targets(admin, None, None)
    conns = await api_ops.producer_connection(admin, args.group, addrs)
    rows = [[i + 1, c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")]
            for i, c in enumerate(conns)]
    emit(args, conns, table(["#Id", "#ClientId", "#ClientAddr", "#Language", "#Version"], rows))


async def cmd_consumer_status(admin: AdminClient, args: argparse.Namespace) -> None:
    """Every client's ConsumerRunningInfo (or the one named by ``-i``), asked through a broker it is on."""
    addrs = await api_ops.targets(admin, args.broker, None)
    data = await api_ops.consumer_connection(admin, args.group, addrs)
    client_ids = sorted(str(c.get("clientId")) for c in data.get("connectionSet") or [])
    if args.client_id:
        if args.client_id not in client_ids:
            raise AdminError(f"client {args.client_id} is not a consumer of {args.group} online")
        client_ids = [args.client_id]
    infos: dict[str, Any] = {}
    for client_id in client_ids:
        errors = []
        for addr in addrs:
            try:
                infos[client_id] = await api_ops.consumer_running_info(admin, addr, args.group, client_id,
                                                                       args.jstack)
                break
            except AdminError as exc:
                errors.append(str(exc))
        else:
            raise AdminError(f"no broker could ask {client_id}: " + "; ".join(errors))
    rows = [[cid, len(info["mqTable"]), len(info.get("subscriptionSet") or []),
             info.get("properties", {}).get("PROP_CONSUME_TYPE", ""),
             sum(int(q.get("cachedMsgCount", 0)) for q in info["mqTable"])] for cid, info in infos.items()]
    queue_rows = [[cid, q["topic"], q["brokerName"], q["queueId"], q.get("commitOffset"), q.get("cachedMsgCount")]
                  for cid, info in infos.items() for q in info["mqTable"]]
    text = (table(["#ClientId", "#Queues", "#Subscriptions", "#ConsumeType", "#CachedMsgs"], rows) + "\n\n"
            + table(["#ClientId", "#Topic", "#Broker", "#QID", "#CommitOffset", "#Cached"], queue_rows))
    emit(args, infos, text)


def _reset_text(entries: list[dict[str, Any]]) -> str:
    return table(["#brokerName", "#queueId", "#offset"],
                 [[e["brokerName"], e["queueId"], e["offset"]] for e in entries])


async def _reset(admin: AdminClient, args: argparse.Namespace, timestamp: int, force: bool) -> None:
    addrs = await api_ops.topic_masters(admin, args.topic)
    if args.cluster:
        allowed = set(await admin.master_addrs(args.cluster))
        addrs = [a for a in addrs if a in allowed]
    entries = await api_ops.reset_offset(admin, args.group, args.topic, timestamp, force=force, addrs=addrs)
    emit(args, {"group": args.group, "topic": args.topic, "timestamp": timestamp, "offsets": entries},
         _reset_text(entries))


async def cmd_reset_offset_by_time(admin: AdminClient, args: argparse.Namespace) -> None:
    await _reset(admin, args, args.timestamp, args.force)


async def cmd_skip_accumulated(admin: AdminClient, args: argparse.Namespace) -> None:
    await _reset(admin, args, -1, True)


async def cmd_resend_message(admin: AdminClient, args: argparse.Namespace) -> None:
    from pocketmq.client import Producer  # the SDK is only needed here

    message = await query_commands.find_by_id(admin, args.msg_id, args.topic)
    await api_ops.ensure_retry_topic(admin, args.group)
    async with Producer(args.producer_group, namesrv_addr=";".join(admin.namesrv_addrs),
                        credentials=admin.credentials) as producer:
        sent = await producer.send(api_ops.retry_copy(message, args.group))
    data = {"group": args.group, "origin": message.msg_id, "msgId": sent.msg_id, "topic": sent.message_queue.topic,
            "brokerName": sent.message_queue.broker_name, "queueId": sent.message_queue.queue_id}
    emit(args, data, key_values(data))


def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    s = sub.add_parser("consumerConnection", parents=[common], help="a consumer group's clients and subscriptions")
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-b", "--broker", help="ask this broker (default: every master until one knows the group)")
    s = sub.add_parser("producerConnection", parents=[common], help="a producer group's clients")
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-t", "--topic", help="ask the masters of this topic (default: every master)")
    s = sub.add_parser("consumerStatus", parents=[common], help="each consumer client's running info")
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-i", "--client-id", help="only this client")
    s.add_argument("-s", "--jstack", action="store_true", help="ask for thread stacks too")
    s.add_argument("-b", "--broker", help="ask through this broker")
    for name, text in (("resetOffsetByTime", "reset a group's offsets in a topic to a time"),
                       ("skipAccumulatedMessage", "move a group's offsets in a topic to the end")):
        s = sub.add_parser(name, parents=[common], help=text)
        s.add_argument("-g", "--group", required=True)
        s.add_argument("-t", "--topic", required=True)
        s.add_argument("-c", "--cluster", help="only the masters of this cluster")
        if name == "resetOffsetByTime":
            s.add_argument("-s", "--timestamp", type=parse_timestamp, required=True,
                           help="ms, 'now', or yyyy-MM-dd#HH:mm:ss:SSS")
            s.add_argument("-f", "--force", type=bool_arg, nargs="?", const=True, default=True,
                           help="also move offsets forward (default true)")
    s = sub.add_parser("resendMessage", parents=[common], help="produce a stored message again for one group")
    s.add_argument("-g", "--group", required=True, help="the consumer group that consumes it again")
    s.add_argument("-i", "--msg-id", required=True, help="offset id (or with -t a client unique id)")
    s.add_argument("-t", "--topic", help="the topic it is stored in (%%DLQ%%<group> for a dead letter)")
    s.add_argument("--producer-group", default="rmq-admin-resend")
    return {"consumerConnection": cmd_consumer_connection, "producerConnection": cmd_producer_connection,
            "consumerStatus": cmd_consumer_status, "resetOffsetByTime": cmd_reset_offset_by_time,
            "skipAccumulatedMessage": cmd_skip_accumulated, "resendMessage": cmd_resend_message}
