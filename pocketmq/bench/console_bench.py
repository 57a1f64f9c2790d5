"""``rmq-bench console``: how fast the console's list pages answer on a cluster with many topics and groups, and
how soon its dashboard is interactive in a browser.

A name server and one broker run as child processes (:func:`~pocketmq.bench.common.local_cluster`), and so does
``rmq-console`` (login on, a user made for the run). ``--fill requests`` (the default) fills the cluster through
the broker's admin requests, ``--concurrency`` at a time: ``--topics`` topics (UPDATE_AND_CREATE_TOPIC),
``--groups`` subscription groups each with a committed offset on every queue of one topic
(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, UPDATE_CONSUMER_OFFSET). ``--fill files`` writes the same topics, groups and
offsets into the broker's metadata files before it starts (seconds instead of minutes while creating a topic
re-registers every topic). Then ``--messages`` messages are spread over the first topics, so groups have lag. Then,
logged in over HTTP, it asks each list page ``--requests`` times, one request at a time as a person clicks, and
reads the server-side time from the ``Server-Timing`` header the console sets (and the client's wall time).
Finally, if Debian's chromium is there, Playwright opens the dashboard ``--page-loads`` times and reads, from the
page's own clock (ms from navigation start), when its DOM became interactive and when the charts held data.

It also times the broker requests one snapshot makes (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
GET_BROKER_CONSUME_STATS), which is what the console costs a broker every ``snapshotTtlMs`` while someone looks.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient
from pocketmq.bench.common import Child, local_cluster, percentiles
from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager, save_topics
from pocketmq.client import Message, Producer
from pocketmq.common.logs import configure_logging
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.console.users import add_user
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.headers import UpdateConsumerOffsetRequestHeader
from pocketmq.remoting.route import TopicConfigSerializeWrapper
from pocketmq.store.metadata import SubscriptionGroupConfig

USER, PASSWORD = "bench", "bench-password"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_TIMING = re.compile(r"app;dur=([0-9.]+)")
_CSRF = re.compile(r'name="_login_csrf" value="([^"]*)"')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topics", type=int, default=5000, help="topics to create (5000)")
    parser.add_argument("--groups", type=int, default=2000, help="consumer groups with offsets (2000)")
    parser.add_argument("--queues", type=int, default=4, help="queues per topic (4)")
    parser.add_argument("--messages", type=int, default=2000, help="messages spread over the first topics (2000)")
    parser.add_argument("--requests", type=int, default=100, help="requests per list page (100)")
    parser.add_argument("--page-loads", type=int, default=10, help="dashboard loads in chromium (10; 0: none)")
    parser.add_argument("--concurrency", type=int, default=32, help="admin requests in flight while filling (32)")
    parser.add_argument("--fill", choices=("requests", "files"), default="requests",
                        help="create topics and groups with admin requests, or lay the broker's metadata files")
    parser.add_argument("--pin", action="store_true", help="pin the broker to one CPU")
    parser.add_argument("--keep-dir", action="store_true", help="keep the cluster's directory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    configure_logging("console", "WARNING")  # the SDK's info lines would bury the figures
    summary: dict[str, Any] = {"load_before": os.getloadavg()}
    workdir = Path(tempfile.mkdtemp(prefix="rmq-bench-console-"))
    try:
        prepare = functools.partial(_seed_files, args=args) if args.fill == "files" else None
        with local_cluster(args, "console", prepare) as cluster:
            summary["fill"] = asyncio.run(_fill(cluster.namesrv, args))
            users = workdir / "users"
            add_user(users, USER, "admin", PASSWORD)
            console = Child([sys.executable, "-m", "pocketmq.console.main", "-n", cluster.namesrv, "--port", "0",
                             "--users-file", str(users), "--log-level", "WARNING"], "CONSOLE READY")
            try:
                base = "http://" + console.wait_ready()
                summary["broker_requests_ms"] = asyncio.run(_broker_costs(cluster.namesrv))
                summary["pages"] = asyncio.run(_pages(base, args.requests, args))
                summary["dashboard"] = _dashboard(base, args.page_loads, workdir)
                summary["console_cpu_s"] = console.cpu_seconds()
            finally:
                console.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary["load_after"] = os.getloadavg()
    _report(summary)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


# -- filling the cluster ------------------------------------------------------------------------------------


async def _bounded(jobs: Iterable[Callable[[], Awaitable[object]]], concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[object]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


def topic_name(i: int) -> str:
    return f"BenchTopic{i:05d}"


def group_name(i: int) -> str:
    return f"BenchGroup{i:05d}"


def _seed_files(store_dir: Path, args: argparse.Namespace) -> None:
    """The broker's topics.json, subscriptionGroup.json and consumerOffset.json, as the requests would leave them."""
    config_dir = store_dir / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    topics = {topic_name(i): TopicConfig(topic_name(i), args.queues, args.queues, 6) for i in range(args.topics)}
    save_topics(str(config_dir / "topics.json"), TopicConfigSerializeWrapper(topics, DataVersion.now()))
    groups = SubscriptionGroupManager(str(config_dir / "subscriptionGroup.json"), auto_create=False)
    offsets = ConsumerOffsetManager(str(config_dir / "consumerOffset.json"))
    for i in range(args.groups):
        groups.update(SubscriptionGroupConfig(group_name(i)))
        for queue_id in range(args.queues):
            offsets.commit_offset(group_name(i), topic_name(i % max(args.topics, 1)), queue_id, 0)
    groups.persist()
    offsets.persist()


