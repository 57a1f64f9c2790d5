"""``rmq-admin`` commands about brokers and topics, with mqadmin's names and flags: ``topicClusterList``,
``statsAll`` (put/get TPS, 24 h counts and accumulation per topic and group, from VIEW_BROKER_STATS_DATA),
``clusterRT`` (send round trips to each master), ``getBrokerConfig``/``updateBrokerConfig``,
``wipeWritePerm``/``addWritePerm`` (on every name server) and ``printMsg`` (a range of one topic's queues)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient, AdminError, queue_lag
from pocketmq.admin.output import Command, emit, key_values, table, where_flags
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pocketmq.remoting import route as rd


async def cmd_topic_cluster_list(admin: AdminClient, args: argparse.Namespace) -> None:
    route = await admin.topic_route(args.topic)
    names = {q.broker_name for q in route.queue_datas}
    info = await admin.cluster_info()
    clusters = sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))
    emit(args, clusters, "\n".join(clusters))


def _window(data: dict[str, Any] | None, ring: str, field: str) -> float:
    return float((data or {}).get(ring, {}).get(field, 0))


async def _topic_rows(admin: AdminClient, topic: str) -> list[dict[str, Any]]:
    addrs = await api_ops.topic_masters(admin, topic)
    in_tps = in_day = 0.0
    groups: set[str] = set()
    for addr in addrs:
        put = await api_ops.broker_stats(admin, addr, "TOPIC_PUT_NUMS", topic)
        in_tps += _window(put, "statsMinute", "tps")
        in_day += _window(put, "statsDay", "sum")
        groups.update(await api_ops.consumed_by(admin, addr, topic))
    rows = []
    for group in sorted(groups) or [""]:
        out_tps = out_day = 0.0
        lag = 0
        for addr in addrs if group else []:
            got = await api_ops.broker_stats(admin, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps += _window(got, "statsMinute", "tps")
            out_day += _window(got, "statsDay", "sum")
            lag += sum(queue_lag(int(e["brokerOffset"]), int(e["consumerOffset"]))
                       for e in await api_ops.consume_stats(admin, addr, group, topic))
        rows.append({"topic": topic, "group": group, "accumulation": lag, "inTPS": round(in_tps, 2),
                     "outTPS": round(out_tps, 2), "inMsg24Hour": int(in_day), "outMsg24Hour": int(out_day)})
    return rows


async def cmd_stats_all(admin: AdminClient, args: argparse.Namespace) -> None:
    topics = [args.topic] if args.topic else [
        t for t in await admin.topic_list() if not t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))]
    rows: list[dict[str, Any]] = []
    for topic in topics:
        try:
            rows.extend(await _topic_rows(admin, topic))
        except AdminError:
            if args.topic:
                raise
            continue  # a system topic with no route of its own (cluster and broker names)
    if args.active_topic:
        rows = [r for r in rows if r["inTPS"] or r["outTPS"]]
    emit(args, rows, table(["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                            "#OutMsg24Hour"],
                           [[r["topic"], r["group"], r["accumulation"], r["inTPS"], r["outTPS"], r["inMsg24Hour"],
                             r["outMsg24Hour"]] for r in rows]))


async def cmd_cluster_rt(admin: AdminClient, args: argparse.Namespace) -> None:
    """Send ``-a`` messages of ``-s`` bytes to each master's own topic (named after the broker) and report
    the mean round trip, as mqadmin's clusterRT does."""
    from pocketmq.client import Message, Producer  # the SDK is only needed here

    brokers = [b for b in await admin.brokers(args.cluster) if b.broker_id == rd.MASTER_ID]
    if not brokers:
        raise AdminError("no master broker found")
    rows: list[dict[str, Any]] = []
    async with Producer("rmq-admin-cluster-rt", namesrv_addr=";".join(admin.namesrv_addrs)) as producer:
        for b in brokers:
            ok = failed = 0
            spent = 0.0
            for _ in range(args.amount):
                started = time.perf_counter()
                try:
                    await producer.send(Message(b.broker_name, b"x" * args.size))
                    ok += 1
                    spent += time.perf_counter() - started
                except Exception:  # every failure counts, whatever the SDK raised
                    failed += 1
            rt = round(spent * 1000 / ok, 3) if ok else 0.0
            rows.append({"cluster": b.cluster, "brokerName": b.broker_name, "rt": rt, "successCount": ok,
                         "failCount": failed})
    emit(args, rows, table(["#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"],
                           [[r["cluster"], r["brokerName"], r["rt"], r["successCount"], r["failCount"]] for r in rows]))
    failures = sum(int(r["failCount"]) for r in rows)
    if failures:
        raise AdminError(f"{failures} sends failed")


async def cmd_get_broker_config(admin: AdminClient, args: argparse.Namespace) -> None:
    data = {addr: await api_ops.broker_config(admin, addr)
            for addr in await api_ops.targets(admin, args.broker, args.cluster)}
    emit(args, data if not args.broker else data[args.broker],
         "\n\n".join(f"============{addr}============\n" + key_values(dict(sorted(c.items())))
                     for addr, c in data.items()))


