"""``rmq-bench filter``: what a SQL92 subscription costs per message on the broker.

An in-process broker (``enablePropertyFilter=true``, ASYNC_FLUSH, in a temporary directory) gets a backlog of
``--backlog`` messages (default 200,000, ``--size`` 64-byte bodies) on a one-queue topic, each with a tag
``t0``..``t9`` and properties ``n`` (0..9) and ``region``. Then the backlog is drained over the wire with
``PULL_MESSAGE`` (32 per pull, the SUBSCRIPTION flag) four times, for four subscriptions:

* ``*`` (TAG: no filter; 200,000 messages delivered),
* ``region = 'eu'`` (SQL92 that every message passes: the same delivery, plus a check of each message),
* ``n = 3 AND region = 'eu'`` (SQL92, 10 % selective; every message's properties are read and evaluated),
* ``TAGS = 't3' AND n = 3`` (SQL92, 10 %, but the tag code decides first: 90 % are never read back).

Reported per run: wall time, messages scanned per second, messages delivered, and the time per scanned message.
The filter's cost per message is the 100 % run's time per message minus the no-filter run's (same delivery).
Plus micro-figures: one ``Selector.matches`` on a dict, and one record check
(properties decoded from the stored record and evaluated). The client runs in the broker's event loop, so the
figures include its side of each pull (no message decoding: bodies are counted, not parsed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import uvloop

from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.filter import SqlMessageFilter
from pocketmq.client import Message, Producer
from pocketmq.common.filter import compile_selector
from pocketmq.common.message import encode_properties
from pocketmq.common.record_encoder import encode_record
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader

TOPIC = "FilterBench"
RUNS = (("no filter (TAG *)", "*", "TAG"), ("SQL92 100 %", "region = 'eu'", "SQL92"),
        ("SQL92 10 %", "n = 3 AND region = 'eu'", "SQL92"),
        ("SQL92 10 %, tags first", "TAGS = 't3' AND n = 3", "SQL92"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backlog", type=int, default=200_000, help="messages in the backlog (200,000)")
    parser.add_argument("--size", type=int, default=64, help="body bytes (64)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    summary = uvloop.run(_main(args.backlog, args.size))
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


async def _main(backlog: int, size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="filter-bench-") as tmp:
        ns = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", listen_port=0,
                                             kv_config_path=str(Path(tmp) / "kv.json")))
        await ns.start()
        config = load_broker_config({"enablePropertyFilter": "true"}, broker_name="bench", namesrv_addr=ns.addr,
                                    listen_port=0, listen_host="127.0.0.1", store_path_root_dir=str(Path(tmp) / "b"),
                                    disk_max_used_space_ratio=100, disk_space_clean_forcibly_ratio=100,
                                    disk_space_warning_level_ratio=100)
        broker = BrokerController(config)
        await broker.start()
        client = RemotingClient()
        try:
            await _fill(ns.addr, broker, backlog, size)
            runs = {label: await _drain(client, broker.addr, backlog, expression, kind)
                    for label, expression, kind in RUNS}
        finally:
            await client.close()
            await broker.stop()
            await ns.stop()
    micro = _micro()
    summary: dict[str, Any] = {"backlog": backlog, "runs": runs, "micro": micro}
    for label, figures in runs.items():
        print(f"{label:26s} {figures['seconds']:7.2f} s  {figures['scanned_per_s']:9.0f} scanned/s  "
              f"{figures['delivered']:7d} delivered  {figures['us_per_scanned']:6.2f} µs/scanned")
    for label, us in micro.items():
        print(f"{label:40s} {us:6.2f} µs")
    return summary


async def _fill(namesrv: str, broker: BrokerController, backlog: int, size: int) -> None:
    body = b"x" * size
    async with Producer("FilterBenchPG", namesrv_addr=namesrv) as producer:
        await _create_topic(broker.addr)
        batch: list[Message] = []
        for i in range(backlog):
            batch.append(Message(TOPIC, body, tags=f"t{i % 10}", properties={"n": str(i % 10), "region": "eu"}))
            if len(batch) == 256 or i == backlog - 1:
                await producer.send_batch(batch)
                batch = []


async def _create_topic(addr: str) -> None:
    client = RemotingClient()
    try:
        fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
        assert resp.code == ResponseCode.SUCCESS, resp
    finally:
        await client.close()


async def _drain(client: RemotingClient, addr: str, backlog: int, expression: str, kind: str) -> dict[str, float]:
    offset, delivered, pulls = 0, 0, 0
    started = time.perf_counter()
    while offset < backlog:
        header = PullMessageRequestHeader("FilterBenchCG", TOPIC, 0, offset, 32, 0x4, -1, 0, 0, expression, kind)
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields()), 30)
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            raise RuntimeError(f"pull failed: {resp}")
        delivered += _count(bytes(resp.body or b""))
        offset = int(resp.field("nextBeginOffset") or offset)
        pulls += 1
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "pulls": pulls, "delivered": delivered, "scanned_per_s": backlog / seconds,
            "us_per_scanned": seconds / backlog * 1e6}


def _count(body: bytes) -> int:
    count, pos = 0, 0
    while pos + 4 <= len(body):
        count, pos = count + 1, pos + int.from_bytes(body[pos:pos + 4], "big")
    return count


def _micro() -> dict[str, float]:
    selector = compile_selector("n = 3 AND region = 'eu'")
    props = {"n": "7", "region": "eu", "TAGS": "t7", "UNIQ_KEY": "7F000001000000000000000000000000"}
    loops = 200_000
    per_match = timeit.timeit(lambda: selector.matches(props), number=loops) / loops * 1e6
    record = memoryview(encode_record(topic=TOPIC, body=b"x" * 64, properties=encode_properties(props)))
    check = SqlMessageFilter(selector).record_filter
    per_record = timeit.timeit(lambda: check(record), number=loops) / loops * 1e6
    return {"Selector.matches (dict, 2 comparisons)": per_match, "record check (decode + evaluate)": per_record}
