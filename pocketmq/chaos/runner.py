"""``rmq-chaos``: one bounded chaos run, from cluster start to verdict.

1. A preset starts as local processes (:class:`~pocketmq.chaos.control.ChaosCluster`: two name servers, free ports,
   small commit-log files; the name servers keep their ports across restarts); with root and ``ip`` one broker
   (``--partition-broker``) runs in a network namespace of its own.
2. The topic gets ``--queues`` queues on every master and slave; the consumer group starts, then the producers.
   A POP consumer group (``--pop-consumers``) reads the same topic, and a timer workload (``--timer-rate``) sends
   timer messages to ``ChaosTimer`` (:mod:`pocketmq.chaos.rocketmq5`).
3. After ``--warmup`` seconds the nemesis injects faults until ``--duration``; then every fault is healed, the
   producers go on for ``--tail`` seconds (to measure the recovery), stop, and the consumers drain.
4. Every queue of every member is read back (:mod:`pocketmq.chaos.reader`), the checkers run, and the JSON, the table
   and the SVG timeline are written to ``--out``.

Exit status: 0 pass, 1 a checker failed (lost SEND_OK where the preset promises none, inconsistent offsets),
2 the run itself failed (the cluster did not start...). Only processes this run started are signalled (by
PID); the namespace, the cluster's stores and the temporary directory are removed at the end unless
``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.cluster import ClusterError
from pocketmq.chaos.checkers import check_all
from pocketmq.chaos.control import PROMISES, ChaosCluster, NetLink, netns_unavailable, promise
from pocketmq.chaos.events import History, PopDelivery, TimerDelivery, TimerSend
from pocketmq.chaos.nemesis import CONTROLLER_KINDS, KINDS, Nemesis, NemesisConfig
from pocketmq.chaos.reader import read_all, read_epochs
from pocketmq.chaos.report import render_svg, render_table, verdict
from pocketmq.chaos.rocketmq5 import TIMER_TOPIC, PopGroup, TimerWorkload
from pocketmq.chaos.workload import Workload, WorkloadConfig
from pocketmq.common.logs import configure_logging

__all__ = ["main", "run"]

TOPIC = "ChaosTopic"
PRESETS = ("2m-2s-sync", "2m-2s-async", "2m-noslave", "2m-2s-controller")
#: Faster failure detection than RocketMQ's defaults (30 s registrations, 120 s expiry): a run lasts minutes.
BROKER_PROPS = {
    "registerNameServerPeriod": "2000", "registerBrokerTimeoutMills": "1000",
    "mappedFileSizeCommitLog": str(32 << 20),
    "diskMaxUsedSpaceRatio": "100", "diskSpaceCleanForciblyRatio": "100", "diskSpaceWarningLevelRatio": "100",
}
NAMESRV_PROPS = {"scanNotActiveBrokerInterval": "1000", "brokerChannelExpiredTime": "10000"}
SETTLE_TIMEOUT = 60.0
#: A consumer shutdown that takes longer is reported (and abandoned), not waited for.
CONSUMER_STOP_TIMEOUT = 30.0


def say(text: str) -> None:
    print(f"rmq-chaos | {text}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-chaos", description="randomized faults against a local PocketMQ cluster, "
                                "with checkers of lost, duplicate, reordered messages and availability")
    p.add_argument("--preset", default="2m-2s-sync", choices=PRESETS)
    p.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"),
                   help="flushDiskType of every broker (the presets use ASYNC_FLUSH)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults (default 60)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", help=f"kinds to draw from (default {','.join(KINDS)}; for a controller preset "
                   f"{','.join(CONTROLLER_KINDS)})")
    p.add_argument("--overlap", action="store_true", help="let faults overlap (never two on one process)")
    p.add_argument("--fault-min", type=float, default=3.0)
    p.add_argument("--fault-max", type=float, default=10.0)
    p.add_argument("--gap-min", type=float, default=4.0)
    p.add_argument("--gap-max", type=float, default=12.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--tail", type=float, default=10.0, help="seconds of sends after healing")
    p.add_argument("--drain", type=float, default=60.0, help="at most this long for the consumers to catch up")
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--streams", type=int, default=4, help="sends in flight per producer")
    p.add_argument("--rate", type=float, default=50.0, help="sends per second per producer")
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--queues", type=int, default=4, help="queues of the topic per broker group")
    p.add_argument("--pop-consumers", type=int, default=2,
                   help="consumers of a POP group on the topic, beside the push group: SimpleConsumer loops and "
                        "push consumers in POP mode by turns (0: none)")
    p.add_argument("--timer-rate", type=float, default=5.0,
                   help="timer messages per second, due 1 to 4 s later, to ChaosTimer (0: none)")
    p.add_argument("--auto-batch", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--send-timeout", type=float, default=3.0)
    p.add_argument("--partition-broker", help="the broker process run in a namespace (default broker-b; "
                   "broker-a-n1 for a controller preset)")
    p.add_argument("--out", default="chaos-out", help="directory for result.json, timeline.svg, table.txt")
    p.add_argument("--base-dir", help="where the cluster's stores go (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the stores (and print where they are)")
    p.add_argument("--dump-history", action="store_true", help="also write every event to history.jsonl")
    p.add_argument("--echo", action="store_true", help="print the processes' output")
    p.add_argument("--client-log-level", default="WARNING", help="log level of the SDK clients (default WARNING)")
    args = p.parse_args(argv)
    controller = is_controller_preset(args.preset)
    faults = args.faults or ",".join(CONTROLLER_KINDS if controller else KINDS)
    known = KINDS + CONTROLLER_KINDS if controller else KINDS
    kinds = tuple(k for k in faults.split(",") if k)
    unknown = [k for k in kinds if k not in known]
    if unknown or not kinds:
        p.error(f"--faults: unknown kinds {unknown} (known: {', '.join(known)})")
    args.kinds = kinds
    args.partition_broker = args.partition_broker or ("broker-a-n1" if controller else "broker-b")
    return args


def is_controller_preset(preset: str) -> bool:
    return "controller" in preset


def pin_namesrv_ports(cluster: ChaosCluster) -> None:
    """A restarted name server must come back where the brokers and clients look for it."""
    for child in cluster.children.values():
        if child.spec.kind == "namesrv" and "--port" in child.spec.args:
            args = child.spec.args
            args[args.index("--port") + 1] = child.addr.rsplit(":", 1)[1]


async def create_topic(cluster: ChaosCluster, queues: int, topic: str = TOPIC) -> None:
    async with AdminClient(cluster.namesrv_addrs) as admin:
        await admin.update_topic(topic, read_queues=queues, write_queues=queues)
        for child in cluster.brokers():
            if child.spec.role == "SLAVE":
                await admin.update_topic(topic, read_queues=queues, write_queues=queues, broker_addr=child.addr)


async def settle(cluster: ChaosCluster) -> str:
    """Every process up, registered and replicating again after healing ("" or what did not settle)."""
    for name, child in cluster.children.items():
        if not child.alive:
            try:
                await cluster.restart(name)
            except ClusterError as exc:
                return f"{name} could not be restarted: {exc}"
    try:
        await cluster.wait_registered(SETTLE_TIMEOUT)
        await cluster.wait_replicating(SETTLE_TIMEOUT)
    except (ClusterError, AdminError) as exc:
        return str(exc)
    return ""


def write_outputs(out: Path, summary: dict[str, Any], table: str, svg: str) -> None:
    """result.json, table.txt and timeline.svg in ``out``. Blocking."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "table.txt").write_text(table + "\n", encoding="utf-8")
    (out / "timeline.svg").write_text(svg, encoding="utf-8")


