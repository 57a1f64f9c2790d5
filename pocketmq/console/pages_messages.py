"""The Messages pages (by topic and time range with a cursor, by key, by id; one message with its body,
properties, consumption status per group and trace; resend to a group) and the DLQ pages (a group's dead
letters, resend selected, CSV export).

Finding by key and id uses the same code as ``rmq-admin queryMsgByKey``/``queryMsgById``
(:mod:`pocketmq.admin.query_commands`); a resend is :func:`pocketmq.admin.api_ops.retry_copy` produced by the
console's own producer, as ``rmq-admin resendMessage`` does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from pocketmq.admin import api_ops, query_commands
from pocketmq.admin.api import AdminError
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.query import LONG_MAX
from pocketmq.client.trace.data import TRACE_TOPIC
from pocketmq.common.topic import dlq_topic, validate_topic
from pocketmq.console import messages as msgs
from pocketmq.console.pages_groups import check_group
from pocketmq.console.web import (
    FormError,
    action_result,
    console_of,
    parse_local_time,
    render,
)

MAX_RESEND = 100
MAX_STATUS_GROUPS = 50
HOUR_MS = 3_600_000


def routes() -> list[web.RouteDef]:
    return [web.get("/messages", messages_page), web.get("/message", message_page),
            web.get("/message/body", message_body), web.post("/message/resend", resend_one),
            web.get("/dlq", dlq_page), web.post("/dlq/resend", resend_dlq), web.get("/dlq/export", dlq_export)]


def _topic(value: str) -> str:
    problem = validate_topic(value)
    if problem is not None:
        raise FormError(problem)
    return value


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _local(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


async def _by_range(request: web.Request, topic: str) -> dict[str, Any]:
    console = console_of(request)
    q = request.query
    begin = parse_local_time(q.get("begin") or _local(_now_ms() - HOUR_MS), "begin")
    end = parse_local_time(q.get("end") or _local(_now_ms() + 60_000), "end")
    if end < begin:
        raise FormError("the end of the range is before its start")
    needle = q.get("filter", "")[:255]
    cursor = (msgs.Cursor.decode(q["cursor"]) if q.get("cursor") else
              await msgs.start_cursor(console.admin, topic, begin, end))
    if cursor.topic != topic:
        raise FormError("the cursor belongs to another topic")
    page = await msgs.read_page(console.admin, cursor, page_size=console.config.page_size,
                                scan_limit=console.config.message_scan_limit, needle=needle)
    return {"found": list(page.messages), "cursor": page.cursor.encode() if page.cursor else "",
            "notice": page.notice, "partial": page.partial, "scanned": page.scanned,
            "command": console.commands.print_range(topic, begin, end)}


async def _by_key(request: web.Request, topic: str) -> dict[str, Any]:
    console = console_of(request)
    key = request.query.get("key", "").strip()[:255]
    if not key:
        raise FormError("give a key")
    limit = console.config.key_query_max
    querier = query_commands.querier(console.admin)
    try:
        found = await querier.query_message(topic, key, limit, 0, LONG_MAX)
    except MQClientError as exc:
        raise AdminError(str(exc)) from None
    notice = ""
    if len(found) >= limit:
        notice = (f"Partial result: each broker returns at most {limit} messages for one key; more may be stored. "
                  "Use the time range search with this key as its filter to page through all of them.")
    return {"found": found, "cursor": "", "notice": notice, "partial": bool(notice), "scanned": len(found),
            "command": console.commands.query_by_key(topic, key, None, None)}


async def _by_id(request: web.Request, topic: str | None) -> dict[str, Any]:
    console = console_of(request)
    msg_id = request.query.get("id", "").strip()[:64]
    if not msg_id or not all(c in "0123456789abcdefABCDEF" for c in msg_id):
        raise FormError("a message id is 32 (offset id) or 32 and more (unique id) hexadecimal digits")
    found = [await query_commands.find_by_id(console.admin, msg_id, topic)]
    return {"found": found, "cursor": "", "notice": "", "partial": False, "scanned": 1,
            "command": console.commands.query_by_id(msg_id, topic)}


async def messages_page(request: web.Request) -> web.StreamResponse:
    q = request.query
    mode = q.get("mode", "range")
    topic = q.get("topic", "")
    result: dict[str, Any] = {}
    if q.get("go") == "1":
        if mode == "id":
            result = await _by_id(request, _topic(topic) if topic else None)
        elif mode == "key":
            result = await _by_key(request, _topic(topic))
        else:
            result = await _by_range(request, _topic(topic))
    now = _now_ms()
    return render(request, "messages.html", page="messages", mode=mode, topic=topic, q=q, result=result,
                  begin=q.get("begin") or _local(now - HOUR_MS), end=q.get("end") or _local(now + 60_000))


async def _find(request: web.Request) -> MessageExt:
    console = console_of(request)
    topic = _topic(request.query.get("topic", ""))
    msg_id = request.query.get("id", "").strip()[:64]
    if not msg_id:
        raise FormError("give a message id")
    return await query_commands.find_by_id(console.admin, msg_id, topic)


async def _trace(console: Any, message: MessageExt) -> tuple[dict[str, Any] | None, str]:
    try:
        contexts = await query_commands.trace_contexts(console.admin, message.msg_id, TRACE_TOPIC)
    except AdminError as exc:
        return None, f"no trace: {exc}"
    return query_commands.trace_life(contexts, message), ""


async def message_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    message = await _find(request)
    mode = request.query.get("view", "text")
    body = msgs.render_body(message.body, mode, console.config.body_view_limit)
    groups: set[str] = set()
    for addr in await api_ops.topic_masters(console.admin, message.topic):
        groups.update(await api_ops.consumed_by(console.admin, addr, message.topic))
    shown = sorted(groups)[:MAX_STATUS_GROUPS]
    consumption, (trace, trace_error) = await asyncio.gather(msgs.consumption_status(console.admin, message, shown),
                                                        _trace(console, message))
    return render(request, "message.html", page="messages", m=message, body=body, modes=msgs.BODY_MODES,
                  consumption=consumption, more_groups=max(len(groups) - len(shown), 0), trace=trace,
                  trace_error=trace_error,
                  groups=sorted(groups), properties=sorted(message.properties.items()),
                  commands=[console.commands.query_by_id(message.offset_msg_id, message.topic),
                            console.commands.trace(message.msg_id)])


async def message_body(request: web.Request) -> web.StreamResponse:
    message = await _find(request)
    return web.Response(body=message.body, content_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{message.offset_msg_id}.bin"'})


async def _resend(console: Any, message: MessageExt, group: str) -> str:
    await api_ops.ensure_retry_topic(console.admin, group)
    producer = await console.producer()
    try:
        sent = await producer.send(api_ops.retry_copy(message, group))
    except MQClientError as exc:
        raise AdminError(f"resend of {message.msg_id} failed: {exc}") from None
    return f"{message.msg_id} → {sent.msg_id} ({sent.message_queue.topic} queue {sent.message_queue.queue_id})"


async def resend_one(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    topic = _topic(str(form.get("topic", "")))
    group = check_group(str(form.get("group", "")))
    msg_id = str(form.get("id", ""))[:64]
    message = await query_commands.find_by_id(console.admin, msg_id, topic)
    detail = await _resend(console, message, group)
    return action_result(request, ok=True, message=f"Message resent to group {group} (through %RETRY%{group}).",
                         command=console.commands.resend(group, message.offset_msg_id, topic), details=[detail])


# -- DLQ ----------------------------------------------------------------------------------------------------


async def dlq_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    snap = await console.view.topics()
    dlq_groups = sorted(t.name[len("%DLQ%"):] for t in snap.topics if t.kind == "dlq")
    group = request.query.get("group", "")
    result: dict[str, Any] = {}
    if group:
        check_group(group)
        topic = dlq_topic(group)
        cursor = (msgs.Cursor.decode(request.query["cursor"]) if request.query.get("cursor")
                  else await msgs.start_cursor(console.admin, topic, 0, _now_ms()))
        if cursor.topic != topic:
            raise FormError("the cursor belongs to another topic")
        page = await msgs.read_page(console.admin, cursor, page_size=console.config.page_size,
                                    scan_limit=console.config.message_scan_limit)
        result = {"found": list(page.messages), "cursor": page.cursor.encode() if page.cursor else "",
                  "notice": page.notice}
    return render(request, "dlq.html", page="dlq", groups=dlq_groups, group=group, result=result,
                  command=console.commands.dlq_print(group) if group else "")


async def resend_dlq(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    group = check_group(str(form.get("group", "")))
    ids = [str(v)[:64] for v in form.getall("id", [])]
    if not ids:
        raise FormError("select at least one message")
    if len(ids) > MAX_RESEND:
        raise FormError(f"at most {MAX_RESEND} messages at once")
    topic = dlq_topic(group)
    details = []
    for msg_id in ids:
        message = await query_commands.find_by_id(console.admin, msg_id, topic)
        details.append(await _resend(console, message, group))
    commands = "\n".join(console.commands.resend(group, i, topic) for i in ids)
    return action_result(request, ok=True, message=f"{len(ids)} dead letter(s) resent to group {group}.",
                         command=commands, details=details)


async def dlq_export(request: web.Request) -> web.StreamResponse:
    """The group's dead letters as CSV, streamed page by page, at most ``csvExportLimit`` rows."""
    console = console_of(request)
    group = check_group(request.query.get("group", ""))
    topic = dlq_topic(group)
    cursor: msgs.Cursor | None = await msgs.start_cursor(console.admin, topic, 0, _now_ms())
    response = web.StreamResponse(headers={"Content-Type": "text/csv; charset=utf-8",
                                           "Content-Disposition": f'attachment; filename="dlq-{group}.csv"'})
    await response.prepare(request)
    await response.write(msgs.csv_text([], header=True).encode())
    written = 0
    limit = console.config.csv_export_limit
    while cursor is not None and written < limit:
        page = await msgs.read_page(console.admin, cursor, page_size=min(500, limit - written),
                                    scan_limit=max(console.config.message_scan_limit, 500))
        rows = [msgs.csv_row(m, console.config.body_view_limit) for m in page.messages]
        await response.write(msgs.csv_text(rows, header=False).encode())
        written += len(rows)
        cursor = page.cursor
    await response.write_eof()
    return response
