"""``make demo``: the seeds' high-availability story, end to end, with real processes.

1. start a 2m-2s-sync cluster with two name servers (:class:`pocketmq.admin.cluster.LocalCluster`, free ports);
2. produce continuously over both broker groups with the SDK's ``Producer`` (latency fault tolerance on);
3. SIGKILL broker-a's master; sends go on to broker-b, with no failed send once broker-a is isolated;
4. read broker-a's acknowledged messages back from its slave;
5. restart the master; stop producing; read everything back and print the summary
   (sent, acknowledged, consumed, lost — lost must be 0 for SEND_OK messages).

Consuming uses the broker's PULL_MESSAGE protocol directly (queue by queue from offset 0), so the demo
depends on nothing but the producer SDK. Exit status 0 when nothing acknowledged was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pocketmq.admin.api import AdminClient
from pocketmq.admin.cluster import LocalCluster
from pocketmq.client import Message, Producer
from pocketmq.client.core.message import SendStatus
from pocketmq.common.logs import configure_logging
from pocketmq.common.record import decode_records
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader

TOPIC = "DemoOrders"
QUEUES = 4
#: The demo's brokers use 64 MiB commit-log files (RocketMQ's 1 GiB default would pre-allocate 8 GiB for four).
DEMO_BROKER_PROPERTIES = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024)}
#: Fault isolation as the SDK does it, with isolation periods capped at 3 s instead of up to 10 minutes, so that
#: the restarted master is used again within the demo (the rule is the same: a failure isolates the broker).
DEMO_NOT_AVAILABLE_MS = (0, 0, 3000, 3000, 3000, 3000, 3000)


def say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


class Traffic:
    """A producer loop; remembers every acknowledged body per broker group and every failure."""

    def __init__(self, producer: Producer, interval: float) -> None:
        self.producer = producer
        self.interval = interval
        self.sent = 0
        self.acked: dict[str, set[bytes]] = {"broker-a": set(), "broker-b": set()}
        self.stored_not_ok: Counter[str] = Counter()
        self.failures: list[float] = []
        self.running = True

    async def run(self) -> None:
        while self.running:
            body = f"order-{self.sent:06d}".encode()
            self.sent += 1
            try:
                result = await self.producer.send(Message(TOPIC, body, keys=body.decode()))
            except Exception:
                self.failures.append(time.monotonic())
            else:
                if result.status is SendStatus.SEND_OK:
                    self.acked[result.message_queue.broker_name].add(body)
                else:
                    self.stored_not_ok[result.status.name] += 1
            await asyncio.sleep(self.interval)

    def line(self) -> str:
        a, b = len(self.acked["broker-a"]), len(self.acked["broker-b"])
        return (f"sent {self.sent}  acked broker-a {a}  broker-b {b}"
                f"  failed {len(self.failures)}  stored-not-ok {sum(self.stored_not_ok.values())}")


async def pull_all(client: RemotingClient, addr: str) -> set[bytes]:
    """Every message of TOPIC on the broker at ``addr``, read with PULL_MESSAGE from offset 0."""
    bodies: set[bytes] = set()
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            header = PullMessageRequestHeader("demo-consumer", TOPIC, queue_id, offset, 32, 0x4, -1, 0, 0, "*")
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields()))
            if resp.code != ResponseCode.SUCCESS:
                break
            records = list(decode_records(bytes(resp.body or b"")))
            if not records:
                break
            bodies.update(r.body for r in records)
            offset = records[-1].queue_offset + 1
    return bodies


async def progress(traffic: Traffic, seconds: float, until: Callable[[], bool] = lambda: True,
                   limit: float = 30.0) -> None:
    """Print a line a second for ``seconds``, then on until ``until()`` holds (at most ``limit`` s more)."""
    start = time.monotonic()
    while True:
        await asyncio.sleep(1.0)
        say(traffic.line())
        elapsed = time.monotonic() - start
        if elapsed >= seconds and (until() or elapsed >= seconds + limit):
            return




async def demo(base_dir: Path, phase: float) -> int:
    say("starting 2 name servers and the 2m-2s-sync preset (4 brokers) ...")
    cluster = LocalCluster("2m-2s-sync", base_dir=base_dir, namesrv_count=2, ephemeral_ports=True, log_format="json",
                           overrides=DEMO_BROKER_PROPERTIES)
    await cluster.start()
    client = RemotingClient()
    try:
        print(cluster.summary(), flush=True)
        async with AdminClient(cluster.namesrv_addrs) as admin:
            await admin.update_topic(TOPIC, read_queues=QUEUES, write_queues=QUEUES)
        say(f"topic {TOPIC} created on both masters ({QUEUES} queues each)")
        async with Producer("demo-producer", namesrv_addr=cluster.namesrv_addr, poll_name_server_interval=5.0,
                            not_available_duration=DEMO_NOT_AVAILABLE_MS) as producer:
            traffic = Traffic(producer, interval=0.005)
            task = asyncio.get_running_loop().create_task(traffic.run())
            say("producing over both broker groups ...")
            await progress(traffic, phase, until=lambda: min(len(v) for v in traffic.acked.values()) >= 50)
            master_a = cluster.broker("broker-a")
            slave_a = cluster.broker("broker-a-s")
            say(f"SIGKILL broker-a's master (pid {master_a.pid}, {master_a.addr})")
            killed_at = time.monotonic()
            acked_a_before = set(traffic.acked["broker-a"])
            cluster.signal("broker-a", 9)
            await progress(traffic, phase * 2)
            last_failure = max(traffic.failures, default=killed_at)
            quiet_for = time.monotonic() - last_failure
            say(f"failures since the kill: {sum(1 for t in traffic.failures if t >= killed_at)}; "
                f"none in the last {quiet_for:.1f}s (broker-a isolated, sends going to broker-b)")
            from_slave = await pull_all(client, slave_a.addr)
            missing_on_slave = acked_a_before - from_slave
            say(f"broker-a's slave serves {len(from_slave)} messages; of the {len(acked_a_before)} acknowledged by "
                f"broker-a before the kill, {len(missing_on_slave)} are missing")
            say("restarting broker-a's master ...")
            await cluster.restart("broker-a")
            await cluster.wait_registered(30)
            say(f"broker-a is back at {cluster.broker('broker-a').addr}")
            acked_a_at_restart = len(traffic.acked["broker-a"])
            await progress(traffic, phase, until=lambda: len(traffic.acked["broker-a"]) >= acked_a_at_restart + 50)
            say(f"broker-a acknowledged {len(traffic.acked['broker-a']) - acked_a_at_restart} more since its restart")
            traffic.running = False
            await task
        consumed = {name: await pull_all(client, cluster.broker(name).addr) for name in ("broker-a", "broker-b")}
        consumed["broker-a"] |= await pull_all(client, cluster.broker("broker-a-s").addr)
        acked = traffic.acked["broker-a"] | traffic.acked["broker-b"]
        everything = consumed["broker-a"] | consumed["broker-b"]
        lost = acked - everything
        print(flush=True)
        say("summary")
        print(f"  sent          {traffic.sent}\n  acknowledged  {len(acked)} (SEND_OK)\n"
              f"  stored-not-ok {dict(traffic.stored_not_ok) or 0}\n  failed        {len(traffic.failures)}\n"
              f"  consumed      {len(everything)}\n  lost          {len(lost)}", flush=True)
        return 0 if not lost and not missing_on_slave else 1
    finally:
        await client.close()
        await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pocketmq-demo", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--base-dir", help="where the cluster's stores go (default: a temporary directory)")
    p.add_argument("--phase", type=float, default=3.0, help="seconds per phase (default 3)")
    args = p.parse_args(argv)
    configure_logging("console", "WARNING")
    if args.base_dir:
        return asyncio.run(demo(Path(args.base_dir), args.phase))
    with tempfile.TemporaryDirectory(prefix="pocketmq-demo-") as tmp:
        return asyncio.run(demo(Path(tmp), args.phase))


if __name__ == "__main__":
    sys.exit(main())