def write_history(path: Path, history: History) -> None:
    """Every event as a JSON line. Blocking."""
    with path.open("w", encoding="utf-8") as f:
        for line in history.dump_lines():
            f.write(line + "\n")


async def run(args: argparse.Namespace) -> int:
    made = args.base_dir or await asyncio.to_thread(tempfile.mkdtemp, prefix="rmq-chaos-")
    base = Path(made)
    link: NetLink | None = None
    why_no_netns = netns_unavailable() if {"partition", "netem", "partition-master"} & set(args.kinds) \
        else "not asked for"
    if not why_no_netns:
        link = NetLink()
        link.create()
    overrides = {**BROKER_PROPS, "flushDiskType": args.flush}
    namesrvs = 3 if is_controller_preset(args.preset) else 2  # the controllers of a controller preset
    cluster = ChaosCluster(args.preset, base_dir=base / "cluster", namesrv_count=namesrvs, ephemeral_ports=True,
                           host=link.root_addr if link else "127.0.0.1", overrides=overrides,
                           namesrv_overrides=NAMESRV_PROPS, log_format="json",
                           echo=sys.stderr if args.echo else None, link=link, partitioned=args.partition_broker)
    try:
        return await _run_cluster(args, cluster, why_no_netns)
    finally:
        for name, child in cluster.children.items():
            if child.alive:
                cluster.signal(name, signal.SIGKILL)
        await cluster.stop()
        if link is not None:
            problems = link.delete()
            if problems:
                say(f"!! namespace cleanup: {problems}")
        if args.keep:
            say(f"stores kept in {base}")
        else:
            await asyncio.to_thread(shutil.rmtree, base, True)


