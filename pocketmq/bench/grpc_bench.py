"""``rmq-bench grpc``: the gRPC proxy driven by the official RocketMQ 5 Python client, against the same broker over
remoting (PocketMQ's SDK). Processes: a name server, one broker, ``rmq-proxy``, the client in its own environment.

1. A lone send: ``--lone`` sequential sends of ``--body`` bytes through the proxy (official client) and straight to
   the broker (PocketMQ's SDK, sync sends); p50/p99 of each, and the proxy's own time per SendMessage (its metrics:
   the call from its arrival to its answer, the broker's round trip included).
2. ``--inflight`` sends in flight for ``--duration`` s through the proxy: msg/s, and the CPU the proxy and the broker
   processes used per message (µs, from /proc).

Both are run twice: driven by the official client (what its users get), and by a bare ``grpc.aio`` client in this
process sending the same SendMessage requests (what the proxy itself costs: the official client spends milliseconds
of its own per call, in thread hand-offs and per-call signing, and caps the load it can offer).

3. The broker's cost alone at the same load: PocketMQ's SDK sends ``--inflight`` at a time over remoting, paced to
   the rate the official client reached in 2, for ``--duration`` s: the broker's CPU per message (like with like: a
   broker's cost per message depends on the rate, its idle wake-ups spread over fewer messages when it is low).
4. Local mode (``--mode local`` or ``both``): a fresh name server and a broker with ``enableGrpcProxy=true``; the
   official client's load of 2 against the broker's endpoint, then 3's paced remoting load against the same broker.
   The proxy's CPU per message is the process's per message under the gRPC load less the broker's per message
   under the remoting load at the same rate (the two share one process, so /proc cannot split them). With
   ``--repeat N`` the pair runs N times on the same broker and the turn with the median ratio is reported.
5. The floor (:mod:`pocketmq.bench.grpc_floor`): a ``grpc.aio`` server with the proxy's options whose SendMessage
   answers a fixed OK, under 2's load from the bare client: what ``grpc.aio`` costs per call before any work.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from pocketmq.admin.api import AdminClient
from pocketmq.bench.common import Child, percentiles, wait_idle
from pocketmq.bench.official_client import official_python
from pocketmq.client import Message, Producer
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.remoting.errors import PocketMQError

DRIVER = Path(__file__).resolve().parent / "rocketmq5_driver.py"
TOPIC = "BenchGrpc"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lone", type=int, default=2000, help="sequential sends per path (default 2000)")
    parser.add_argument("--inflight", type=int, default=100, help="sends in flight (default 100)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the in-flight run (default 20)")
    parser.add_argument("--body", type=int, default=1024, help="message body bytes (default 1024)")
    parser.add_argument("--client-python", help="interpreter with rocketmq-python-client (default: made under .cache)")
    parser.add_argument("--mode", choices=("cluster", "local", "both"), default="both",
                        help="rmq-proxy beside the broker, the broker's own endpoint, or both (default)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="local mode's load and paced remoting runs, one after the other; the median is reported")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")


def run(args: argparse.Namespace) -> int:
    results = uvloop.run(_main(args))
    _print(results)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


async def _driver(python: str, mode: str, spec: dict[str, Any], timeout: float,
                  on_start: Any = None) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(python, str(DRIVER), mode, json.dumps(spec),
                                                stdout=asyncio.subprocess.PIPE, cwd=tempfile.gettempdir())
    assert proc.stdout is not None
    lines = []
    async with asyncio.timeout(timeout):
        async for raw in proc.stdout:
            line = raw.decode().strip()
            if line == "STARTED" and on_start is not None:
                on_start()
            lines.append(line)
        await proc.wait()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the driver ({mode}) failed with {proc.returncode}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def _remoting_lone(namesrv: str, count: int, body: bytes) -> list[float]:
    latencies = []
    async with Producer("BenchGrpcRemoting", namesrv_addr=namesrv) as producer:
        for _ in range(200):
            await producer.send(Message(TOPIC, body))
        for _ in range(count):
            started = time.perf_counter()
            await producer.send(Message(TOPIC, body))
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def _bare_request(body: bytes, n: int) -> bytes:
    system = pb.SystemProperties(message_id=f"BENCH{n:016X}", message_type=pb.NORMAL, born_host="127.0.0.1")
    system.born_timestamp.GetCurrentTime()
    request = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=TOPIC), body=body,
                                                          system_properties=system)])
    return request.SerializeToString()


_BARE_METADATA = (("x-mq-client-id", "bench@bare"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "bench"))


async def _bare(endpoints: str, body: bytes, *, lone: int, inflight: int, duration: float,
                marks: dict[str, float], mark: Any) -> dict[str, Any]:
    """Lone sends then ``inflight`` in flight, with a bare grpc.aio client (requests serialized up front)."""
    from grpc import aio

    async with aio.insecure_channel(endpoints) as channel:
        call = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage", request_serializer=lambda b: b,
                                   response_deserializer=spb.SendMessageResponse.FromString)
        for i in range(200):
            await call(_bare_request(body, i), metadata=_BARE_METADATA, timeout=10)
        latencies = []
        for i in range(lone):
            request = _bare_request(body, i)
            started = time.perf_counter()
            await call(request, metadata=_BARE_METADATA, timeout=10)
            latencies.append((time.perf_counter() - started) * 1000)
        counts = {"ok": 0, "failed": 0}
        mark()
        started = time.perf_counter()
        deadline = started + duration

        async def sender(k: int) -> None:
            n = 0
            while time.perf_counter() < deadline:
                answer = await call(_bare_request(body, k * 10_000_000 + n), metadata=_BARE_METADATA, timeout=10)
                counts["ok" if answer.status.code == pb.Code.OK else "failed"] += 1
                n += 1

        await asyncio.gather(*(sender(k) for k in range(inflight)))
        return {"latencies_ms": latencies, **counts, "elapsed_s": time.perf_counter() - started}


def _proxy_send_p50(metrics_text: str) -> float | None:
    """The proxy's median SendMessage time (ms) from its latency histogram's buckets."""
    buckets = []
    for line in metrics_text.splitlines():
        if line.startswith("pocketmq_proxy_rpc_latency_seconds_bucket") and 'method="SendMessage"' in line \
                and 'code="OK"' in line:
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    if not buckets:
        return None
    total = max(count for _le, count in buckets)
    return next(le * 1000 for le, count in sorted(buckets) if count >= total / 2)


async def _metrics(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
    data = await reader.read()
    writer.close()
    return data.decode(errors="replace")


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    python = args.client_python or str(await asyncio.to_thread(official_python))
    results: dict[str, Any] = {}
    if args.mode in ("cluster", "both"):
        results.update(await _cluster_mode(args, python))
    if args.mode in ("local", "both"):
        results["local"] = await _local_mode(args, python)
    results["floor"] = await _floor(args)
    return results


async def _floor(args: argparse.Namespace) -> dict[str, Any]:
    """Item 5 of the module docstring."""
    floor = Child([sys.executable, "-m", "pocketmq.bench.grpc_floor"], "FLOOR READY")
    try:
        endpoints = floor.wait_ready()
        marks: dict[str, float] = {}

        def mark() -> None:
            marks["floor"] = floor.cpu_seconds() or 0.0

        load = await _bare(endpoints, b"x" * args.body, lone=0, inflight=args.inflight, duration=args.duration,
                           marks=marks, mark=mark)
        used = (floor.cpu_seconds() or 0.0) - marks["floor"]
        return {"inflight": args.inflight, "ok": load["ok"], "msg_per_s": load["ok"] / load["elapsed_s"],
                "cpu_us_per_call": used / max(load["ok"], 1) * 1e6}
    finally:
        floor.stop()


def _calls(metrics_text: str) -> dict[str, float]:
    """Calls answered so far by method (all codes), from the proxy's latency histogram's counts."""
    calls: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith("pocketmq_proxy_rpc_latency_seconds_count{"):
            method = line.split('method="')[1].split('"')[0]
            calls[method] = calls.get(method, 0.0) + float(line.rsplit(" ", 1)[1])
    return calls


async def _paced_remoting(namesrv: str, body: bytes, *, inflight: int, duration: float, rate: float,
                          mark: Any) -> dict[str, Any]:
    """``inflight`` senders over remoting, message ``n`` not before ``n / rate`` s from the start (bounded by
    ``rate * duration`` messages and ``duration`` s)."""
    issued = itertools.count()
    counts = {"ok": 0, "failed": 0}
    async with Producer("BenchGrpcRemotingLoad", namesrv_addr=namesrv) as producer:
        for _ in range(200):
            await producer.send(Message(TOPIC, body))
        mark()
        started = time.perf_counter()

        async def sender() -> None:
            while (due := started + next(issued) / rate) < started + duration:
                if (wait := due - time.perf_counter()) > 0:
                    await asyncio.sleep(wait)
                try:
                    await producer.send(Message(TOPIC, body))
                    counts["ok"] += 1
                except PocketMQError:
                    counts["failed"] += 1

        await asyncio.gather(*(sender() for _ in range(inflight)))
        return {**counts, "elapsed_s": time.perf_counter() - started}


def _namesrv_and_broker(workdir: Path, children: list[Child], *broker_args: str) -> tuple[str, Child]:
    """A name server and broker ``broker-a`` (ASYNC_MASTER, ASYNC_FLUSH) in ``workdir``, appended to ``children``."""
    ns = Child([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
                "--kv-config-path", str(workdir / "kv.json"), "--log-level", "WARNING"], "NAMESRV READY")
    children.append(ns)
    namesrv = ns.wait_ready()
    broker = Child([sys.executable, "-m", "pocketmq.broker.main", *broker_args, "-n", namesrv, "--listen-host",
                    "127.0.0.1", "--listen-port", "0", "--broker-name", "broker-a", "--store-dir",
                    str(workdir / "store"), "--log-level", "WARNING"], "BROKER READY")
    children.append(broker)
    broker.wait_ready()
    return namesrv, broker


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _local_mode(args: argparse.Namespace, python: str) -> dict[str, Any]:
    """Item 4 of the module docstring."""
    workdir = Path(tempfile.mkdtemp(prefix="rmq-bench-grpc-local-"))
    children: list[Child] = []
    try:
        port = _free_port()
        (workdir / "broker.properties").write_text(f"enableGrpcProxy=true\ngrpcServerPort={port}\n")
        namesrv, broker = _namesrv_and_broker(workdir, children, "-c", str(workdir / "broker.properties"))
        await AdminClient([namesrv]).update_topic(TOPIC, read_queues=8, write_queues=8)
        await asyncio.to_thread(wait_idle, broker)
        marks: dict[str, float] = {}

        def mark() -> None:
            marks["broker"] = broker.cpu_seconds() or 0.0

        def used() -> float:
            return (broker.cpu_seconds() or 0.0) - marks["broker"]

        mark()
        await asyncio.sleep(5.0)
        idle = used() / 5.0
        spec = {"endpoints": f"127.0.0.1:{port}", "topic": TOPIC, "body": args.body, "warmup": 200,
                "inflight": args.inflight, "duration": args.duration}
        turns = []
        for _ in range(args.repeat):
            load = await _driver(python, "inflight", spec, args.duration + 600, mark)
            process_us = used() / max(load["ok"], 1) * 1e6
            rate = load["ok"] / load["elapsed_s"]
            remote = await _paced_remoting(namesrv, b"x" * args.body, inflight=args.inflight,
                                           duration=args.duration, rate=rate, mark=mark)
            broker_us = used() / max(remote["ok"], 1) * 1e6
            turns.append({"inflight": args.inflight, "ok": load["ok"], "failed": load["failed"], "msg_per_s": rate,
                          "process_cpu_us_per_msg": process_us, "idle_cpu_per_s": idle,
                          "broker_remoting": {**remote, "msg_per_s": remote["ok"] / remote["elapsed_s"],
                                              "broker_cpu_us_per_msg": broker_us},
                          "broker_cpu_us_per_msg": broker_us, "proxy_cpu_us_per_msg": process_us - broker_us,
                          "ratio": (process_us - broker_us) / max(broker_us, 1e-9)})
        # Turns swing by a fifth with the client's rate on a shared machine: the median turn is the figure.
        median = sorted(turns, key=lambda turn: turn["ratio"])[len(turns) // 2]
        return {**median, "turns": turns}
    finally:
        for child in reversed(children):
            child.stop()
        shutil.rmtree(workdir, ignore_errors=True)


async def _cluster_mode(args: argparse.Namespace, python: str) -> dict[str, Any]:
    """Items 1 to 3 of the module docstring."""
    workdir = Path(tempfile.mkdtemp(prefix="rmq-bench-grpc-"))
    children: list[Child] = []
    try:
        namesrv, broker = _namesrv_and_broker(workdir, children)
        metrics_port = 0
        proxy = Child([sys.executable, "-m", "pocketmq.proxy.main", "-n", namesrv, "--listen", "127.0.0.1",
                       "--port", "0", "--metrics-port", "0", "--log-format", "json", "--log-level", "INFO"],
                      "PROXY READY")
        children.append(proxy)
        endpoints = proxy.wait_ready()
        for line in proxy.tail:
            if '"metrics_listening"' in line:
                metrics_port = int(json.loads(line)["port"])
        await AdminClient([namesrv]).update_topic(TOPIC, read_queues=8, write_queues=8)
        await asyncio.to_thread(wait_idle, broker)
        body = b"x" * args.body
        spec = {"endpoints": endpoints, "topic": TOPIC, "body": args.body, "warmup": 200}
        remoting = await _remoting_lone(namesrv, args.lone, body)
        grpc_lone = await _driver(python, "lone", {**spec, "count": args.lone}, 600)
        proxy_p50 = _proxy_send_p50(await _metrics(metrics_port)) if metrics_port else None
        marks: dict[str, float] = {}

        def started() -> None:
            marks.update(proxy=proxy.cpu_seconds() or 0.0, broker=broker.cpu_seconds() or 0.0)

        before = _calls(await _metrics(metrics_port)) if metrics_port else {}
        load = await _driver(python, "inflight", {**spec, "inflight": args.inflight, "duration": args.duration},
                             args.duration + 600, started)
        official = _load(load, args.inflight, proxy, broker, marks)
        if metrics_port:  # what the official client called per message sent (routes, heartbeats, telemetry...)
            after = _calls(await _metrics(metrics_port))
            sent = load["ok"] + load["failed"] + spec["warmup"]
            official["calls_per_msg"] = {method: (count - before.get(method, 0.0)) / sent
                                         for method, count in sorted(after.items())}
        remote = await _paced_remoting(namesrv, body, inflight=args.inflight, duration=args.duration,
                                       rate=official["msg_per_s"], mark=started)
        official["broker_remoting"] = {**remote, "msg_per_s": remote["ok"] / remote["elapsed_s"],
                                       "broker_cpu_us_per_msg": ((broker.cpu_seconds() or 0.0) - marks["broker"])
                                       / max(remote["ok"], 1) * 1e6}
        bare = await _bare(endpoints, body, lone=args.lone, inflight=args.inflight, duration=args.duration,
                           marks=marks, mark=started)
        return {
            "lone_remoting_ms": percentiles(remoting), "lone_grpc_ms": percentiles(grpc_lone["latencies_ms"]),
            "lone_bare_grpc_ms": percentiles(bare["latencies_ms"]), "proxy_send_p50_ms_bucket": proxy_p50,
            "inflight": official, "inflight_bare": _load(bare, args.inflight, proxy, broker, marks),
        }
    finally:
        for child in reversed(children):
            child.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _load(load: dict[str, Any], inflight: int, proxy: Child, broker: Child, marks: dict[str, float]) -> dict[str, Any]:
    sent = max(load["ok"], 1)
    return {"inflight": inflight, "ok": load["ok"], "failed": load["failed"],
            "msg_per_s": load["ok"] / load["elapsed_s"],
            "proxy_cpu_us_per_msg": ((proxy.cpu_seconds() or 0.0) - marks["proxy"]) / sent * 1e6,
            "broker_cpu_us_per_msg": ((broker.cpu_seconds() or 0.0) - marks["broker"]) / sent * 1e6}


def _print(results: dict[str, Any]) -> None:
    if "lone_remoting_ms" in results:
        _print_cluster(results)
    floor = results["floor"]
    print(f"grpc.aio floor (fixed answer, bare client, {floor['inflight']} in flight): {floor['msg_per_s']:.0f} "
          f"calls/s, {floor['cpu_us_per_call']:.0f} us CPU per call")
    local = results.get("local")
    if local is not None:
        print(f"local mode, {local['inflight']} in flight (official client): {local['msg_per_s']:.0f} msg/s "
              f"({local['ok']} ok, {local['failed']} failed); process CPU {local['process_cpu_us_per_msg']:.0f} us/msg"
              f" (idle: {local['idle_cpu_per_s'] * 1000:.0f} ms/s)")
        remote = local["broker_remoting"]
        print(f"  the broker alone over remoting at {remote['msg_per_s']:.0f} msg/s: "
              f"{local['broker_cpu_us_per_msg']:.0f} us/msg; so the proxy: {local['proxy_cpu_us_per_msg']:.0f} us/msg "
              f"({local['ratio']:.2f}x the broker's)")
        if len(local["turns"]) > 1:
            print(f"  that is the median of {len(local['turns'])} turns: " + ", ".join(
                f"{turn['msg_per_s']:.0f} msg/s {turn['proxy_cpu_us_per_msg']:.0f}/{turn['broker_cpu_us_per_msg']:.0f}"
                f" us {turn['ratio']:.2f}x" for turn in local["turns"]))


def _print_cluster(results: dict[str, Any]) -> None:
    remote, grpc = results["lone_remoting_ms"], results["lone_grpc_ms"]
    print(f"lone send, remoting (PocketMQ SDK):     p50 {remote['p50']:.3f} ms  p99 {remote['p99']:.3f} ms")
    print(f"lone send, gRPC (official 5.x client):  p50 {grpc['p50']:.3f} ms  p99 {grpc['p99']:.3f} ms")
    bare = results["lone_bare_grpc_ms"]
    print(f"lone send, gRPC (bare grpc.aio client): p50 {bare['p50']:.3f} ms  p99 {bare['p99']:.3f} ms "
          f"(added at p50: {bare['p50'] - remote['p50']:.3f} ms)")
    print(f"  added at p50: {grpc['p50'] - remote['p50']:.3f} ms; the proxy's own SendMessage p50 (histogram "
          f"bucket, broker round trip included): {results['proxy_send_p50_ms_bucket']} ms")
    for key, who in (("inflight", "official client"), ("inflight_bare", "bare grpc.aio client")):
        load = results[key]
        print(f"{load['inflight']} in flight ({who}): {load['msg_per_s']:.0f} msg/s ({load['ok']} ok, "
              f"{load['failed']} failed); CPU per message: proxy {load['proxy_cpu_us_per_msg']:.0f} us, "
              f"broker {load['broker_cpu_us_per_msg']:.0f} us")
        if "calls_per_msg" in load:
            print("  calls per message sent (warm-up included): " + ", ".join(f"{method} {share:.4f}"
                                                         for method, share in load["calls_per_msg"].items()))
        paced = load.get("broker_remoting")
        if paced is not None:
            print(f"  the broker alone over remoting at {paced['msg_per_s']:.0f} msg/s: "
                  f"{paced['broker_cpu_us_per_msg']:.0f} us/msg")
