"""The Topics pages: the list (search, sort, paging, from the snapshot), one topic (route, per-queue offsets,
consuming groups and their lag), create/update, delete, and sending a test message.

A topic name is checked with the broker's own rule (:func:`pocketmq.common.topic.validate_topic`, the same
words); anything else a broker refuses (queue counts, a reserved name) comes back as its remark, shown as is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminError
from pocketmq.client import Message
from pocketmq.client.core.errors import MQClientError
from pocketmq.common.topic import validate_topic
from pocketmq.console.view import TOPIC_SORTS, paginate, select
from pocketmq.console.web import FormError, action_result, console_of, form_int, is_htmx, query_int, render, url
from pocketmq.remoting import route as rd

#: Most groups of one topic whose lag the topic page asks for (one request per group and broker).
MAX_GROUPS_SHOWN = 50
MAX_TEST_BODY = 64 * 1024
MAX_TEST_COUNT = 10
PERMS = {6: "read and write", 4: "read only", 2: "write only"}
KINDS = ("normal", "retry", "dlq", "system")


def routes() -> list[web.RouteDef]:
    return [web.get("/topics", topics_page), web.get("/topic", topic_page), web.post("/topics/update", update_topic),
            web.post("/topic/delete", delete_topic), web.post("/topic/send", send_test)]


def chosen_kinds(request: web.Request) -> frozenset[str]:
    kinds = frozenset(k for k in request.query.getall("kind", []) if k in KINDS)
    return kinds or frozenset({"normal"})


async def topics_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    snap = await console.view.topics()
    query = request.query.get("q", "")[:200]
    sort = request.query.get("sort", "name")
    descending = request.query.get("dir") == "desc"
    kinds = chosen_kinds(request)
    rows = select(snap.topics, query=query, kinds=kinds, sort=sort, descending=descending, sorts=TOPIC_SORTS)
    page = paginate(rows, query_int(request, "page", 1, 1, 1_000_000), console.config.page_size, len(snap.topics))
    template = "_topics_table.html" if is_htmx(request) and request.headers.get("HX-Target") == "topic-table" \
        else "topics.html"
    clusters = sorted(snap.clusters)
    return render(request, template, page="topics", rows=page, snap=snap, q=query, sort=sort,
                  dir="desc" if descending else "asc", kinds=sorted(kinds), all_kinds=KINDS, clusters=clusters,
                  perms=PERMS, command=console.commands.topic_list())


async def _group_lag(console: Any, addrs: list[str], group: str, topic: str) -> dict[str, Any]:
    lag = 0
    try:
        for addr in addrs:
            entries = await api_ops.consume_stats(console.admin, addr, group, topic)
            lag += sum(e["lag"] for e in api_ops.with_lag(entries))
    except AdminError as exc:
        return {"group": group, "lag": None, "error": str(exc)}
    return {"group": group, "lag": lag, "error": ""}


async def topic_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    name = request.query.get("name", "")
    problem = validate_topic(name)
    if problem is not None:
        raise FormError(problem)
    route = await console.admin.topic_route(name)
    masters = {bd.broker_name: bd.broker_addrs[rd.MASTER_ID] for bd in route.broker_datas
               if rd.MASTER_ID in bd.broker_addrs}
    queues: list[dict[str, Any]] = []
    groups: set[str] = set()
    for _broker, addr in sorted(masters.items()):
        queues.extend(await api_ops.topic_stats(console.admin, addr, name))
        groups.update(await api_ops.consumed_by(console.admin, addr, name))
    shown = sorted(groups)[:MAX_GROUPS_SHOWN]
    group_rows = await asyncio.gather(*(_group_lag(console, list(masters.values()), g, name) for g in shown))
    snap = await console.view.topics()
    row = next((t for t in snap.topics if t.name == name), None)
    return render(request, "topic.html", page="topics", name=name, route=route, queues=queues, groups=group_rows,
                  more_groups=max(len(groups) - len(shown), 0), row=row, perms=PERMS, clusters=sorted(snap.clusters),
                  commands=[console.commands.topic_route(name), console.commands.topic_status(name),
                            console.commands.stats_all(name)])


async def update_topic(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    name = str(form.get("topic", "")).strip()
    problem = validate_topic(name)
    if problem is not None:
        raise FormError(problem)
    read = form_int(form, "read", 8, 0, 65535)
    write = form_int(form, "write", 8, 0, 65535)
    perm = form_int(form, "perm", 6, 0, 7)
    if perm not in PERMS:
        raise FormError("perm must be 6 (read and write), 4 (read only) or 2 (write only)")
    kind = str(form.get("type", "NORMAL"))
    if kind not in ("NORMAL", "FIFO"):
        raise FormError("message type must be NORMAL or FIFO")
    cluster = str(form.get("cluster", "")).strip() or None
    command = console.commands.update_topic(name, read, write, perm, kind == "FIFO", cluster)
    try:
        addrs = await console.admin.update_topic(name, read_queues=read, write_queues=write, perm=perm,
                                                 cluster=cluster, order=kind == "FIFO")
    except AdminError as exc:
        return action_result(request, ok=False, message=f"The broker refused: {exc}", command=command, status=400)
    await console.view.topic_cache.rebuild()
    return action_result(request, ok=True, message=f"Topic {name} created or updated on {len(addrs)} master(s).",
                         command=command, details=[f"open: {url(request, '/topic', name=name)}"])


async def delete_topic(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    name = str(form.get("topic", ""))
    if validate_topic(name) is not None:
        raise FormError(validate_topic(name) or "")
    if form.get("confirm") != name:
        raise FormError("type the topic's name into the confirmation field to delete it")
    command = console.commands.delete_topic(name, None)
    addrs = await console.admin.delete_topic(name)
    await console.view.topic_cache.rebuild()
    return action_result(request, ok=True, message=f"Topic {name} deleted from {len(addrs)} master(s) and the "
                         "name servers.", command=command)


async def send_test(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    name = str(form.get("topic", ""))
    if validate_topic(name) is not None:
        raise FormError(validate_topic(name) or "")
    body = str(form.get("body", ""))
    if not body or len(body.encode()) > MAX_TEST_BODY:
        raise FormError(f"the body is 1 byte to {MAX_TEST_BODY // 1024} KiB")
    keys = str(form.get("keys", "")).strip()[:255]
    tags = str(form.get("tags", "")).strip()[:255]
    count = form_int(form, "count", 1, 1, MAX_TEST_COUNT)
    command = console.commands.send_message(name, body, keys, tags)
    producer = await console.producer()
    sent = []
    try:
        for _ in range(count):
            sent.append(await producer.send(Message(name, body.encode(), keys=keys or None, tags=tags or None)))
    except MQClientError as exc:
        return action_result(request, ok=False, message=f"Send failed after {len(sent)} sent: {exc}", command=command,
                             status=502)
    details = [f"{r.msg_id}  (offset id {r.offset_msg_id}, {r.message_queue.broker_name} queue "
               f"{r.message_queue.queue_id} offset {r.queue_offset}, {getattr(r.status, 'name', r.status)})"
               for r in sent]
    return action_result(request, ok=True, message=f"{len(sent)} message(s) sent to {name}.", command=command,
                         details=details)