async def _run_cluster(args: argparse.Namespace, cluster: ChaosCluster, why_no_netns: str) -> int:
    say(f"starting {args.preset} ({args.flush}) in {cluster.base_dir}")
    try:
        await cluster.start()
    except ClusterError as exc:
        say(f"the cluster did not start: {exc}")
        return 2
    pin_namesrv_ports(cluster)
    await create_topic(cluster, args.queues)
    t0 = time.monotonic()
    workload = Workload(WorkloadConfig(cluster.namesrv_addr, TOPIC, args.producers, args.streams, args.rate,
                                       args.consumers, args.auto_batch, args.send_timeout), t0)
    sync_flush = args.flush == "SYNC_FLUSH"

    def durable_record(addr: str) -> int:
        """With SYNC_FLUSH a SEND_OK's record was on disk: a power loss keeps it (see drop_unflushed)."""
        return workload.acked_offsets.get(addr, -1) if sync_flush else -1

    nemesis = Nemesis(cluster, NemesisConfig(args.kinds, args.seed, args.overlap, args.fault_min, args.fault_max,
                                             args.gap_min, args.gap_max), workload.now, say,
                      durable_record=durable_record)
    if why_no_netns and why_no_netns != "not asked for":
        say(f"partition and netem faults skipped: {why_no_netns}")
    extras = RocketMQ5Extras(args, cluster, t0)
    await extras.start(args.duration + args.tail + SETTLE_TIMEOUT * 2 + 60)
    await workload.start_consumers()
    await workload.start_producers(args.duration + args.tail + SETTLE_TIMEOUT * 2 + 60)
    await asyncio.sleep(args.warmup)
    await nemesis.run(args.warmup + args.duration)
    await nemesis.heal()
    healed_at = workload.now()
    unsettled = await settle(cluster)
    if unsettled:
        say(f"!! after healing: {unsettled}")
    with contextlib.suppress(TimeoutError):
        await asyncio.sleep(max(0.0, args.tail - (workload.now() - healed_at)))
    await workload.stop_producers()
    await extras.stop_producers()
    say(f"sending stopped at {workload.now():.1f}s; draining")
    drained = await workload.drain(args.drain)
    drained = await extras.drain(workload, args.drain) and drained
    controller = is_controller_preset(args.preset)
    masters = {c.spec.name for c in (await cluster.masters()).values()} if controller else set()
    members = [(c.spec.broker_name, c.spec.name, c.spec.name in masters if controller else c.spec.role != "SLAVE",
                c.addr) for c in cluster.brokers()]
    stored, unread = await read_all(members, TOPIC, args.queues)
    epochs = await read_epochs(members) if controller else {}
    current = {c.spec.name: c.addr for c in cluster.brokers()}
    for former, name in cluster.former_addrs.items():  # acknowledgements by a broker before its restart
        if current.get(name) in epochs and former not in epochs:
            epochs[former] = epochs[current[name]]
    history = History(list(workload.sends), list(workload.deliveries), nemesis.faults, stored, unread,
                      workload.now(), *extras.events(), epochs=epochs)
    consumers_stopped = await workload.stop_consumers(CONSUMER_STOP_TIMEOUT)
    consumers_stopped = await extras.stop_consumers(CONSUMER_STOP_TIMEOUT) and consumers_stopped
    if not consumers_stopped:
        say(f"!! the consumers did not shut down within {CONSUMER_STOP_TIMEOUT:.0f} s")
    results = check_all(history)
    power_loss = any(f.kind == "powerloss" and f.injected for f in nemesis.faults)
    kind, no_loss = promise(args.preset, args.flush, overlap=args.overlap, power_loss=power_loss)
    summary: dict[str, Any] = {
        "preset": args.preset, "flush": args.flush, "seed": args.seed, "duration": history.duration,
        "overlap": args.overlap, "auto_batch": args.auto_batch, "promise": f"{kind}: {PROMISES[kind]}",
        "no_loss_promised": no_loss, "drained": drained, "unsettled_after_heal": unsettled,
        "consumers_stopped": consumers_stopped,
        "dropped_events": workload.dropped_events + extras.dropped_events, "history": history.to_json(),
        "results": results,
    }
    summary["problems"] = verdict(results, no_loss_promised=no_loss)
    table = render_table(summary)
    title = f"rmq-chaos {args.preset} {args.flush} seed {args.seed} ({history.duration:.0f} s)"
    svg = render_svg(history.sends, history.faults, history.duration, title)
    out = Path(args.out)
    await asyncio.to_thread(write_outputs, out, summary, table, svg)
    if args.dump_history:
        await asyncio.to_thread(write_history, out / "history.jsonl", history)
    print(table, flush=True)
    if unread:
        say(f"!! members not read: {unread}")
    say(f"results in {out}/result.json, {out}/table.txt, {out}/timeline.svg")
    return 1 if summary["problems"] else 0


