"""``rmq-bench tx``: transactional sends through the SDK beside plain sends, and the latency a commit adds.

Without ``--namesrv`` it starts its own name server and ASYNC_MASTER / ASYNC_FLUSH broker (processes, as
``rmq-bench produce`` does) and creates the topic. Three phases, one after the other:

* ``plain`` — ``--senders`` tasks awaiting ``Producer.send`` for ``--duration`` seconds: TPS, p50/p99 latency
  (concurrent sends are coalesced into batches, the SDK's default);
* ``single`` — the same with ``auto_batch=False``: one request per message, as a half message always is;
* ``tx``    — the same with ``TransactionProducer.send_message_in_transaction`` and a listener that commits at
  once: each transaction is a half-message send (answered), the local transaction (nothing) and a oneway
  END_TRANSACTION; TPS and p50/p99 of the whole call;
* ``visible`` — ``--samples`` sequential transactions; after each, GET_MAX_OFFSET is asked on the message's queue
  until the committed message is there: the time from the call's return to the message being readable, i.e. what
  END_TRANSACTION (its trip, the committed message and the op record) adds after the producer is done.

Bounded by ``--duration`` per phase and ``--samples``; latencies are kept in float32 arrays of at most
``--max-latencies`` entries. ``--json`` prints the summary as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from array import array
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from pocketmq.bench.common import create_topic, local_cluster, percentiles
from pocketmq.client.core.message import Message, SendResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.producer import Producer
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from pocketmq.common.logs import configure_logging
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--senders", type=int, default=64, help="concurrent sender tasks (64)")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes (1024)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of the plain and tx phases (10)")
    parser.add_argument("--samples", type=int, default=300, help="sequential transactions of the visible phase")
    parser.add_argument("--max-latencies", type=int, default=2_000_000, help="latencies kept per phase at most")
    parser.add_argument("--topic", default="BenchmarkTx")
    parser.add_argument("--namesrv", metavar="ADDR", help="use this cluster instead of starting one")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic in our own cluster (8)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


class _Commit:
    """Commits every local transaction at once; a check-back also commits."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        return TransactionState.COMMIT

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        return TransactionState.COMMIT


def run(args: argparse.Namespace) -> int:
    if args.senders < 1 or args.senders > 10_000 or args.samples < 1 or args.duration <= 0 or args.size < 1:
        print("rmq-bench tx: --senders 1..10000, --samples >= 1, --duration > 0, --size >= 1", file=sys.stderr)
        return 2
    configure_logging("console", "ERROR")
    args.pin, args.keep_dir = False, False
    with contextlib.ExitStack() as stack:
        if args.namesrv:
            namesrv, broker_addr = args.namesrv, None
        else:
            cluster = stack.enter_context(local_cluster(args, "tx"))
            namesrv, broker_addr = cluster.namesrv, cluster.broker.addr
        summary = uvloop.run(_bench(args, namesrv, broker_addr))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for phase in ("plain", "single", "tx"):
            s = summary[phase]
            print(f"{phase:>7}: {s['tps']:>9.0f} msg/s  p50 {s['p50_ms']:.2f} ms  p99 {s['p99_ms']:.2f} ms  "
                  f"({s['sent']} sent, {s['failed']} failed, {args.senders} senders)")
        v = summary["visible"]
        print(f"visible: commit readable p50 {v['p50_ms']:.2f} ms  p99 {v['p99_ms']:.2f} ms after the call returned "
              f"({v['samples']} sequential transactions)")
        print(f"tx/single throughput {summary['tx']['tps'] / max(summary['single']['tps'], 1e-9):.2f}; "
              f"added p50 latency {summary['tx']['p50_ms'] - summary['single']['p50_ms']:.2f} ms")
    return 0



async def _bench(args: argparse.Namespace, namesrv: str, broker_addr: str | None) -> dict[str, Any]:
    if broker_addr is not None:
        await create_topic(broker_addr, args.topic, args.queues)
    body = b"x" * args.size
    plain = Producer("bench_plain", namesrv_addr=namesrv, instance_name="bench-plain")
    single = Producer("bench_single", namesrv_addr=namesrv, instance_name="bench-single", auto_batch=False)
    tx = TransactionProducer("bench_tx", _Commit(), namesrv_addr=namesrv, instance_name="bench-tx")
    async with plain, single, tx:
        await plain.send(Message(args.topic, body))  # routes and connections before measuring
        await single.send(Message(args.topic, body))
        await tx.send_message_in_transaction(Message(args.topic, body))
        summary = {"plain": await _phase(args, lambda: plain.send(Message(args.topic, body))),
                   "single": await _phase(args, lambda: single.send(Message(args.topic, body))),
                   "tx": await _phase(args, lambda: _tx_send(tx, Message(args.topic, body)))}
        summary["visible"] = await _visible(args, tx, body)
    return summary


async def _tx_send(producer: TransactionProducer, msg: Message) -> SendResult:
    return (await producer.send_message_in_transaction(msg)).send_result


async def _phase(args: argparse.Namespace, send: Callable[[], Awaitable[SendResult]]) -> dict[str, Any]:
    latencies = array("f")
    counts = {"sent": 0, "failed": 0}
    end = time.perf_counter() + args.duration

    async def sender() -> None:
        while time.perf_counter() < end:
            began = time.perf_counter()
            try:
                await send()
            except Exception:
                counts["failed"] += 1
                continue
            counts["sent"] += 1
            if len(latencies) < args.max_latencies:
                latencies.append((time.perf_counter() - began) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(args.senders)))
    elapsed = time.perf_counter() - started
    p = percentiles(latencies) if latencies else {"p50": 0.0, "p99": 0.0}
    return {"tps": counts["sent"] / elapsed, "p50_ms": p["p50"], "p99_ms": p["p99"], **counts}


async def _visible(args: argparse.Namespace, producer: TransactionProducer, body: bytes) -> dict[str, Any]:
    waits = array("f")
    client = RemotingClient()
    await asyncio.sleep(1.0)  # the tx phase's last END_TRANSACTIONs are applied
    ends: dict[tuple[str, int], int] = {}
    info = producer.publish_info(args.topic)
    try:
        for queue in info.message_queues if info is not None else ():
            addr = producer.instance.routes.master_table[queue.broker_name]
            ends[(queue.broker_name, queue.queue_id)] = await _max_offset(
                client, addr, {"topic": args.topic, "queueId": str(queue.queue_id)})
        for _ in range(args.samples):
            result = (await producer.send_message_in_transaction(Message(args.topic, body))).send_result
            returned = time.perf_counter()
            mq = result.message_queue
            addr = producer.instance.routes.master_table[mq.broker_name]
            fields = {"topic": args.topic, "queueId": str(mq.queue_id)}
            key = (mq.broker_name, mq.queue_id)
            while (offset := await _max_offset(client, addr, fields)) <= ends.get(key, 0):
                pass
            ends[key] = offset
            waits.append((time.perf_counter() - returned) * 1000)
    finally:
        await client.close()
    p = percentiles(waits)
    return {"samples": len(waits), "p50_ms": p["p50"], "p99_ms": p["p99"], "max_ms": p["max"]}


async def _max_offset(client: RemotingClient, addr: str, fields: dict[str, str]) -> int:
    answer = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, fields))
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"GET_MAX_OFFSET: {answer.code} {answer.remark}")
    return int((answer.ext_fields or {}).get("offset", "0"))
