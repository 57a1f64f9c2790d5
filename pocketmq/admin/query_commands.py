"""``rmq-admin`` commands that find messages: ``queryMsgByKey``, ``queryMsgByUniqueKey``, ``queryMsgById`` (an
offset id, or with ``-t`` a client unique id too) and ``queryMsgTraceById`` (a message's life from its trace
records: sent, stored, consumed).

They use the SDK's :class:`~pocketmq.client.core.query.MessageQuerier` over the admin client's own connections and
name-server lookups, so the rules (every broker group asked, slaves when a master is gone, keys checked) are
the SDK's. Each message prints its ids, topic, broker, queue and offsets, store and born times, properties,
and with ``--body`` its body; ``--json`` prints the same as JSON. :func:`add_parsers` and :data:`COMMANDS`
are what :mod:`pocketmq.admin.cli` registers.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.message_ext import MessageDecodeError, MessageExt, decode_messages
from pocketmq.client.core.query import LONG_MAX, MessageQuerier
from pocketmq.client.trace.data import TRACE_TOPIC, ConsumeReturnType, TraceContext, TraceType, decode_trace_data
from pocketmq.common.record import decode_message_id
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.headers import ViewMessageRequestHeader

TRACE_QUERY_MAX = 64


def querier(admin: AdminClient) -> MessageQuerier:
    async def fetch(topic: str) -> rd.TopicRouteData | None:
        try:
            return await admin.topic_route(topic)
        except AdminError:
            return None

    return MessageQuerier(fetch, admin.client.invoke, timeout=admin.timeout)


def _when(millis: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000)) + f".{millis % 1000:03d}"


def message_dict(m: MessageExt, *, body: bool) -> dict[str, Any]:
    """One message as JSON-friendly data (the body as text when it is UTF-8, else hex, with ``body``)."""
    data: dict[str, Any] = {
        "msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "topic": m.topic, "tags": m.tags, "keys": m.keys,
        "brokerName": m.broker_name, "storeHost": m.store_host, "queueId": m.queue_id,
        "queueOffset": m.queue_offset, "commitLogOffset": m.commit_log_offset, "storeTimestamp": m.store_timestamp,
        "storeTime": _when(m.store_timestamp), "bornTimestamp": m.born_timestamp, "bornHost": m.born_host,
        "reconsumeTimes": m.reconsume_times, "bodyLength": len(m.body), "properties": m.properties,
    }
    if body:
        try:
            data["body"], data["bodyEncoding"] = m.body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            data["body"], data["bodyEncoding"] = m.body.hex(), "hex"
    return data


def _text(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no message found"
    blocks = []
    for data in items:
        width = max(len(k) for k in data)
        blocks.append("\n".join(f"{k:<{width}} : {v}" for k, v in data.items()))
    return "\n\n".join(blocks)


def _print(args: argparse.Namespace, items: list[dict[str, Any]]) -> None:
    print(json.dumps(items, indent=2, sort_keys=True, default=str) if args.json else _text(items))


async def _guard(coro: Any) -> Any:
    try:
        return await coro
    except MQClientError as exc:
        raise AdminError(str(exc)) from None


async def cmd_query_by_key(admin: AdminClient, args: argparse.Namespace) -> None:
    found = await _guard(querier(admin).query_message(args.topic, args.key, args.max_num, args.begin, args.end))
    _print(args, [message_dict(m, body=args.body) for m in found])


async def cmd_query_by_unique_key(admin: AdminClient, args: argparse.Namespace) -> None:
    found = await _guard(querier(admin).query_message(args.topic, args.msg_id, 32, 0, LONG_MAX, unique=True))
    _print(args, [message_dict(m, body=args.body) for m in found[-1:]])


async def view_by_offset_id(admin: AdminClient, msg_id: str) -> MessageExt | None:
    """The message an offset id names, read from the broker the id names; None when it names none."""
    try:
        ip, port, offset = decode_message_id(msg_id)
    except ValueError:
        return None
    try:
        resp = await admin.call(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID,
                                ViewMessageRequestHeader(offset).to_fields())
        messages = decode_messages(bytes(resp.body or b""))
    except (AdminError, MessageDecodeError):
        return None
    return messages[0] if messages and messages[0].offset_msg_id == msg_id.upper() else None


async def find_by_id(admin: AdminClient, msg_id: str, topic: str | None) -> MessageExt:
    """An offset id (from its broker, or with ``topic`` from any member of the topic's groups) or a unique id
    (with ``topic``)."""
    if topic:
        return await _guard(querier(admin).view_message(topic, msg_id))  # type: ignore[no-any-return]
    found = await view_by_offset_id(admin, msg_id)
    if found is None:
        raise AdminError(f"{msg_id} names no message of a reachable broker; with -t TOPIC it is also looked up "
                         "as a client unique id, and on the slaves of a broker that is down")
    return found


async def cmd_query_by_id(admin: AdminClient, args: argparse.Namespace) -> None:
    """One message: JSON is one object and always has the body (as this command always printed it)."""
    data = message_dict(await find_by_id(admin, args.msg_id, args.topic), body=args.body or args.json)
    print(json.dumps(data, indent=2, sort_keys=True, default=str) if args.json else _text([data]))


async def trace_contexts(admin: AdminClient, msg_id: str, trace_topic: str) -> list[TraceContext]:
    """The trace contexts of a message (by its unique or offset id), oldest first."""
    finder = querier(admin)
    records = await _guard(finder.query_message(trace_topic, msg_id, TRACE_QUERY_MAX, 0, LONG_MAX))
    contexts = [c for m in records for c in decode_trace_data(m.body.decode(errors="replace"))]
    ids = {msg_id} | {c.beans[0].msg_id for c in contexts if c.trace_type is TraceType.Pub and c.beans
                      and c.beans[0].offset_msg_id == msg_id}
    if ids - {msg_id}:  # an offset id: consumption is traced by the unique id
        uniq = next(iter(ids - {msg_id}))
        more = await _guard(finder.query_message(trace_topic, uniq, TRACE_QUERY_MAX, 0, LONG_MAX))
        contexts += [c for m in more for c in decode_trace_data(m.body.decode(errors="replace"))]
    mine = [c for c in contexts if any(b.msg_id in ids or b.offset_msg_id == msg_id for b in c.beans)]
    unique: dict[tuple[str, str, int, str], TraceContext] = {}
    for c in mine:
        unique.setdefault((c.trace_type.value, c.request_id, c.timestamp, c.group_name), c)
    return sorted(unique.values(), key=lambda c: c.timestamp)


def trace_life(contexts: list[TraceContext], stored: MessageExt | None) -> dict[str, Any]:
    """Sent / stored / consumed, from a message's contexts and (when found) the stored message."""
    sent = [{"group": c.group_name, "time": _when(c.timestamp), "timestamp": c.timestamp, "costMs": c.cost_time,
             "success": c.success, "topic": c.beans[0].topic, "tags": c.beans[0].tags, "keys": c.beans[0].keys,
             "storeHost": c.beans[0].store_host, "msgId": c.beans[0].msg_id,
             "offsetMsgId": c.beans[0].offset_msg_id, "region": c.region_id}
            for c in contexts if c.trace_type is TraceType.Pub]
    befores = {c.request_id: c for c in contexts if c.trace_type is TraceType.SubBefore}
    consumed = []
    for after in (c for c in contexts if c.trace_type is TraceType.SubAfter):
        before = befores.get(after.request_id)
        consumed.append({
            "group": before.group_name if before else after.group_name,
            "time": _when(before.timestamp if before else after.timestamp),
            "retries": before.beans[0].retry_times if before and before.beans else 0,
            "costMs": after.cost_time, "success": after.success,
            "result": ConsumeReturnType(after.context_code).name if after.context_code in
            ConsumeReturnType._value2member_map_ else str(after.context_code)})
    consumed += [{"group": b.group_name, "time": _when(b.timestamp),
                  "retries": b.beans[0].retry_times if b.beans else 0, "costMs": None, "success": None,
                  "result": "NO_RESULT_YET"}
                 for rid, b in befores.items() if not any(a.request_id == rid for a in contexts
                                                         if a.trace_type is TraceType.SubAfter)]
    life: dict[str, Any] = {"sent": sent, "consumed": consumed, "stored": None}
    if stored is not None:
        life["stored"] = {"brokerName": stored.broker_name, "storeHost": stored.store_host, "topic": stored.topic,
                          "queueId": stored.queue_id, "queueOffset": stored.queue_offset,
                          "commitLogOffset": stored.commit_log_offset, "storeTime": _when(stored.store_timestamp)}
    return life


def _life_text(msg_id: str, life: dict[str, Any]) -> str:
    lines = [f"message {msg_id}"]
    for s in life["sent"]:
        lines.append(f"  sent     {s['time']}  by {s['group']}  to {s['topic']} via {s['storeHost']}  "
                     f"cost {s['costMs']} ms  {'OK' if s['success'] else 'FAILED'}")
    stored = life["stored"]
    if stored:
        lines.append(f"  stored   {stored['storeTime']}  {stored['brokerName']} ({stored['storeHost']})  queue "
                     f"{stored['queueId']}  offset {stored['queueOffset']}  commit log {stored['commitLogOffset']}")
    for c in life["consumed"]:
        lines.append(f"  consumed {c['time']}  by {c['group']}  result {c['result']}  retries {c['retries']}  "
                     f"cost {c['costMs']} ms")
    if len(lines) == 1:
        lines.append("  no trace found")
    return "\n".join(lines)


async def cmd_query_trace_by_id(admin: AdminClient, args: argparse.Namespace) -> None:
    contexts = await trace_contexts(admin, args.msg_id, args.trace_topic)
    topic = next((c.beans[0].topic for c in contexts if c.trace_type is TraceType.Pub and c.beans), None)
    stored = None
    if topic:
        try:
            stored = await find_by_id(admin, args.msg_id, topic)
        except AdminError:
            stored = None
    life = trace_life(contexts, stored)
    print(json.dumps({"msgId": args.msg_id, **life}, indent=2, sort_keys=True) if args.json
          else _life_text(args.msg_id, life))


COMMANDS = {
    "queryMsgByKey": cmd_query_by_key, "queryMsgByUniqueKey": cmd_query_by_unique_key,
    "queryMsgById": cmd_query_by_id, "queryMsgTraceById": cmd_query_trace_by_id,
}


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add this module's commands to ``rmq-admin``'s sub-parsers."""
    s = sub.add_parser("queryMsgByKey", parents=[common], help="messages of a topic by a key of their KEYS")
    s.add_argument("-t", "--topic", required=True)
    s.add_argument("-k", "--key", required=True)
    s.add_argument("--max-num", type=int, default=64, help="per broker (the broker caps it at maxMsgsNumBatch)")
    s.add_argument("--begin", type=int, default=0, help="store time from (epoch ms)")
    s.add_argument("--end", type=int, default=LONG_MAX, help="store time to (epoch ms)")
    s.add_argument("--body", action="store_true", help="print the bodies too")
    s = sub.add_parser("queryMsgByUniqueKey", parents=[common], help="a message by its client unique id")
    s.add_argument("-t", "--topic", required=True)
    s.add_argument("-i", "--msg-id", required=True)
    s.add_argument("--body", action="store_true")
    s = sub.add_parser("queryMsgById", parents=[common],
                       help="a message by its offset msgId (with -t: or by its client unique id)")
    s.add_argument("-i", "--msg-id", required=True)
    s.add_argument("-t", "--topic")
    s.add_argument("--body", action="store_true")
    s = sub.add_parser("queryMsgTraceById", parents=[common], help="a message's life from its trace records")
    s.add_argument("-i", "--msg-id", required=True)
    s.add_argument("--trace-topic", default=TRACE_TOPIC)
