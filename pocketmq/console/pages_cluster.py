"""The Cluster page (every broker by group: role, epoch, address, version, disk, TPS, replication), its live
charts' data, and the read-only Backlogs page (pending transactions, timer messages).

One GET_BROKER_RUNTIME_INFO per broker (they are asked at once); the chart data come from
:meth:`~pocketmq.console.view.ClusterView.series`. ``masterEpoch`` (or ``epoch``) is shown when a broker reports
it (controller mode); replication lag is the master's own account of each attached slave (``haSlaveN``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminError
from pocketmq.console.view import first_rate
from pocketmq.console.web import console_of, json_answer, render
from pocketmq.remoting import route as rd


def routes() -> list[web.RouteDef]:
    return [web.get("/", cluster_page), web.get("/api/series", series), web.get("/backlogs", backlogs_page)]


def _slaves(info: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for key in sorted(k for k in info if k.startswith("haSlave") and k[7:].isdigit()):
        fields = dict(part.partition("=")[::2] for part in info[key].split(","))
        out.append(fields)
    return out


def replication_text(info: dict[str, str]) -> str:
    """A master: each slave's lag in bytes and ms; a slave: whether it is connected to its master."""
    if "haMasterConnected" in info:
        if info.get("haMasterConnected") != "true":
            return "not connected to its master"
        return f"connected, master silent {info.get('haMasterSilentMs', '?')} ms"
    slaves = _slaves(info)
    if not slaves:
        return "no slave attached" if "haConnectionCount" in info else "-"
    return "; ".join(f"{s.get('lagBytes', '?')} B / {s.get('lagMs', '?')} ms behind" for s in slaves)


def broker_row(cluster: str, broker_name: str, broker_id: int, addr: str, info: dict[str, str] | str) -> dict[str, Any]:
    row: dict[str, Any] = {"cluster": cluster, "broker": broker_name, "id": broker_id, "addr": addr}
    if isinstance(info, str):
        return {**row, "error": info}
    ratio = info.get("commitLogDiskRatio")
    return {**row, "error": "", "role": info.get("brokerRole", "?"),
            "epoch": info.get("masterEpoch") or info.get("epoch") or "",
            "version": info.get("brokerVersionDesc", info.get("brokerVersion", "?")),
            "disk": f"{float(ratio) * 100:.1f} %" if ratio else "-",
            "disk_detail": info.get("commitLogDirCapacity", ""),
            "put_tps": first_rate(info.get("putTps")), "get_tps": first_rate(info.get("getTransferedTps")),
            "replication": replication_text(info), "runtime": info.get("runtime", ""),
            "disk_full": info.get("diskFull") == "true"}


async def cluster_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    console.view.viewed()
    info = await console.admin.cluster_info()
    members = [(cluster, name, bid, addr) for cluster, names in sorted(info.cluster_addr_table.items())
               for name in sorted(names) if name in info.broker_addr_table
               for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items())]
    infos = await asyncio.gather(*(console.view.runtime_info(addr) for _c, _n, _b, addr in members))
    rows = [broker_row(c, n, b, a, i) for (c, n, b, a), i in zip(members, infos, strict=True)]
    topics, snap = await asyncio.gather(console.view.topics(), console.view.groups())
    return render(request, "cluster.html", page="cluster", rows=rows, snap=snap,
                  series=json.dumps(console.view.series(), separators=(",", ":")),
                  namesrvs=console.admin.namesrv_addrs, command=console.commands.cluster_list(),
                  normal_topics=sum(1 for t in topics.topics if t.kind == "normal"),
                  normal_groups=sum(1 for g in snap.groups if g.kind == "normal"))


async def series(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    console.view.viewed()
    return json_answer(console.view.series())


def pending_transactions(addr: str, info: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for item in filter(None, info.get("transactionHalfPendingByTopicGroup", "").split(";")):
        where, _, count = item.rpartition("=")
        topic, _, group = where.partition("@")
        out.append({"broker": addr, "topic": topic, "producerGroup": group, "pending": int(count or 0)})
    return out


async def _timer(console: Any, addr: str) -> dict[str, int] | str | None:
    try:
        return await api_ops.timer_metrics(console.admin, addr)
    except (AdminError, rd.BodyDecodeError) as exc:
        return str(exc)


async def backlogs_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    addrs = await console.admin.master_addrs()
    infos = await asyncio.gather(*(console.view.runtime_info(a) for a in addrs))
    timers = await asyncio.gather(*(_timer(console, a) for a in addrs))
    tx: list[dict[str, Any]] = []
    errors = []
    for addr, info in zip(addrs, infos, strict=True):
        if isinstance(info, str):
            errors.append(info)
        else:
            tx.extend(pending_transactions(addr, info))
    timer_rows = [{"broker": a, "state": t} for a, t in zip(addrs, timers, strict=True)]
    return render(request, "backlogs.html", page="backlogs", tx=tx, timers=timer_rows, errors=errors,
                  command=console.commands.tx_pending())
