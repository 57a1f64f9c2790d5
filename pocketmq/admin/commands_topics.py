"""``rmq-admin updateTopicList``: create or change many topics at once (mqadmin 5's command of that name).

The topics come from ``-f FILE``, a JSON list of RocketMQ ``TopicConfig`` objects (what mqadmin reads), or are made
up with ``--prefix P --count N`` (``P0``..``P<N-1>`` with ``-r``/``-w``/``-p``); they go to ``-b`` one broker or
every master of ``-c`` (default: every master) with UPDATE_AND_CREATE_TOPIC_LIST, 1,000 a request
(:meth:`~pocketmq.admin.api.AdminClient.update_topic_list`).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from pocketmq.admin.api import TOPIC_LIST_CHUNK, AdminClient, AdminError
from pocketmq.admin.output import Command, emit, where_flags
from pocketmq.common.errors import FieldFormatError
from pocketmq.common.topic_config import TopicConfig

#: Most topics one command may create (the broker's own bound is 100,000 topics in all).
MAX_TOPICS = 100_000


def topics_from_file(path: str) -> list[TopicConfig]:
    """The ``TopicConfig`` list of a JSON file (AdminError when it is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            items = json.load(f)
    except (OSError, ValueError) as exc:
        raise AdminError(f"cannot read {path}: {exc}") from None
    if not isinstance(items, list):
        raise AdminError(f"{path}: expected a JSON list of topic configs")
    try:
        return [TopicConfig.from_json_dict(item) for item in items]
    except FieldFormatError as exc:
        raise AdminError(f"{path}: {exc}") from None


def topics_from_args(args: argparse.Namespace) -> list[TopicConfig]:
    if args.file:
        configs = topics_from_file(args.file)
    elif args.prefix and args.count:
        configs = [TopicConfig(f"{args.prefix}{i}", args.read_queues, args.write_queues, args.perm)
                   for i in range(args.count)]
    else:
        raise AdminError("give -f FILE, or --prefix and --count")
    if not 0 < len(configs) <= MAX_TOPICS:
        raise AdminError(f"between 1 and {MAX_TOPICS} topics at a time, not {len(configs)}")
    return configs


async def cmd_update_topic_list(admin: AdminClient, args: argparse.Namespace) -> None:
    configs = topics_from_args(args)
    started = time.perf_counter()
    addrs = await admin.update_topic_list(configs, cluster=args.cluster, broker_addr=args.broker, chunk=args.chunk)
    seconds = time.perf_counter() - started
    data: dict[str, Any] = {"topics": len(configs), "brokers": addrs, "seconds": round(seconds, 3)}
    emit(args, data, "\n".join(f"submit batch of {len(configs)} topic configs to {a} success." for a in addrs)
         + f"\n{len(configs)} topics in {seconds:.2f} s")


def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    s = sub.add_parser("updateTopicList", parents=[common], help="create or change many topics at once")
    where_flags(s)
    s.add_argument("-f", "--file", help="JSON list of TopicConfig objects")
    s.add_argument("--prefix", help="make up --count topics named <prefix>0, <prefix>1, ...")
    s.add_argument("--count", type=int, default=0)
    s.add_argument("-r", "--read-queues", type=int, default=8)
    s.add_argument("-w", "--write-queues", type=int, default=8)
    s.add_argument("-p", "--perm", type=int, default=6)
    s.add_argument("--chunk", type=int, default=TOPIC_LIST_CHUNK, help="topics per request (1000)")
    return {"updateTopicList": cmd_update_topic_list}
