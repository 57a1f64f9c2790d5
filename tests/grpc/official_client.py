"""Scenarios of the official RocketMQ 5 Python client (``rocketmq-python-client``), run *unmodified* in a virtual
environment of its own (``tests/grpc/official.py`` makes it): never imported by pytest, run as a script.

    python official_client.py <scenario> '<json arguments>'

Each scenario prints one JSON object on its last stdout line. Timestamps are epoch milliseconds. The scenarios
bound every wait; the caller kills the process if it outlives its own timeout.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def config(args: dict[str, Any]) -> Any:
    credentials = Credentials(args.get("ak", ""), args.get("sk", ""))
    return ClientConfiguration(args["endpoints"], credentials, request_timeout=args.get("request_timeout", 3))


def build(args: dict[str, Any], i: int) -> Any:
    msg = Message()
    msg.topic = args["topic"]
    msg.body = (args.get("body_prefix", "body-") + str(i)).encode() * args.get("body_repeat", 1)
    if args.get("tag"):
        msg.tag = args["tag"]
    if args.get("keys"):
        msg.keys = f"{args['keys']}-{i}"
    for key, value in args.get("properties", {}).items():
        msg.add_property(key, value)
    if args.get("kind") == "fifo":
        groups = args.get("groups", 1)
        msg.message_group = f"group-{i % groups}"
    if args.get("kind") == "delay":
        msg.delivery_timestamp = int(time.time()) + int(args["delay_s"])
    return msg


class Checker(TransactionChecker):  # type: ignore[misc]  # the client ships no types
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Any) -> Any:
        self.checked.append(message.message_id)
        return TransactionResolution.COMMIT


def receipt(result: Any, sent_ms: int, i: int) -> dict[str, Any]:
    return {"i": i, "message_id": result.message_id, "transaction_id": result.transaction_id,
            "offset": result.offset, "sent_ms": sent_ms}


def produce(args: dict[str, Any]) -> dict[str, Any]:
    """Send ``count`` messages of ``kind`` (normal, fifo, delay, tx); tx: ``commit`` commits, else leaves it open and
    waits for the broker's check-back (the checker commits); ``recall_every`` n: recall every n-th message sent (by
    its receipt's recall handle)."""
    checker = Checker()
    producer = Producer(config(args), (args["topic"],), checker if args.get("kind") == "tx" else None,
                        tls_enable=args.get("tls", False))
    producer.startup()
    sent, errors, recalled = [], [], []
    try:
        deadline = time.monotonic() + args.get("duration_s", 0)
        i = 0
        while i < args.get("count", 0) or time.monotonic() < deadline:
            msg = build(args, i)
            sent_ms = now_ms()
            try:
                if args.get("kind") == "tx":
                    tx = producer.begin_transaction()
                    result = producer.send(msg, tx)
                    if args.get("commit", True):
                        tx.commit()
                else:
                    result = producer.send(msg)
                sent.append(receipt(result, sent_ms, i))
                if args.get("recall_every") and i % args["recall_every"] == 0:
                    recalled.append(producer.recall_message(args["topic"], result.recall_handle))
            except Exception as exc:  # recorded: the caller asserts on what was and was not acknowledged
                errors.append({"i": i, "error": repr(exc)[:300]})
            i += 1
            if args.get("pause_s"):
                time.sleep(args["pause_s"])
        check_deadline = time.monotonic() + args.get("wait_check_s", 0)
        while len(checker.checked) < len(sent) and time.monotonic() < check_deadline:
            time.sleep(0.1)
        time.sleep(args.get("linger_s", 0))
    finally:
        producer.shutdown()
    return {"sent": sent, "errors": errors, "checked": checker.checked, "recalled": recalled}


def message_record(msg: Any) -> dict[str, Any]:
    return {"message_id": msg.message_id, "topic": msg.topic, "body": msg.body.decode(errors="replace"),
            "tag": msg.tag, "keys": sorted(msg.keys), "properties": dict(msg.properties),
            "message_group": msg.message_group, "born_ms": msg.born_timestamp, "born_host": msg.born_host,
            "attempt": msg.delivery_attempt, "received_ms": now_ms(), "delivery_ms": msg.delivery_timestamp}


def simple(args: dict[str, Any]) -> dict[str, Any]:
    """Receive until ``want`` messages were seen (or ``timeout_s``); ``mode``: ack every message; ``leave-one``: leave
    the first unacked and wait for it to come back; ``change``: change every message's invisible duration to
    ``change_s`` first, then ack the redelivery."""
    consumer = SimpleConsumer(config(args), args["group"], {args["topic"]: FilterExpression(args.get("filter", "*"))},
                              await_duration=args.get("await_s", 5))
    consumer.startup()
    got: list[dict[str, Any]] = []
    mode = args.get("mode", "ack")
    left: set[str] = set()
    changed: dict[str, int] = {}
    errors: list[str] = []
    try:
        deadline = time.monotonic() + args["timeout_s"]
        while time.monotonic() < deadline and len([g for g in got if g["acked"]]) < args["want"]:
            for msg in consumer.receive(args.get("batch", 16), args.get("invisible_s", 15)):
                record = message_record(msg)
                record["acked"] = False
                got.append(record)
                if mode == "leave-one" and not left:
                    left.add(msg.message_id)
                    continue
                if mode == "change" and msg.message_id not in changed:
                    consumer.change_invisible_duration(msg, args["change_s"])
                    changed[msg.message_id] = now_ms()
                    continue
                try:
                    consumer.ack(msg)
                    record["acked"] = True
                except Exception as exc:
                    errors.append(repr(exc)[:300])
    finally:
        consumer.shutdown()
    return {"received": got, "changed": changed, "errors": errors}


class Recorder(MessageListener):  # type: ignore[misc]  # the client ships no types
    def __init__(self, fail_first: int, hold_first_s: float) -> None:
        self.lock = threading.Lock()
        self.got: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.hold_first_s = hold_first_s

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.got.append(message_record(message))
            hold, self.hold_first_s = self.hold_first_s, 0
            if self.fail_first > 0:
                self.fail_first -= 1
                return ConsumeResult.FAILURE
        time.sleep(hold)  # a slow listener: the message stays held (its handle renewed) meanwhile
        return ConsumeResult.SUCCESS


def push(args: dict[str, Any]) -> dict[str, Any]:
    """A PushConsumer until ``want`` messages arrived and ``quiet_s`` passed without another (or ``timeout_s``)."""
    recorder = Recorder(args.get("fail_first", 0), args.get("hold_first_s", 0))
    consumer = PushConsumer(config(args), args["group"], recorder, {args["topic"]: FilterExpression(args.get("filter",
                                                                                                            "*"))})
    consumer.startup()
    try:
        deadline = time.monotonic() + args["timeout_s"]
        last_count, last_change = 0, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            with recorder.lock:
                count = len(recorder.got)
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            if count >= args["want"] and time.monotonic() - last_change >= args.get("quiet_s", 2):
                break
        fifo = consumer.fifo
    finally:
        consumer.shutdown()
    return {"received": recorder.got, "fifo": fifo}


SCENARIOS = {"produce": produce, "simple": simple, "push": push}


def main() -> int:
    result = SCENARIOS[sys.argv[1]](json.loads(sys.argv[2]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
