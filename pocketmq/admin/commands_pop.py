"""``rmq-admin`` commands for RocketMQ 5's POP and timers, read from each master's runtime info
(GET_BROKER_RUNTIME_INFO):

* ``popStatus``: messages in flight per consumer group (popped, not acked or revived yet), the revive backlog
  (past their invisible time, not revived yet), and the POP counters since the broker started;
* ``timerStatus``: timer messages pending, how far the oldest is overdue, deliveries since start, and the
  lateness (stored minus due, ms) of the recent deliveries at p50, p99 and max.
"""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.admin.api import AdminClient
from pocketmq.admin.output import Command, emit, table

_POP_COUNTERS = ("Popped", "Acked", "Changed", "Revived", "DeadLettered")


async def cmd_pop_status(admin: AdminClient, args: argparse.Namespace) -> None:
    groups: list[list[Any]] = []
    brokers: list[list[Any]] = []
    data: list[dict[str, Any]] = []
    for addr in await admin.master_addrs(args.cluster, args.broker):
        info = await admin.runtime_info(addr)
        by_group = {}
        for item in filter(None, info.get("popInflightByGroup", "").split(";")):
            group, _, count = item.rpartition("=")
            by_group[group] = int(count)
            if args.group is None or args.group == group:
                groups.append([addr, group, count])
        counters = {name: int(info.get(f"popMessages{name}", "0")) for name in _POP_COUNTERS}
        backlog = int(info.get("popReviveBacklog", "0"))
        brokers.append([addr, info.get("popInflight", "0"), backlog, *counters.values()])
        data.append({"broker": addr, "inflightByGroup": by_group, "reviveBacklog": backlog, **counters})
    text = (table(["#Broker", "#Group", "#InFlight"], groups) + "\n\n"
            + table(["#Broker", "#InFlight", "#ReviveBacklog", *(f"#{n}" for n in _POP_COUNTERS)], brokers))
    emit(args, data, text)


async def cmd_timer_status(admin: AdminClient, args: argparse.Namespace) -> None:
    rows: list[list[Any]] = []
    data: list[dict[str, Any]] = []
    for addr in await admin.master_addrs(args.cluster, args.broker):
        info = await admin.runtime_info(addr)
        entry = {"broker": addr, "pending": int(info.get("timerPending", "0")),
                 "overdueMs": int(info.get("timerOverdueMs", "0")), "fired": int(info.get("timerFired", "0")),
                 **{f"lateness{q}Ms": info.get(f"timerLateness{q}Ms", "") for q in ("P50", "P99", "Max")}}
        data.append(entry)
        rows.append(list(entry.values()))
    emit(args, data, table(["#Broker", "#Pending", "#OverdueMs", "#Fired", "#LateP50Ms", "#LateP99Ms",
                            "#LateMaxMs"], rows))


def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    pop = sub.add_parser("popStatus", parents=[common], help="POP messages in flight per group, revive backlog")
    pop.add_argument("-g", "--group", help="only this consumer group")
    timer = sub.add_parser("timerStatus", parents=[common], help="pending timer messages and their lateness")
    for parser in (pop, timer):
        parser.add_argument("-b", "--broker", help="one master address (default: every master)")
        parser.add_argument("-c", "--cluster")
    return {"popStatus": cmd_pop_status, "timerStatus": cmd_timer_status}