async def cmd_update_broker_config(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await api_ops.targets(admin, args.broker, args.cluster)
    await api_ops.update_broker_config(admin, addrs, args.key, args.value)
    emit(args, {"brokers": addrs, args.key: args.value},
         "\n".join(f"update broker config success, {a}" for a in addrs))


async def cmd_write_perm(admin: AdminClient, args: argparse.Namespace) -> None:
    writable = args.command == "addWritePerm"
    counts = await api_ops.write_perm(admin, args.broker_name, writable=writable)
    what = "add write perm of broker" if writable else "wipe write perm of broker"
    emit(args, counts, "\n".join(f"{what}[{args.broker_name}] in name server[{ns}] OK, {n} topics"
                                 for ns, n in counts.items()))


async def cmd_print_msg(admin: AdminClient, args: argparse.Namespace) -> None:
    route = await admin.topic_route(args.topic)
    masters = {bd.broker_name: bd.broker_addrs.get(rd.MASTER_ID) for bd in route.broker_datas}
    out: list[dict[str, Any]] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(qd.broker_name)
        if addr is None or (args.broker_name and qd.broker_name != args.broker_name):
            continue
        for queue_id in range(qd.read_queue_nums):
            if args.queue_id is not None and queue_id != args.queue_id:
                continue
            low, high = await admin.queue_offsets(addr, args.topic, queue_id)
            begin = args.begin_offset if args.begin_offset is not None else (
                await api_ops.search_offset(admin, addr, args.topic, queue_id, args.begin_timestamp)
                if args.begin_timestamp is not None else low)
            end = args.end_offset if args.end_offset is not None else (
                await api_ops.search_offset(admin, addr, args.topic, queue_id, args.end_timestamp)
                if args.end_timestamp is not None else high)
            for m in await api_ops.read_queue(admin, addr, args.topic, queue_id, max(begin, low), min(end, high),
                                              qd.broker_name):
                try:
                    body: str = m.body.decode("utf-8")
                except UnicodeDecodeError:
                    body = m.body.hex()
                out.append({"brokerName": qd.broker_name, "queueId": queue_id, "queueOffset": m.queue_offset,
                            "msgId": m.offset_msg_id, "storeTimestamp": m.store_timestamp, "tags": m.tags,
                            "keys": m.keys, "body": body})
    rows = [[m["brokerName"], m["queueId"], m["queueOffset"], m["msgId"], m["tags"] or "", m["body"][:40]]
            for m in out]
    emit(args, out, table(["#Broker", "#QID", "#Offset", "#MsgId", "#Tags", "#Body"], rows))



def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    s = sub.add_parser("topicClusterList", parents=[common], help="clusters a topic is on")
    s.add_argument("-t", "--topic", required=True)
    s = sub.add_parser("statsAll", parents=[common], help="TPS, 24 h counts and accumulation per topic and group")
    s.add_argument("-t", "--topic")
    s.add_argument("-a", "--active-topic", action="store_true", help="only topics with traffic")
    s = sub.add_parser("clusterRT", parents=[common], help="send round trips to each master")
    s.add_argument("-a", "--amount", type=int, default=100)
    s.add_argument("-s", "--size", type=int, default=128)
    s.add_argument("-c", "--cluster")
    s = sub.add_parser("getBrokerConfig", parents=[common], help="a broker's effective configuration")
    where_flags(s)
    s = sub.add_parser("updateBrokerConfig", parents=[common], help="change a run-time broker key")
    where_flags(s)
    s.add_argument("-k", "--key", required=True)
    s.add_argument("-v", "--value", required=True)
    for name, text in (("wipeWritePerm", "take write permission off a broker in the name servers"),
                       ("addWritePerm", "give a broker its write permission back")):
        s = sub.add_parser(name, parents=[common], help=text)
        s.add_argument("-b", "--broker-name", required=True)
    s = sub.add_parser("printMsg", parents=[common], help="a range of a topic's messages, by queue")
    s.add_argument("-t", "--topic", required=True)
    s.add_argument("-a", "--broker-name", help="only this broker group")
    s.add_argument("-i", "--queue-id", type=int, help="only this queue")
    s.add_argument("-b", "--begin-timestamp", type=int, help="from the first message stored at or after (ms)")
    s.add_argument("-e", "--end-timestamp", type=int, help="up to the messages stored before (ms)")
    s.add_argument("--begin-offset", type=int, help="from this queue offset")
    s.add_argument("--end-offset", type=int, help="up to (not including) this queue offset")
    return {"topicClusterList": cmd_topic_cluster_list, "statsAll": cmd_stats_all, "clusterRT": cmd_cluster_rt,
            "getBrokerConfig": cmd_get_broker_config, "updateBrokerConfig": cmd_update_broker_config,
            "wipeWritePerm": cmd_write_perm, "addWritePerm": cmd_write_perm, "printMsg": cmd_print_msg}


