"""The Consumer groups pages: the list (from the snapshot: no request per group), one group (lag per queue,
clients and their versions, POP in-flight counts), and offset resets with a dry-run preview.

**Lag** is :func:`pocketmq.admin.api.queue_lag`: per queue, the queue's max offset on its master (the offset
the next message will get) less the group's committed offset there (the next it will read), never below 0; a
queue the group has never committed counts from 0. It is what ``rmq-admin consumerProgress`` prints and what
the brokers' ``rocketmq_group_diff`` sums, so the three agree. Retry-topic lag is shown apart.

**POP in-flight** comes from GET_POP_INFLIGHT_STATS; a broker that answers it as unsupported shows "n/a".
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminError
from pocketmq.common.topic import is_retry_topic, validate_topic
from pocketmq.console.view import GROUP_SORTS, paginate, select
from pocketmq.console.web import (
    FormError,
    action_result,
    console_of,
    is_htmx,
    parse_local_time,
    query_int,
    render,
)
from pocketmq.remoting import route as rd

POP_UNSUPPORTED = "n/a (broker does not serve POP)"
#: MQVersion ordinals clients commonly send, for a readable version column.
KNOWN_VERSIONS = {401: "V4_9_4", 397: "V4_9_0", 395: "V4_8_0", 413: "V5_0_0"}


def routes() -> list[web.RouteDef]:
    return [web.get("/groups", groups_page), web.get("/group", group_page), web.get("/group/lag", lag_fragment),
            web.post("/group/reset", reset_offset)]


def check_group(name: str) -> str:
    """A group name as the broker checks it (its words, with "group" for "topic")."""
    problem = validate_topic(name)
    if problem is not None:
        raise FormError(problem.replace("topic", "group"))
    return name


def version_text(version: object) -> str:
    try:
        number = int(str(version))
    except ValueError:
        return str(version)
    return f"{KNOWN_VERSIONS[number]} ({number})" if number in KNOWN_VERSIONS else str(number)


async def groups_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    snap = await console.view.groups()
    query = request.query.get("q", "")[:200]
    sort = request.query.get("sort", "name")
    descending = request.query.get("dir") == "desc"
    kinds = frozenset({"normal", "system"}) if request.query.get("system") == "1" else frozenset({"normal"})
    rows = select(snap.groups, query=query, kinds=kinds, sort=sort, descending=descending, sorts=GROUP_SORTS)
    page = paginate(rows, query_int(request, "page", 1, 1, 1_000_000), console.config.page_size, len(snap.groups))
    template = "_groups_table.html" if is_htmx(request) and request.headers.get("HX-Target") == "group-table" \
        else "groups.html"
    return render(request, template, page="groups", rows=page, snap=snap, q=query, sort=sort,
                  dir="desc" if descending else "asc", system=request.query.get("system") == "1",
                  command=console.commands.sub_group_list())


async def group_lag(console: Any, group: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every queue the group has offsets for, on every master, with its lag; and the masters that failed."""
    addrs = await console.admin.master_addrs()
    answers = await asyncio.gather(*(api_ops.consume_stats(console.admin, a, group, None) for a in addrs),
                                   return_exceptions=True)
    entries: list[dict[str, Any]] = []
    errors = []
    for addr, answer in zip(addrs, answers, strict=True):
        if isinstance(answer, AdminError | rd.BodyDecodeError):
            errors.append(f"{addr}: {answer}")
        elif isinstance(answer, BaseException):
            raise answer
        else:
            entries.extend(api_ops.with_lag(answer))
    entries.sort(key=lambda e: (is_retry_topic(str(e["topic"])), e["topic"], e["brokerName"], e["queueId"]))
    return entries, errors


async def pop_counts(console: Any, group: str) -> list[dict[str, Any]]:
    out = []
    for addr in await console.admin.master_addrs():
        try:
            answer = await api_ops.pop_inflight(console.admin, addr, group)
        except AdminError as exc:
            out.append({"broker": addr, "text": f"error: {exc}", "rows": []})
            continue
        if answer is None:
            out.append({"broker": addr, "text": POP_UNSUPPORTED, "rows": []})
        else:
            out.append({"broker": addr, "text": str(answer.get("total", 0)),
                        "rows": list(answer.get("inflightTable") or [])})
    return out


async def clients_of(console: Any, group: str) -> tuple[dict[str, Any] | None, str]:
    try:
        data = await api_ops.consumer_connection(console.admin, group, await console.admin.master_addrs())
    except AdminError as exc:
        return None, str(exc)
    for conn in data.get("connectionSet") or []:
        conn["versionText"] = version_text(conn.get("version"))
    return data, ""


def _lag_context(entries: list[dict[str, Any]]) -> dict[str, Any]:
    main = [e for e in entries if not is_retry_topic(str(e["topic"]))]
    return {"entries": entries, "total_lag": sum(int(e["lag"]) for e in main),
            "retry_lag": sum(int(e["lag"]) for e in entries if is_retry_topic(str(e["topic"]))),
            "topics": sorted({str(e["topic"]) for e in main})}


async def group_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    group = check_group(request.query.get("name", ""))
    (entries, errors), pops, (clients, clients_error) = await asyncio.gather(
        group_lag(console, group), pop_counts(console, group), clients_of(console, group))
    snap = await console.view.groups()
    row = next((g for g in snap.groups if g.name == group), None)
    topics = sorted({*(_lag_context(entries)["topics"]), *(row.topics if row else ())})
    return render(request, "group.html", page="groups", group=group, row=row, errors=errors, pops=pops,
                  clients=clients, clients_error=clients_error, all_topics=topics, **_lag_context(entries),
                  commands=[console.commands.consumer_progress(group), console.commands.consumer_connection(group)])


async def lag_fragment(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    group = check_group(request.query.get("name", ""))
    entries, errors = await group_lag(console, group)
    return render(request, "_lag_table.html", group=group, errors=errors, **_lag_context(entries))


async def reset_offset(request: web.Request) -> web.StreamResponse:
    """``mode=time`` (a time) or ``mode=skip`` (the end of every queue); ``apply`` absent: a preview only."""
    console = console_of(request)
    form = await request.post()
    group = check_group(str(form.get("group", "")))
    topic = str(form.get("topic", ""))
    if validate_topic(topic) is not None:
        raise FormError(validate_topic(topic) or "")
    skip = form.get("mode") == "skip"
    timestamp = -1 if skip else parse_local_time(str(form.get("time", "")), "time")
    command = (console.commands.skip_accumulated(group, topic) if skip
               else console.commands.reset_offset(group, topic, timestamp))
    addrs = await api_ops.topic_masters(console.admin, topic)
    if form.get("apply") != "1":
        preview = await api_ops.reset_preview(console.admin, group, topic, timestamp, addrs)
        return render(request, "_reset_preview.html", group=group, topic=topic, preview=preview, skip=skip,
                      time=str(form.get("time", "")), command=command,
                      moved=sum(1 for p in preview if p["move"]), total=sum(p["move"] for p in preview))
    entries = await api_ops.reset_offset(console.admin, group, topic, timestamp, force=True, addrs=addrs)
    await console.view.group_cache.rebuild()
    details = [f"{e['brokerName']} queue {e['queueId']}: offset {e['offset']}" for e in entries]
    return action_result(request, ok=True, message=f"Offsets of {group} in {topic} reset on {len(addrs)} master(s).",
                         command=command, details=details)
