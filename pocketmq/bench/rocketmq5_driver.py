"""The load of ``rmq-bench grpc``, driven by the official RocketMQ 5 Python client: run with the interpreter of its
own environment (:mod:`pocketmq.bench.official_client`), never imported by PocketMQ.

    python rocketmq5_driver.py lone '<json>'      sequential sends, one at a time: latency of each (ms)
    python rocketmq5_driver.py inflight '<json>'  ``inflight`` sends in flight (send_async) for ``duration`` s

Prints one JSON object on its last line.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def _producer(args: dict[str, Any]) -> Any:
    producer = Producer(ClientConfiguration(args["endpoints"], Credentials()), (args["topic"],))
    producer.startup()
    return producer


def _message(args: dict[str, Any], body: bytes) -> Any:
    msg = Message()
    msg.topic = args["topic"]
    msg.body = body
    return msg


def lone(args: dict[str, Any]) -> dict[str, Any]:
    producer = _producer(args)
    body = b"x" * args["body"]
    latencies = []
    try:
        for _ in range(args["warmup"]):
            producer.send(_message(args, body))
        for _ in range(args["count"]):
            started = time.perf_counter()
            producer.send(_message(args, body))
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        producer.shutdown()
    return {"latencies_ms": latencies}


def inflight(args: dict[str, Any]) -> dict[str, Any]:
    producer = _producer(args)
    body = b"x" * args["body"]
    slots = threading.Semaphore(args["inflight"])
    done = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def finished(future: Any) -> None:
        with lock:
            done["failed" if future.exception() is not None else "ok"] += 1
        slots.release()

    try:
        for _ in range(args["warmup"]):
            producer.send(_message(args, body))
        sys.stdout.write("STARTED\n")
        sys.stdout.flush()
        started = time.perf_counter()
        deadline = started + args["duration"]
        while time.perf_counter() < deadline:
            slots.acquire()
            producer.send_async(_message(args, body)).add_done_callback(finished)
        for _ in range(args["inflight"]):
            slots.acquire()
        elapsed = time.perf_counter() - started
    finally:
        producer.shutdown()
    return {**done, "elapsed_s": elapsed}


def main() -> int:
    result = {"lone": lone, "inflight": inflight}[sys.argv[1]](json.loads(sys.argv[2]))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
