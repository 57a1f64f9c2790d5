"""``rmq-admin diskStatus``: for each broker, how full its disk is, whether it takes sends, how much of its
commit log retention can reclaim (expired, or consumed by every group) and which backlogs hold the rest, what
retention deleted since start, and what an operator can do about a disk that refuses sends.

Everything comes from GET_BROKER_RUNTIME_INFO (the keys of :mod:`pocketmq.broker.disk_status`, as of the broker's
last retention run); a broker too old to send them shows its ratio and writability only.
"""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.admin.api import AdminClient
from pocketmq.admin.output import Command, emit, table


def size(n: int) -> str:
    """Bytes for a reader: ``512 B``, ``16.0 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def _int(info: dict[str, str], key: str) -> int:
    try:
        return int(info.get(key, "0") or 0)
    except ValueError:
        return 0


def holders(text: str) -> list[dict[str, Any]]:
    """``topic@group=bytes/messages;...`` as rows."""
    rows = []
    for item in filter(None, text.split(";")):
        where, _, figures = item.rpartition("=")
        topic, _, group = where.rpartition("@")
        held, _, messages = figures.partition("/")
        rows.append({"topic": topic, "group": group, "bytes": int(held or 0), "messages": int(messages or 0)})
    return rows


def dropped(text: str) -> dict[str, int]:
    """``topic@group=messages;...`` as a mapping."""
    out: dict[str, int] = {}
    for item in filter(None, text.split(";")):
        where, _, count = item.rpartition("=")
        out[where] = int(count or 0)
    return out


def disk_status(info: dict[str, str]) -> dict[str, Any]:
    """One broker's disk figures from its runtime info."""
    return {
        "usedRatio": float(info.get("commitLogDiskRatio", "0") or 0),
        "totalBytes": _int(info, "commitLogDirTotalBytes"), "availableBytes": _int(info, "commitLogDirAvailableBytes"),
        "writable": info.get("storeWritable") == "true", "diskFull": info.get("diskFull") == "true",
        "diskFullReason": info.get("diskFullReason", ""),
        "commitLogBytes": _int(info, "commitLogMaxOffset") - _int(info, "commitLogMinOffset"),
        "reclaimableExpiredBytes": _int(info, "diskReclaimableExpiredBytes"),
        "reclaimableConsumedBytes": _int(info, "diskReclaimableConsumedBytes"),
        "heldBytes": _int(info, "diskHeldBytes"), "heldBy": holders(info.get("diskHeldByTopicGroup", "")),
        "holders": _int(info, "diskHolders"),
        "fileReservedTimeHours": info.get("fileReservedTime", ""),
        "cleanFileForciblyEnable": info.get("cleanFileForciblyEnable") == "true",
        "forcedClean": {"files": _int(info, "forcedCleanFiles"), "bytes": _int(info, "forcedCleanBytes"),
                        "dropped": dropped(info.get("forcedCleanDroppedByTopicGroup", ""))},
        "expiredDeleted": {"files": _int(info, "expiredDeletedFiles"), "bytes": _int(info, "expiredDeletedBytes"),
                           "dropped": dropped(info.get("expiredDroppedByTopicGroup", ""))},
        "reportTimestamp": _int(info, "diskReportTimestamp"),
    }


def advice(s: dict[str, Any]) -> list[str]:
    """What frees space, in the order that loses least."""
    out = []
    if s["reclaimableExpiredBytes"]:
        out.append(f"{size(s['reclaimableExpiredBytes'])} expired: retention deletes them at its next run once the "
                   "disk is above diskMaxUsedSpaceRatio (or at the deleteWhen hour)")
    if s["reclaimableConsumedBytes"]:
        out.append(f"{size(s['reclaimableConsumedBytes'])} consumed by every group but younger than "
                   f"fileReservedTime={s['fileReservedTimeHours']} h: restart with a lower fileReservedTime "
                   "to free them")
    if s["heldBy"]:
        top = s["heldBy"][0]
        out.append(f"the oldest backlog is {top['topic']}@{top['group']} ({top['messages']} messages, "
                   f"{size(top['bytes'])} of log from its oldest): consume it (or delete the group if it is gone)")
    if not s["writable"] and not out:
        out.append("nothing here is reclaimable: free space on the file system or grow it")
    return out


def render(addr: str, s: dict[str, Any]) -> str:
    """One broker's status as text."""
    lines = [f"== {addr}",
             f"disk        : {s['usedRatio']:.1%} used, {size(s['availableBytes'])} free of {size(s['totalBytes'])}",
             "sends       : " + ("taken" if s["writable"] else f"REFUSED ({s['diskFullReason'] or 'not writable'})"),
             f"commit log  : {size(s['commitLogBytes'])}",
             f"reclaimable : {size(s['reclaimableExpiredBytes'])} expired, "
             f"{size(s['reclaimableConsumedBytes'])} consumed by every group",
             f"held        : {size(s['heldBytes'])}"]
    forced = s["forcedClean"]
    state = "on" if s["cleanFileForciblyEnable"] else "off"
    lines.append(f"forced clean: {state} (cleanFileForciblyEnable); since start {forced['files']} files, "
                 f"{size(forced['bytes'])}, {sum(forced['dropped'].values())} unconsumed messages dropped")
    expired = s["expiredDeleted"]
    lines.append(f"expired     : since start {expired['files']} files, {size(expired['bytes'])}, "
                 f"{sum(expired['dropped'].values())} unconsumed messages dropped")
    if s["heldBy"]:
        lines += ["", table(["#Topic", "#Group", "#HeldBytes", "#Backlog"],
                            [[h["topic"], h["group"], size(h["bytes"]), h["messages"]] for h in s["heldBy"]])]
        if s["holders"] > len(s["heldBy"]):
            lines.append(f"... and {s['holders'] - len(s['heldBy'])} smaller backlogs (all on /metrics)")
    hints = advice(s)
    if hints:
        lines += [""] + [f"* {hint}" for hint in hints]
    return "\n".join(lines)


async def cmd_disk_status(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = [args.broker] if args.broker else [b.addr for b in await admin.brokers(args.cluster)]
    data = {addr: disk_status(await admin.runtime_info(addr)) for addr in addrs}
    emit(args, data if not args.broker else data[args.broker],
         "\n\n".join(render(addr, s) for addr, s in data.items()))


def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    s = sub.add_parser("diskStatus", parents=[common],
                       help="disk use, reclaimable bytes and the backlogs that hold the rest, per broker")
    s.add_argument("-b", "--broker", help="one broker address (default: every broker)")
    s.add_argument("-c", "--cluster")
    return {"diskStatus": cmd_disk_status}