async def _fill(namesrv: str, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {"topics_s": 0.0, "groups_s": 0.0}
    async with AdminClient([namesrv], timeout=60.0) as admin:
        if args.fill == "requests":
            await _fill_by_requests(admin, args, out)
    started = time.perf_counter()
    async with Producer("BenchConsolePG", namesrv_addr=namesrv) as producer:
        spread = max(min(args.topics, 200), 1)
        await _bounded((functools.partial(producer.send, Message(topic_name(i % spread), b"x" * 256))
                        for i in range(args.messages)), args.concurrency)
    out["messages_s"] = round(time.perf_counter() - started, 1)
    return out


async def _fill_by_requests(admin: AdminClient, args: argparse.Namespace, out: dict[str, float]) -> None:
    broker = (await admin.master_addrs())[0]
    started = time.perf_counter()
    await _bounded((functools.partial(admin.update_topic, topic_name(i), read_queues=args.queues,
                                      write_queues=args.queues, broker_addr=broker)
                    for i in range(args.topics)), args.concurrency)
    out["topics_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()

    async def group(i: int) -> None:
        name = group_name(i)
        await api_ops.update_sub_group(admin, {"groupName": name}, [broker])
        for queue_id in range(args.queues):
            fields = UpdateConsumerOffsetRequestHeader(name, topic_name(i % max(args.topics, 1)), queue_id,
                                                       0).to_fields()
            await admin.call(broker, RequestCode.UPDATE_CONSUMER_OFFSET, fields)

    await _bounded((functools.partial(group, i) for i in range(args.groups)), args.concurrency)
    out["groups_s"] = round(time.perf_counter() - started, 1)


async def _broker_costs(namesrv: str) -> dict[str, dict[str, float]]:
    async with AdminClient([namesrv], timeout=60.0) as admin:
        broker = (await admin.master_addrs())[0]
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "GET_ALL_TOPIC_CONFIG": lambda: admin.all_topic_configs(broker),
            "GET_ALL_SUBSCRIPTIONGROUP_CONFIG": lambda: api_ops.sub_groups(admin, broker),
            "GET_BROKER_CONSUME_STATS": lambda: api_ops.broker_consume_stats(admin, broker),
        }
        out = {}
        for name, call in calls.items():
            times = []
            for _ in range(5):
                started = time.perf_counter()
                await call()
                times.append((time.perf_counter() - started) * 1000)
            out[name] = {k: round(v, 1) for k, v in percentiles(times).items() if k in ("p50", "max")}
        return out


# -- the pages ----------------------------------------------------------------------------------------------


async def _login(session: aiohttp.ClientSession, base: str) -> None:
    async with session.get(base + "/login") as r:
        token = _CSRF.search(await r.text())
    assert token is not None, "no login form"
    async with session.post(base + "/login", data={"_login_csrf": token.group(1), "username": USER,
                                                   "password": PASSWORD}, allow_redirects=False) as r:
        if r.status != 303:
            raise RuntimeError(f"login failed: {r.status}")


async def _pages(base: str, requests: int, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    pages = {
        "topics": "/topics",
        "topics search": "/topics?q=BenchTopic012",
        "topics sorted, page 50": "/topics?sort=queues&dir=desc&page=50",
        "groups": "/groups",
        "groups by lag, page 20": "/groups?sort=lag&dir=desc&page=20",
        "groups search": "/groups?q=BenchGroup001",
    }
    out: dict[str, dict[str, float]] = {}
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        await _login(session, base)
        for path in pages.values():  # the first view builds the snapshot: timed apart, below
            async with session.get(base + path) as r:
                await r.read()
        started = time.perf_counter()
        async with session.get(base + "/groups") as r:
            text = await r.text()
        built = re.search(r"snapshot built in ([0-9.]+) ms", text)
        out["snapshot"] = {"build_ms": float(built.group(1)) if built else -1.0,
                           "first_view_ms": round((time.perf_counter() - started) * 1000, 1)}
        for label, path in pages.items():
            server, wall = [], []
            for _ in range(requests):
                started = time.perf_counter()
                async with session.get(base + path) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"{path}: {r.status}")
                    timing = _TIMING.search(r.headers.get("Server-Timing", ""))
                wall.append((time.perf_counter() - started) * 1000)
                server.append(float(timing.group(1)) if timing else float("nan"))
            s, w = percentiles(server), percentiles(wall)
            out[label] = {"server_p50": round(s["p50"], 1), "server_p95": round(_p95(server), 1),
                          "server_max": round(s["max"], 1), "wall_p95": round(_p95(wall), 1),
                          "wall_p50": round(w["p50"], 1)}
    return out


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


# -- the dashboard in a browser -----------------------------------------------------------------------------


def _dashboard(base: str, loads: int, workdir: Path) -> dict[str, Any]:
    if loads <= 0:
        return {"skipped": "--page-loads 0"}
    if not Path(CHROMIUM).exists():
        return {"skipped": f"{CHROMIUM} missing (make install-chromium)"}
    from playwright.sync_api import sync_playwright

    interactive, ready = [], []
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(workdir / "profile"), executable_path=CHROMIUM,
                                                       headless=True, args=CHROMIUM_FLAGS)
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(base + "/login")
        page.fill("input[name=username]", USER)
        page.fill("input[name=password]", PASSWORD)
        page.click("#login-form button[type=submit]")
        try:
            page.wait_for_selector("#broker-table")
        except Exception:
            print(page.url, page.content()[:3000], file=sys.stderr)
            raise
        for _ in range(loads):
            page.goto(base + "/")
            page.wait_for_function("document.body.dataset.ready === '1'", timeout=30_000)
            nav = page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
            entry = json.loads(nav)
            interactive.append(float(entry["domInteractive"]))
            ready.append(float(page.evaluate("window.__consoleReadyAt")))
        context.close()
    return {"dom_interactive_ms": {k: round(v, 1) for k, v in percentiles(interactive).items()
                                   if k in ("p50", "max")},
            "charts_ready_ms": {k: round(v, 1) for k, v in percentiles(ready).items() if k in ("p50", "max")}}


def _report(summary: dict[str, Any]) -> None:
    fill = summary["fill"]
    print(f"filled: topics {fill['topics_s']} s, groups {fill['groups_s']} s, messages {fill['messages_s']} s")
    for name, t in summary["broker_requests_ms"].items():
        print(f"broker {name:36s} p50 {t['p50']:8.1f} ms  max {t['max']:8.1f} ms")
    snap = summary["pages"].pop("snapshot")
    print(f"snapshot build {snap['build_ms']} ms (the first view of a list waits for it: {snap['first_view_ms']} ms)")
    print(f"{'page':28s} {'server p50':>11s} {'server p95':>11s} {'server max':>11s} {'wall p95':>9s}")
    for label, t in summary["pages"].items():
        print(f"{label:28s} {t['server_p50']:9.1f}ms {t['server_p95']:9.1f}ms {t['server_max']:9.1f}ms "
              f"{t['wall_p95']:7.1f}ms")
    summary["pages"]["snapshot"] = snap
    print("dashboard:", json.dumps(summary["dashboard"]))
    print(f"load average before {summary['load_before']}, after {summary['load_after']}")
