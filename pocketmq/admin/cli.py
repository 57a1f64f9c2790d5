"""``rmq-admin``: inspect and operate a PocketMQ (or RocketMQ 4.x) cluster over the remoting protocol.

Commands keep ``mqadmin``'s names: ``clusterList``, ``topicList``, ``topicRoute``, ``topicStatus``,
``updateTopic``, ``deleteTopic``, ``brokerStatus``, ``consumerProgress``, ``sendMessage``, ``txPending`` (half
messages with no outcome yet, per real topic and producer group, from each master's runtime info), the queries of
:mod:`admin.query_commands` (``queryMsgByKey``, ``queryMsgByUniqueKey``, ``queryMsgById``, ``queryMsgTraceById``),
plus ``export`` (a broker's commit log, :mod:`pocketmq.admin.export`); the operations commands live in
``admin/commands_*.py`` (subscription groups, clients and offsets, broker stats/config/permission) and
register themselves here. ``-n`` is taken before or after the command name. Output is a human table, or JSON with
``--json``. Name servers come from ``-n "a:9876;b:9876"`` or ``NAMESRV_ADDR`` (default ``127.0.0.1:9876``).
Brokers with ``aclEnable=true`` need ``--access-key``/``--secret-key`` (or ``POCKETMQ_ACCESS_KEY`` /
``POCKETMQ_SECRET_KEY``): every request is then signed as RocketMQ's ``AclClientRPCHook`` signs it.
Exit status: 0 success, 1 a request failed (the reason on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from typing import Any

from pocketmq.admin import (
    commands_broker,
    commands_clients,
    commands_controller,
    commands_disk,
    commands_groups,
    commands_pop,
    commands_topics,
    query_commands,
)
from pocketmq.admin.api import AdminClient, AdminError, split_namesrv
from pocketmq.admin.output import Command, emit, table
from pocketmq.common.logs import configure_logging
from pocketmq.remoting import route as rd
from pocketmq.remoting.acl import SessionCredentials

DEFAULT_NAMESRV = "127.0.0.1:9876"


_out = emit


# -- commands ------------------------------------------------------------------------------------------------


async def cmd_cluster_list(admin: AdminClient, args: argparse.Namespace) -> None:
    rows, data = [], []
    for b in await admin.brokers(args.cluster):
        try:
            info = await admin.runtime_info(b.addr)
        except AdminError as exc:
            info = {"error": str(exc)}
        entry: dict[str, Any] = {
            "cluster": b.cluster, "brokerName": b.broker_name, "brokerId": b.broker_id, "addr": b.addr,
            "role": info.get("brokerRole", "?"), "putTps": info.get("putTps", ""),
            "getTps": info.get("getTransferedTps", ""), "maxOffset": info.get("commitLogMaxOffset", "")}
        data.append(entry)
        rows.append([b.cluster, b.broker_name, b.broker_id, b.addr, entry["role"], str(entry["putTps"]).split(" ")[0],
                     str(entry["getTps"]).split(" ")[0], entry["maxOffset"]])
    _out(args, data, table(["#Cluster", "#Broker", "#BID", "#Addr", "#Role", "#PutTPS", "#GetTPS", "#MaxOffset"], rows))


async def cmd_topic_list(admin: AdminClient, args: argparse.Namespace) -> None:
    topics = await admin.topic_list()
    _out(args, topics, "\n".join(topics))


async def cmd_topic_route(admin: AdminClient, args: argparse.Namespace) -> None:
    route = await admin.topic_route(args.topic)
    data = route.to_json_dict()
    qrows = [[q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm] for q in route.queue_datas]
    brows = [[bd.broker_name, bid, addr] for bd in route.broker_datas for bid, addr in sorted(bd.broker_addrs.items())]
    text = table(["#Broker", "#ReadQ", "#WriteQ", "#Perm"], qrows) + "\n\n" + table(["#Broker", "#BID", "#Addr"], brows)
    _out(args, json.loads(json.dumps(data, default=str)), text)


async def cmd_topic_status(admin: AdminClient, args: argparse.Namespace) -> None:
    queues = await admin.topic_status(args.topic)
    data = [{"brokerName": q.broker_name, "queueId": q.queue_id, "minOffset": q.min_offset, "maxOffset": q.max_offset}
            for q in queues]
    rows = [[q.broker_name, q.queue_id, q.min_offset, q.max_offset] for q in queues]
    _out(args, data, table(["#Broker", "#QID", "#MinOffset", "#MaxOffset"], rows))


async def cmd_update_topic(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await admin.update_topic(args.topic, read_queues=args.read_queues, write_queues=args.write_queues,
                                     perm=args.perm, cluster=args.cluster, broker_addr=args.broker, order=args.order,
                                     attributes=args.attributes)
    _out(args, {"topic": args.topic, "brokers": addrs},
         "\n".join(f"create topic {args.topic} on {a} success." for a in addrs))


async def cmd_delete_topic(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await admin.delete_topic(args.topic, cluster=args.cluster)
    _out(args, {"topic": args.topic, "brokers": addrs, "namesrv": admin.namesrv_addrs},
         f"delete topic {args.topic} from {len(addrs)} broker(s) and {len(admin.namesrv_addrs)} name server(s).")


async def cmd_broker_status(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = [args.broker] if args.broker else [b.addr for b in await admin.brokers(args.cluster)]
    data: dict[str, dict[str, str]] = {}
    for addr in addrs:
        data[addr] = await admin.runtime_info(addr)
    parts = []
    for addr, info in data.items():
        width = max((len(k) for k in info), default=0)
        parts.append(f"== {addr}\n" + "\n".join(f"{k:<{width}} : {v}" for k, v in sorted(info.items())))
    _out(args, data if not args.broker else data[args.broker], "\n\n".join(parts))


async def cmd_consumer_progress(admin: AdminClient, args: argparse.Namespace) -> None:
    data = await admin.consumer_progress(args.group, args.topic)
    rows = [[e.get("topic"), e.get("brokerName"), e.get("queueId"), e.get("brokerOffset"), e.get("consumerOffset"),
             e.get("lag")] for e in data["offsetTable"]]
    text = table(["#Topic", "#Broker", "#QID", "#BrokerOffset", "#ConsumerOffset", "#Diff"], rows)
    _out(args, data, text + f"\n\nConsume Diff Total: {data['totalLag']}")


async def cmd_send_message(admin: AdminClient, args: argparse.Namespace) -> None:
    from pocketmq.client import Message, Producer  # the SDK is only needed here

    async with Producer(args.group, namesrv_addr=";".join(admin.namesrv_addrs),
                        credentials=admin.credentials) as producer:
        results = []
        for _ in range(args.count):
            r = await producer.send(Message(args.topic, args.body.encode(), tags=args.tags, keys=args.keys))
            mq = r.message_queue
            results.append({"status": str(getattr(r.status, "name", r.status)), "msgId": r.offset_msg_id,
                            "uniqKey": r.msg_id, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                            "queueOffset": r.queue_offset})
    rows = [[r["brokerName"], r["queueId"], r["queueOffset"], r["status"], r["msgId"]] for r in results]
    _out(args, results if args.count > 1 else results[0],
         table(["#Broker", "#QID", "#QueueOffset", "#Status", "#MsgId"], rows))


async def cmd_tx_pending(admin: AdminClient, args: argparse.Namespace) -> None:
    rows: list[list[str]] = []
    data: list[dict[str, Any]] = []
    total = 0
    for addr in await admin.master_addrs(args.cluster, args.broker):
        info = await admin.runtime_info(addr)
        for item in filter(None, info.get("transactionHalfPendingByTopicGroup", "").split(";")):
            where, _, count = item.rpartition("=")
            topic, _, group = where.partition("@")
            data.append({"broker": addr, "topic": topic, "producerGroup": group, "pending": int(count)})
            rows.append([addr, topic, group, count])
            total += int(count)
    _out(args, data, table(["#Broker", "#Topic", "#ProducerGroup", "#PendingHalf"], rows) + f"\n\nPending: {total}")


COMMANDS: dict[str, Command] = {
    "clusterList": cmd_cluster_list, "topicList": cmd_topic_list, "topicRoute": cmd_topic_route,
    "topicStatus": cmd_topic_status, "updateTopic": cmd_update_topic, "deleteTopic": cmd_delete_topic,
    "brokerStatus": cmd_broker_status, "consumerProgress": cmd_consumer_progress,
    "sendMessage": cmd_send_message, "txPending": cmd_tx_pending, **query_commands.COMMANDS,
}


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namesrv-addr", default=None,
                        help="name servers, ';'-separated (default $NAMESRV_ADDR or 127.0.0.1:9876)")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument("--timeout", type=float, default=5.0, help="seconds per request")
    common.add_argument("--access-key", default=os.environ.get("POCKETMQ_ACCESS_KEY"),
                        help="ACL access key (default $POCKETMQ_ACCESS_KEY); requests are signed with it")
    common.add_argument("--secret-key", default=os.environ.get("POCKETMQ_SECRET_KEY"),
                        help="ACL secret key (default $POCKETMQ_SECRET_KEY)")
    p = argparse.ArgumentParser(prog="rmq-admin", description="PocketMQ admin tool (mqadmin-style commands)")
    # mqadmin takes -n before the command name too: "rmq-admin -n ns:9876 topicList"
    p.add_argument("-n", "--namesrv-addr", dest="namesrv_before", default=None, help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("clusterList", parents=[common], help="brokers per cluster with role and TPS")
    s.add_argument("-c", "--cluster")
    sub.add_parser("topicList", parents=[common], help="every topic the name servers know")
    for name, text in (("topicRoute", "where a topic's queues are"), ("topicStatus", "min/max offset per queue")):
        s = sub.add_parser(name, parents=[common], help=text)
        s.add_argument("-t", "--topic", required=True)
    s = sub.add_parser("updateTopic", parents=[common], help="create or change a topic on masters")
    s.add_argument("-t", "--topic", required=True)
    where = s.add_mutually_exclusive_group()
    where.add_argument("-c", "--cluster")
    where.add_argument("-b", "--broker", help="one broker address")
    s.add_argument("-r", "--read-queues", type=int, default=8)
    s.add_argument("-w", "--write-queues", type=int, default=8)
    s.add_argument("-p", "--perm", type=int, default=6)
    s.add_argument("-o", "--order", action="store_true")
    s.add_argument("-a", "--attributes", help="RocketMQ 5 attributes, e.g. +message.type=FIFO (NORMAL, FIFO, DELAY, "
                                                "TRANSACTION, MIXED)")
    s = sub.add_parser("deleteTopic", parents=[common], help="delete a topic from masters and name servers")
    s.add_argument("-t", "--topic", required=True)
    s.add_argument("-c", "--cluster")
    s = sub.add_parser("brokerStatus", parents=[common], help="runtime info, HA state and lag")
    s.add_argument("-b", "--broker", help="one broker address (default: every broker)")
    s.add_argument("-c", "--cluster")
    s = sub.add_parser("consumerProgress", parents=[common], help="consumer offsets and lag per queue")
    s.add_argument("-g", "--group", required=True)
    s.add_argument("-t", "--topic")
    s = sub.add_parser("sendMessage", parents=[common], help="send a message with the SDK")
    s.add_argument("-t", "--topic", required=True)
    s.add_argument("-p", "--body", required=True)
    s.add_argument("--tags")
    s.add_argument("-k", "--keys")
    s.add_argument("--group", default="rmq-admin-producer")
    s.add_argument("--count", type=int, default=1)
    s = sub.add_parser("txPending", parents=[common], help="unresolved transactional half messages per topic/group")
    s.add_argument("-b", "--broker", help="one master address (default: every master)")
    s.add_argument("-c", "--cluster")
    query_commands.add_parsers(sub, common)
    for module in (commands_groups, commands_clients, commands_broker, commands_controller, commands_disk,
                   commands_pop, commands_topics):
        COMMANDS.update(module.register(sub, common))
    sub.add_parser("export", help="copy a broker's commit log (see rmq-admin export -h)", add_help=False)
    sub.add_parser("verify-export", help="check an export against its manifest", add_help=False)
    return p


def credentials_of(args: argparse.Namespace) -> SessionCredentials | None:
    """``--access-key``/``--secret-key`` (or the environment): both or neither."""
    access_key, secret_key = getattr(args, "access_key", None), getattr(args, "secret_key", None)
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise SystemExit("rmq-admin: --access-key and --secret-key go together")
    return SessionCredentials(access_key, secret_key)


async def run(args: argparse.Namespace) -> int:
    async with AdminClient(split_namesrv(args.namesrv_addr), timeout=args.timeout,
                           credentials=credentials_of(args)) as admin:
        try:
            await COMMANDS[args.command](admin, args)
        except (AdminError, rd.BodyDecodeError) as exc:
            print(f"rmq-admin {args.command}: {exc}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("export", "verify-export"):
        return _dispatch_export(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    args.namesrv_addr = (args.namesrv_addr or args.namesrv_before or os.environ.get("NAMESRV_ADDR")
                         or DEFAULT_NAMESRV)
    configure_logging("console", "WARNING")  # the SDK's info logs would mix with the output
    try:
        return asyncio.run(run(args))
    except AdminError as exc:
        print(f"rmq-admin: {exc}", file=sys.stderr)
        return 1


def _dispatch_export(command: str, argv: list[str]) -> int:
    """``rmq-admin export|verify-export ...`` belong to :mod:`pocketmq.admin.export`; hand them their arguments."""
    try:
        module = importlib.import_module("pocketmq.admin.export")
    except ImportError as exc:
        print(f"rmq-admin export: not available ({exc})", file=sys.stderr)
        return 2
    entry = getattr(module, "export_main" if command == "export" else "verify_main", None)
    if entry is None:
        print(f"rmq-admin {command}: pocketmq.admin.export does not provide it", file=sys.stderr)
        return 2
    return int(entry(argv))


if __name__ == "__main__":
    sys.exit(main())