class RocketMQ5Extras:
    """The POP consumer group and the timer workload of a run (:mod:`pocketmq.chaos.rocketmq5`), when asked for."""

    def __init__(self, args: argparse.Namespace, cluster: ChaosCluster, t0: float) -> None:
        self.cluster = cluster
        self.queues = args.queues
        self.pop = PopGroup(cluster.namesrv_addr, TOPIC, args.pop_consumers, t0) if args.pop_consumers > 0 else None
        self.timers = (TimerWorkload(cluster.namesrv_addr, args.timer_rate, t0, seed=args.seed,
                                     send_timeout=args.send_timeout) if args.timer_rate > 0 else None)

    async def start(self, max_seconds: float) -> None:
        if self.pop is not None:
            await self.pop.start()
        if self.timers is not None:
            await create_topic(self.cluster, self.queues, TIMER_TOPIC)
            await self.timers.start_consumer()
            await self.timers.start_producer(max_seconds)

    async def stop_producers(self) -> None:
        if self.timers is not None:
            await self.timers.stop_producer()

    async def drain(self, workload: Workload, timeout: float) -> bool:
        """Until the POP group has every acknowledged id and every acknowledged timer fired (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        drained = True
        if self.pop is not None:
            drained = await self.pop.drain({s.msg_id for s in workload.sends if s.ok}, timeout)
        if self.timers is not None:
            return await self.timers.drain(max(0.0, deadline - time.monotonic())) and drained
        return drained

    def events(self) -> tuple[list[PopDelivery], list[TimerSend], list[TimerDelivery]]:
        return (list(self.pop.deliveries) if self.pop else [], list(self.timers.sends) if self.timers else [],
                list(self.timers.deliveries) if self.timers else [])

    async def stop_consumers(self, timeout: float) -> bool:
        stopped = True
        if self.pop is not None:
            stopped = await self.pop.stop(timeout)
        if self.timers is not None:
            await self.timers.stop_consumer()
        return stopped

    @property
    def dropped_events(self) -> int:
        return (self.pop.dropped_events if self.pop else 0) + (self.timers.dropped_events if self.timers else 0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("console", args.client_log_level)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except (ClusterError, OSError) as exc:
        say(f"run failed: {exc}")
        return 2
