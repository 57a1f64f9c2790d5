"""``rmq-bench scale``: what thousands of topics, groups, queues and clients cost one broker, as growth curves.

Each phase starts its own name server and ASYNC_MASTER broker (child processes, a fresh directory that is
removed afterwards) and talks to them over raw remoting requests:

* ``create`` — topics created one at a time (UPDATE_AND_CREATE_TOPIC, ``--queues`` queues, one connection): the
  latency p50/p99/max of every 1,000 created, the ``--at`` windows (1,000 created from 1k/10k/20k existing) and
  the total time. When ``--mem-topics`` exist it stops to measure memory: the broker's RSS beside the idle
  broker's after two registration rounds (``--register-period-ms``), then ``--groups`` subscription groups are
  created and measured the same way; it also times ``topicList``/``clusterList``/``consumerProgress`` and the
  CPU the name server and the broker spend per registration round while nothing changes;
* ``admin`` — ``--store-topics`` topics of ``--store-queues`` queues through the admin batch path
  (UPDATE_AND_CREATE_TOPIC_LIST), total time until the name server lists them;
* ``store`` — on the admin phase's broker: one message into every queue, then the broker's open files and
  memory maps beside the process's limits, its RSS and the store's disk use; a restart (SIGTERM) and a
  recovery (SIGKILL), each timed and checked (every sampled queue still holds its message);
* ``heartbeat`` — ``--clients`` connections, each a client in ``--groups-per-client`` of ``--client-groups``
  consumer groups: the join (every client's first heartbeat at once: NOTIFY_CONSUMER_IDS_CHANGED received),
  then ``--heartbeat-rounds`` rounds at ``--heartbeat-interval`` (RocketMQ's 30 s) spread evenly: broker CPU in
  percent of one CPU, RSS per client, notifications; then ``--burst-clients`` more clients of one new group start at
  once (an application's instances restarting together: RocketMQ notifies every member on every join, N(N+1)/2
  notifications); then every client disconnects.

``--json`` prints the summary as one JSON object. The machine's load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import random
import signal
import sys
import time
from array import array
from typing import Any

import structlog
import uvloop

from pocketmq.admin.api import AdminClient
from pocketmq.bench.common import percentiles, wait_idle
from pocketmq.bench.scale_load import (
    CONCURRENCY,
    HeartbeatClients,
    ScaleCluster,
    bounded,
    create_group,
    create_topic,
    disk_use,
    load_average,
    max_map_count,
    max_offset,
    memory_maps,
    nofile_limit,
    open_files,
    rss_kib,
    scale_cluster,
    send_one,
)
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient

PHASES = ("create", "admin", "store", "heartbeat")
CURVE_STEP = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--at", default="1000,10000,20000", help="existing-topic counts whose next --window creations "
                        "are reported (1000,10000,20000)")
    parser.add_argument("--window", type=int, default=1000, help="creations per --at window (1000)")
    parser.add_argument("--queues", type=int, default=4, help="queues of each created topic (4)")
    parser.add_argument("--mem-topics", type=int, default=10_000, help="topics when memory is measured (10000)")
    parser.add_argument("--groups", type=int, default=5000, help="subscription groups created then (5000)")
    parser.add_argument("--register-period-ms", type=int, default=10_000,
                        help="the brokers' registerNameServerPeriod (10000: RocketMQ's lowest)")
    parser.add_argument("--store-topics", type=int, default=10_000, help="topics of the admin/store phases (10000)")
    parser.add_argument("--store-queues", type=int, default=8, help="queues of each (8)")
    parser.add_argument("--check-sample", type=int, default=2000, help="queues checked after restart/recovery")
    parser.add_argument("--clients", type=int, default=1000, help="heartbeating connections (1000)")
    parser.add_argument("--client-groups", type=int, default=2000, help="consumer groups they share (2000)")
    parser.add_argument("--groups-per-client", type=int, default=4, help="groups in each client's heartbeat (4)")
    parser.add_argument("--heartbeat-interval", type=float, default=30.0, help="seconds between beats (30)")
    parser.add_argument("--heartbeat-rounds", type=int, default=2, help="rounds measured (2)")
    parser.add_argument("--burst-clients", type=int, default=200,
                        help="clients of one group that then start at once (200): the notifications they get")
    parser.add_argument("--keep-dir", action="store_true", help="keep the clusters' directories")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    phases = [p for p in args.phases.split(",") if p]
    at = sorted(int(x) for x in args.at.split(",") if x)
    if (not set(phases) <= set(PHASES) or not at or args.window < 1 or not 1 <= args.queues <= 1024
            or args.mem_topics < 1 or args.groups < 0 or not 1 <= args.store_queues <= 1024 or args.clients < 1
            or args.client_groups < 1 or args.groups_per_client < 1 or args.heartbeat_rounds < 1
            or args.burst_clients < 1):
        print(f"rmq-bench scale: bad arguments (phases are {', '.join(PHASES)})")
        return 2
    args.at_list = at
    # SIGTERM ends the run like ^C: the clusters' processes are stopped and their directories removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    summary: dict[str, Any] = {"load_before": load_average(), "max_map_count": max_map_count()}
    print(f"load average before: {summary['load_before']}", flush=True)
    props = {"registerNameServerPeriod": str(args.register_period_ms), "autoCreateTopicEnable": "true"}
    if "create" in phases:
        with scale_cluster("create", props, keep_dir=args.keep_dir) as cluster:
            summary["create"] = uvloop.run(_create_phase(args, cluster))
    if "admin" in phases or "store" in phases:
        with scale_cluster("store", props, keep_dir=args.keep_dir) as cluster:
            summary["admin"] = uvloop.run(_admin_phase(args, cluster))
            if "store" in phases:
                summary["store"] = _store_phase(args, cluster)
            store_dir = cluster.store_dir
        if "store" in phases:
            summary["store"]["store_removed"] = not args.keep_dir and not _exists(store_dir)
            print(f"store removed: {summary['store']['store_removed']}", flush=True)
    if "heartbeat" in phases:
        with scale_cluster("heartbeat", props, keep_dir=args.keep_dir) as cluster:
            summary["heartbeat"] = uvloop.run(_heartbeat_phase(args, cluster))
    summary["load_after"] = load_average()
    print(f"load average after: {summary['load_after']}", flush=True)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def _exists(path: str) -> bool:
    import os

    return os.path.exists(path)


def _ms(values: Any) -> dict[str, float]:
    return {k: round(v * 1000, 3) for k, v in percentiles(values).items()}


def _cpu(child: Any) -> float:
    value = child.cpu_seconds()
    return float(value) if value is not None else 0.0


# -- create -----------------------------------------------------------------------------------------------------


async def _create_phase(args: argparse.Namespace, cluster: ScaleCluster) -> dict[str, Any]:
    total = max(args.at_list) + args.window
    client = RemotingClient()
    broker = cluster.broker_addr
    idle_rss = rss_kib(cluster.broker_pid)
    assert cluster.broker is not None and cluster.namesrv is not None
    broker_cpu, ns_cpu = _cpu(cluster.broker), _cpu(cluster.namesrv)
    await asyncio.sleep(args.register_period_ms / 1000)  # a round with no topics: what the services' ticks cost
    out: dict[str, Any] = {"topics_created": total, "queues": args.queues, "idle_broker_rss_kib": idle_rss,
                           "idle_broker_cpu_per_round_s": round(_cpu(cluster.broker) - broker_cpu, 4),
                           "idle_namesrv_cpu_per_round_s": round(_cpu(cluster.namesrv) - ns_cpu, 4),
                           "curve": [], "windows": {}}
    latencies = array("f")
    print(f"create: {total} topics of {args.queues} queues, one at a time; idle broker RSS {idle_rss} KiB, a "
          f"registration round with no topic costs the broker {out['idle_broker_cpu_per_round_s'] * 1000:.1f} ms and "
          f"the name server {out['idle_namesrv_cpu_per_round_s'] * 1000:.1f} ms of CPU", flush=True)
    elapsed = 0.0
    windows = {start: start + args.window for start in args.at_list}
    cpu_at: dict[int, tuple[float, float]] = {}
    try:
        for i in range(total):
            if i == args.mem_topics:
                out["memory"] = await _memory_checkpoint(args, cluster, client, idle_rss)
            if i in windows or i in windows.values():
                cpu_at[i] = (_cpu(cluster.broker), _cpu(cluster.namesrv))
            started = time.perf_counter()
            latencies.append(await create_topic(client, broker, f"ScaleTopic{i:06d}", args.queues))
            elapsed += time.perf_counter() - started
            if (i + 1) % CURVE_STEP == 0:
                point = {"existing": i + 1 - CURVE_STEP, **_ms(latencies[i + 1 - CURVE_STEP:i + 1])}
                out["curve"].append(point)
                print(f"  {point['existing']:>6} existing: create p50 {point['p50']:.2f} ms  p99 {point['p99']:.2f} ms"
                      f"  max {point['max']:.2f} ms", flush=True)
        cpu_at[total] = (_cpu(cluster.broker), _cpu(cluster.namesrv))
        for start, end in windows.items():
            window = out["windows"][str(start)] = _ms(latencies[start:end])
            # CPU time per creation: the work each costs, which machine load does not stretch as it does latency
            window["broker_cpu_us"] = round((cpu_at[end][0] - cpu_at[start][0]) * 1e6 / args.window)
            window["namesrv_cpu_us"] = round((cpu_at[end][1] - cpu_at[start][1]) * 1e6 / args.window)
        out["total_create_seconds"] = round(elapsed, 2)
        out["final"] = await _admin_timings(cluster, "ScaleGroup00000", "ScaleTopic000000")
        out["final"]["broker_rss_kib"] = rss_kib(cluster.broker_pid)
    finally:
        await client.close()
    for start, w in out["windows"].items():
        print(f"  window from {start} existing: p50 {w['p50']:.2f} ms  p99 {w['p99']:.2f} ms  max {w['max']:.2f} ms; "
              f"CPU per creation: broker {w['broker_cpu_us']} us, name server {w['namesrv_cpu_us']} us")
    print(f"  total creation time {out['total_create_seconds']} s; at {total} topics: " + _timings_line(out["final"]))
    return out


async def _memory_checkpoint(args: argparse.Namespace, cluster: ScaleCluster, client: RemotingClient,
                             idle_rss: int) -> dict[str, Any]:
    """RSS per topic after two registration rounds, then per group (created here) after two more; the CPU the
    second round of the first two cost (nothing changes then: what an idle broker with these topics spends)."""
    period = args.register_period_ms / 1000
    mem: dict[str, Any] = {"topics": args.mem_topics, "groups": args.groups}
    assert cluster.broker is not None and cluster.namesrv is not None
    await asyncio.sleep(period + 1)  # the first round (and the journal's compaction) after the creations
    broker_cpu, ns_cpu = _cpu(cluster.broker), _cpu(cluster.namesrv)
    await asyncio.sleep(period)
    mem["broker_cpu_per_round_s"] = round(_cpu(cluster.broker) - broker_cpu, 4)
    mem["namesrv_cpu_per_round_s"] = round(_cpu(cluster.namesrv) - ns_cpu, 4)
    await asyncio.sleep(1)
    after_topics = rss_kib(cluster.broker_pid)
    mem["broker_rss_kib_topics"] = after_topics
    mem["per_topic_bytes"] = round((after_topics - idle_rss) * 1024 / args.mem_topics)
    group_latencies = array("f")
    for g in range(args.groups):
        group_latencies.append(await create_group(client, cluster.broker_addr, f"ScaleGroup{g:05d}"))
    mem["group_create_ms"] = _ms(group_latencies)
    await asyncio.sleep(2 * period + 2)
    after_groups = rss_kib(cluster.broker_pid)
    mem["broker_rss_kib_groups"] = after_groups
    mem["per_group_bytes"] = round((after_groups - after_topics) * 1024 / max(args.groups, 1))
    mem["namesrv_rss_kib"] = rss_kib(cluster.namesrv.popen.pid)
    mem["register_body_bytes"] = _register_body_sizes(args.mem_topics, args.queues)
    mem["admin"] = await _admin_timings(cluster, "ScaleGroup00000", "ScaleTopic000000")
    print(f"  memory at {args.mem_topics} topics / {args.groups} groups after two registration rounds each: "
          f"{mem['per_topic_bytes']} B per topic, {mem['per_group_bytes']} B per group (broker RSS "
          f"{idle_rss} -> {after_topics} -> {after_groups} KiB; name server {mem['namesrv_rss_kib']} KiB)", flush=True)
    print(f"  group creation p50 {mem['group_create_ms'].get('p50', 0):.2f} ms p99 "
          f"{mem['group_create_ms'].get('p99', 0):.2f} ms; an unchanged registration round costs the broker "
          f"{mem['broker_cpu_per_round_s'] * 1000:.1f} ms and the name server "
          f"{mem['namesrv_cpu_per_round_s'] * 1000:.1f} ms of CPU; register body {mem['register_body_bytes']}",
          flush=True)
    print(f"  at {args.mem_topics} topics: " + _timings_line(mem["admin"]), flush=True)
    return mem


def _register_body_sizes(topics: int, queues: int) -> dict[str, int]:
    """Bytes of a full REGISTER_BROKER body of ``topics`` topics, plain JSON and compressed (RocketMQ's form)."""
    table = {f"ScaleTopic{i:06d}": TopicConfig(f"ScaleTopic{i:06d}", queues, queues, 6) for i in range(topics)}
    body = rd.RegisterBrokerBody(rd.TopicConfigSerializeWrapper(table, DataVersion(topics, 0)), [])
    return {"json": len(rd.encode_register_body(body)), "compressed": len(rd.encode_register_body(body,
                                                                                                  compressed=True))}


async def _admin_timings(cluster: ScaleCluster, group: str, topic: str) -> dict[str, Any]:
    """Seconds for rmq-admin's topicList, clusterList and consumerProgress (their API calls)."""
    out: dict[str, Any] = {}
    async with AdminClient([cluster.namesrv_addr], timeout=60.0) as admin:
        started = time.perf_counter()
        out["topic_list_count"] = len(await admin.topic_list())
        out["topicList_ms"] = round((time.perf_counter() - started) * 1000, 1)
        started = time.perf_counter()
        await admin.brokers()
        for broker in await admin.brokers():
            await admin.runtime_info(broker.addr)
        out["clusterList_ms"] = round((time.perf_counter() - started) * 1000, 1)
        started = time.perf_counter()
        with contextlib.suppress(Exception):
            await admin.consumer_progress(group, topic)
        out["consumerProgress_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return out


def _timings_line(t: dict[str, Any]) -> str:
    return (f"topicList {t['topicList_ms']} ms ({t['topic_list_count']} topics), clusterList {t['clusterList_ms']} ms, "
            f"consumerProgress {t['consumerProgress_ms']} ms")


# -- admin and store --------------------------------------------------------------------------------------------


def _store_names(args: argparse.Namespace) -> list[str]:
    return [f"StoreTopic{i:06d}" for i in range(args.store_topics)]


async def _admin_phase(args: argparse.Namespace, cluster: ScaleCluster) -> dict[str, Any]:
    names = _store_names(args)
    configs = [TopicConfig(name, args.store_queues, args.store_queues, 6) for name in names]
    async with AdminClient([cluster.namesrv_addr], timeout=60.0) as admin:
        started = time.perf_counter()
        await admin.update_topic_list(configs)  # what rmq-admin updateTopicList does
        created = time.perf_counter() - started
        deadline = time.monotonic() + 300
        while len(set(await admin.topic_list()) & set(names)) < len(names):
            if time.monotonic() > deadline:
                raise RuntimeError("the name server does not list every created topic after 300 s")
            await asyncio.sleep(0.5)
        routable = time.perf_counter() - started
    print(f"admin: {len(names)} topics of {args.store_queues} queues via rmq-admin updateTopicList: created in "
          f"{created:.2f} s, all listed by the name server after {routable:.2f} s", flush=True)
    return {"topics": len(names), "queues": args.store_queues, "create_seconds": round(created, 2),
            "routable_seconds": round(routable, 2)}


def _limits(cluster: ScaleCluster) -> dict[str, Any]:
    pid = cluster.broker_pid
    return {"open_files": open_files(pid), "nofile_limit": nofile_limit(pid), "memory_maps": memory_maps(pid),
            "max_map_count": max_map_count(), "broker_rss_kib": rss_kib(pid)}


def _limits_line(name: str, lim: dict[str, Any]) -> str:
    return (f"  {name}: open files {lim['open_files']} of {lim['nofile_limit']}, memory maps {lim['memory_maps']} of "
            f"{lim['max_map_count']}, broker RSS {lim['broker_rss_kib']} KiB")


def _store_phase(args: argparse.Namespace, cluster: ScaleCluster) -> dict[str, Any]:
    names = _store_names(args)
    queues = [(t, q) for t in names for q in range(args.store_queues)]
    out: dict[str, Any] = {"queues": len(queues)}
    out["send_seconds"] = round(uvloop.run(_send_all(cluster.broker_addr, queues)), 2)
    assert cluster.broker is not None
    wait_idle(cluster.broker, limit=120)
    out["running"] = _limits(cluster)
    out["disk"] = disk_use(cluster.store_dir)
    print(f"store: one message into each of {len(queues)} queues in {out['send_seconds']} s", flush=True)
    print(_limits_line("running", out["running"]), flush=True)
    d = out["disk"]
    print(f"  disk: {d['bytes_on_disk'] / 2**20:.1f} MiB on disk ({d['apparent_bytes'] / 2**30:.1f} GiB apparent), "
          f"{d['files']} files, {d['directories']} directories", flush=True)
    sample = random.Random(7).sample(queues, min(args.check_sample, len(queues)))
    for name, kill in (("restart", False), ("recovery", True)):
        port = cluster.stop_broker(kill=kill)
        seconds = cluster.start_broker(port)
        found = uvloop.run(_check(cluster.broker_addr, sample))
        wait_idle(cluster.broker, limit=120)
        out[name] = {"ready_seconds": round(seconds, 2), "checked_queues": len(sample), "queues_with_message": found,
                     **_limits(cluster)}
        print(f"  {name} ({'SIGKILL' if kill else 'SIGTERM'}): ready in {seconds:.2f} s, {found} of {len(sample)} "
              "sampled queues hold their message", flush=True)
        print(_limits_line(name, out[name]), flush=True)
    return out


async def _send_all(broker: str, queues: list[tuple[str, int]]) -> float:
    client = RemotingClient()
    body = b"x" * 100
    started = time.perf_counter()
    try:
        await bounded([functools.partial(send_one, client, broker, t, q, body) for t, q in queues], CONCURRENCY)
    finally:
        await client.close()
    return time.perf_counter() - started


async def _check(broker: str, sample: list[tuple[str, int]]) -> int:
    client = RemotingClient()
    try:
        offsets = await bounded([functools.partial(max_offset, client, broker, t, q) for t, q in sample])
    finally:
        await client.close()
    return sum(1 for offset in offsets if offset == 1)


# -- heartbeat --------------------------------------------------------------------------------------------------


async def _heartbeat_phase(args: argparse.Namespace, cluster: ScaleCluster) -> dict[str, Any]:
    assert cluster.broker is not None
    clients = HeartbeatClients(cluster.broker_addr, args.clients, args.client_groups, args.groups_per_client, 100)
    out: dict[str, Any] = {"clients": args.clients, "groups": args.client_groups,
                           "groups_per_client": args.groups_per_client, "interval_s": args.heartbeat_interval}
    rss0 = rss_kib(cluster.broker_pid)
    try:
        cpu = _cpu(cluster.broker)
        started = time.perf_counter()
        await clients.beat_all()
        await asyncio.sleep(3.0)  # notifications still on their way, and whatever the joins set off
        out["join"] = {"seconds": round(time.perf_counter() - started - 3.0, 2),
                       "broker_cpu_s": round(_cpu(cluster.broker) - cpu, 3), "notifications": clients.notifications}
        out["rss_per_client_bytes"] = round((rss_kib(cluster.broker_pid) - rss0) * 1024 / args.clients)
        before = clients.notifications
        cpu = _cpu(cluster.broker)
        started = time.perf_counter()
        await clients.beat_spread(args.heartbeat_interval, args.heartbeat_rounds)
        wall = time.perf_counter() - started
        used = _cpu(cluster.broker) - cpu
        out["steady"] = {"seconds": round(wall, 1), "broker_cpu_s": round(used, 3),
                         "broker_cpu_percent": round(100 * used / wall, 2),
                         "notifications": clients.notifications - before}
        out["broker_rss_kib"] = rss_kib(cluster.broker_pid)
        out["burst"] = await _burst(args, cluster)
    finally:
        cpu = _cpu(cluster.broker)
        await clients.close()
        await asyncio.sleep(3.0)
        out["disconnect_broker_cpu_s"] = round(_cpu(cluster.broker) - cpu, 3)
    j, s = out["join"], out["steady"]
    print(f"heartbeat: {args.clients} clients in {args.client_groups} groups ({args.groups_per_client} each): join "
          f"{j['seconds']} s, {j['broker_cpu_s']} s broker CPU, {j['notifications']} notifications; "
          f"{out['rss_per_client_bytes']} B RSS per client", flush=True)
    b = out["burst"]
    print(f"  steady ({args.heartbeat_rounds} rounds every {args.heartbeat_interval:g} s): broker CPU "
          f"{s['broker_cpu_percent']} % of one CPU, {s['notifications']} notifications; all disconnecting: "
          f"{out['disconnect_broker_cpu_s']} s broker CPU", flush=True)
    print(f"  burst: {b['clients']} clients of one group starting at once got {b['notifications']} notifications "
          f"(one per member per change would be {b['clients'] * (b['clients'] + 1) // 2})", flush=True)
    return out


async def _burst(args: argparse.Namespace, cluster: ScaleCluster) -> dict[str, Any]:
    """``--burst-clients`` clients of one group starting at once: the notifications they receive."""
    burst = HeartbeatClients(cluster.broker_addr, args.burst_clients, 1, 1, 1, prefix="ScaleBurst")
    try:
        await burst.beat_all()
        await asyncio.sleep(3.0)
        return {"clients": args.burst_clients, "notifications": burst.notifications}
    finally:
        await burst.close()
