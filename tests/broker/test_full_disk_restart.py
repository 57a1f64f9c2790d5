"""A full disk, end to end, with real broker processes on a file system the test makes (a loop-mounted ext4 image,
a size-limited tmpfs; skipped with the reason where mounting is not permitted):

* with RocketMQ's disk ratios (75/85/90) and the default ``cleanFileForciblyEnable=false`` on ext4, with the
  ratios at 99 on ext4 (the disk reaches 100 %, the reservation refuses), and with the defaults on tmpfs: sends are
  refused with SERVICE_NOT_AVAILABLE (14), no file is deleted, every acknowledged message stays readable; the
  broker is killed (SIGKILL) while the disk is full, starts again (no SIGBUS on tmpfs), serves every acknowledged
  message, refuses writes, and takes them again once the test frees space; ``rmq-admin diskStatus`` and
  ``/metrics`` say what holds the disk;
* with ``cleanFileForciblyEnable=true``: the oldest files go although nothing expired, and the broker reports
  exactly how many unconsumed messages of the consumer group it dropped (runtime info, ``diskStatus``,
  ``/metrics``, the ``commit_log_files_deleted_forcibly`` log lines).

A filler file takes most of the disk first, so the sends only have to fill the last ~12 MiB (4 MiB commit-log
files, 1 MiB reservation windows, a small index). Brokers are stopped before the file system is unmounted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin import cli
from pocketmq.broker.address_file import read_address
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import TopicQueueRequestHeader, UpdateConsumerOffsetRequestHeader
from tests.broker.disk_mounts import fill, fill_up, free_bytes, mounted
from tests.broker.test_broker import send
from tests.broker.test_consume import bodies, pull_request
from tests.helpers import eventually
from tests.ops.test_metrics import metrics_port, scrape
from tests.procs import Proc, start_namesrv

pytestmark = pytest.mark.timeout(240)

TOPIC = "Full"
QUEUES = 2
BODY = 4000
COMMIT_LOG_FILE = 4 << 20
HEADROOM = 12 << 20
"""What the filler leaves free for the broker."""
MAX_SENDS = 12_000
"""Bounds every fill loop (48 MB of bodies: more than any of the disks here can take)."""
BATCH = 16
PROPS = {
    "flushDiskType": "SYNC_FLUSH", "mappedFileSizeCommitLog": str(COMMIT_LOG_FILE),
    "reserveWindowCommitLog": str(1 << 20), "reserveWindowConsumeQueue": str(16 << 10),
    "maxHashSlotNum": "10000", "maxIndexNum": "40000", "cleanResourceInterval": "200",
    "diskMaxUsedSpaceRatio": "75", "diskSpaceCleanForciblyRatio": "85", "diskSpaceWarningLevelRatio": "90",
}

Acked = dict[tuple[int, int], bytes]
"""(queue id, queue offset) -> body of every acknowledged send."""


class Brokers:
    """The processes a test started: killed in teardown, before the file system goes."""

    def __init__(self, base: Path, disk: Path, props: dict[str, str]) -> None:
        self.base = base
        self.store = disk / "store"
        self.config = base / "broker.properties"  # off the small disk: a full disk must not stop a restart
        self.config.write_text("".join(f"{k}={v}\n" for k, v in {**PROPS, **props}.items()))
        self.procs: list[Proc] = []
        self.ns = self._keep(start_namesrv(kv_dir=base))

    def _keep(self, proc: Proc) -> Proc:
        self.procs.append(proc)
        return proc

    def start_broker(self) -> Proc:
        args = [sys.executable, "-m", "pocketmq.broker.main", "-n", self.ns.addr, "--listen-host", "127.0.0.1",
                "--listen-port", "0", "--broker-name", "broker-full", "--store-dir", str(self.store),
                "--log-format", "json", "--metrics-port", "0", "-c", str(self.config)]
        proc = self._keep(Proc(args, "BROKER READY"))
        proc.wait_ready(60)
        return proc

    def kill_all(self) -> None:
        for proc in reversed(self.procs):
            proc.kill()


@pytest.fixture
def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Brokers]]:
    kind, size_mib, props = request.param
    with mounted(kind, tmp_path, size_mib) as disk:
        brokers = Brokers(tmp_path, disk, props)
        try:
            yield disk, brokers
        finally:
            brokers.kill_all()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


def body_of(i: int) -> bytes:
    return i.to_bytes(4, "big") * (BODY // 4)


async def send_batch(client: RemotingClient, addr: str, first: int, acked: Acked) -> RemotingCommand | None:
    """Send ``BATCH`` messages at once (round robin over the queues); the first refusal, if any."""
    answers = await asyncio.gather(*(send(client, addr, TOPIC, body_of(i), queue_id=i % QUEUES)
                                     for i in range(first, first + BATCH)))
    refused = None
    for i, resp in zip(range(first, first + BATCH), answers, strict=True):
        if resp.code == ResponseCode.SUCCESS:
            assert resp.ext_fields is not None
            acked[(i % QUEUES, int(resp.ext_fields["queueOffset"]))] = body_of(i)
        elif refused is None:
            refused = resp
    return refused


async def fill_until_refused(client: RemotingClient, addr: str, acked: Acked,
                             first: int) -> tuple[int, RemotingCommand]:
    for start in range(first, first + MAX_SENDS, BATCH):
        refused = await send_batch(client, addr, start, acked)
        if refused is not None:
            return start + BATCH, refused
    raise AssertionError(f"{MAX_SENDS} sends and none refused")


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    assert resp.code == ResponseCode.SUCCESS
    table: dict[str, str] = json.loads(bytes(resp.body or b"{}"))["table"]
    return table


async def retention_runs(client: RemotingClient, addr: str, runs: int) -> dict[str, str]:
    """Wait until the broker's retention has run ``runs`` more times; its runtime info then."""
    seen = [(await runtime(client, addr)).get("diskReportTimestamp", "")]

    async def ran() -> bool:
        stamp = (await runtime(client, addr)).get("diskReportTimestamp", "")
        if stamp != seen[-1]:
            seen.append(stamp)
        return len(seen) > runs

    await eventually(ran, timeout=15, interval=0.05, message=f"{runs} retention runs")
    return await runtime(client, addr)


async def min_offset(client: RemotingClient, addr: str, queue_id: int) -> int:
    fields = TopicQueueRequestHeader(TOPIC, queue_id).to_fields()
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, fields))
    assert resp.code == ResponseCode.SUCCESS
    return int(resp.field("offset") or 0)


async def check_readable(client: RemotingClient, addr: str, acked: Acked, *, skip_below: dict[int, int] | None = None,
                         ) -> None:
    """Every acknowledged message (of a queue offset at or past ``skip_below``), pulled over the wire, whole and
    in its place."""
    for queue_id in range(QUEUES):
        want = {o: b for (q, o), b in acked.items() if q == queue_id and o >= (skip_below or {}).get(queue_id, 0)}
        got: dict[int, bytes] = {}
        offset = min(want, default=0)
        while len(got) < len(want):
            resp = await client.invoke(addr, pull_request(TOPIC, offset, queue_id=queue_id, max_nums=32))
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark, queue_id, offset)
            batch = bodies(resp)
            assert batch
            for body in batch:
                got[offset] = body
                offset += 1
        assert got == want, f"queue {queue_id}: {len(got)} read, {len(want)} acknowledged"


async def admin_disk_status(ns: str, addr: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert await asyncio.to_thread(cli.main, ["diskStatus", "-n", ns, "-b", addr, "--json"]) == 0
    status: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert await asyncio.to_thread(cli.main, ["diskStatus", "-n", ns, "-b", addr]) == 0
    status["text"] = capsys.readouterr().out
    return status


def log_events(proc: Proc, event: str) -> list[dict[str, Any]]:
    out = []
    for line in list(proc.lines):
        if f'"{event}"' in line:
            item = json.loads(line)
            if item.get("event") == event:
                out.append(item)
    return out


SCENARIOS = [
    pytest.param(("ext4", 100, {}), id="ext4-rocketmq-ratios"),
    pytest.param(("ext4", 100, {"diskMaxUsedSpaceRatio": "99", "diskSpaceCleanForciblyRatio": "99",
                                "diskSpaceWarningLevelRatio": "99"}), id="ext4-ratios-99"),
    pytest.param(("tmpfs", 80, {}), id="tmpfs-rocketmq-ratios"),
]


@pytest.mark.parametrize("scenario", SCENARIOS, indirect=True)
async def test_a_full_disk_refuses_sends_loses_nothing_and_restarts_after_sigkill(
        scenario: tuple[Path, Brokers], client: RemotingClient, capsys: pytest.CaptureFixture[str]) -> None:
    disk, brokers = scenario
    broker = brokers.start_broker()
    acked: Acked = {}
    assert await send_batch(client, broker.addr, 0, acked) is None
    filler = disk / "filler"
    await asyncio.to_thread(fill, filler, free_bytes(disk) - HEADROOM)

    sent, refused = await fill_until_refused(client, broker.addr, acked, BATCH)
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refused.code, refused.remark)
    assert "disk is full" in (refused.remark or ""), refused.remark
    # MiBs of the headroom were taken before the refusal; how many depends on when the periodic disk check ran
    assert len(acked) > 500, len(acked)
    info = await retention_runs(client, broker.addr, 2)  # retention ran on the full disk: nothing went
    assert info["commitLogMinOffset"] == "0" and info["forcedCleanFiles"] == "0"
    assert info["expiredDeletedFiles"] == "0" and info["cleanFileForciblyEnable"] == "false"
    assert info["diskFull"] == "true" and info["storeWritable"] == "false"
    again = await send(client, broker.addr, TOPIC, b"still full?")
    assert again.code == ResponseCode.SERVICE_NOT_AVAILABLE
    await check_readable(client, broker.addr, acked)

    # What holds the disk: no group consumes the topic, so all of it; nothing is reclaimable.
    status = await admin_disk_status(brokers.ns.addr, broker.addr, capsys)
    assert status["writable"] is False and status["reclaimableExpiredBytes"] == 0
    assert status["reclaimableConsumedBytes"] == 0 and status["heldBytes"] == int(info["commitLogMaxOffset"])
    assert [(h["topic"], h["group"], h["messages"]) for h in status["heldBy"]] == [(TOPIC, "(none)", len(acked))]
    assert "REFUSED" in status["text"] and "Full" in status["text"], status["text"]
    metrics = scrape(metrics_port(broker))
    held = {(s["topic"], s["group"]): v for s, v in metrics["pocketmq_store_disk_held_by_bytes"]}
    assert held == {(TOPIC, "(none)"): status["heldBy"][0]["bytes"]}
    reclaimable = {s["kind"]: v for s, v in metrics["pocketmq_store_disk_reclaimable_bytes"]}
    assert reclaimable == {"expired": 0, "consumed": 0}
    assert [v for _s, v in metrics["pocketmq_store_disk_full"]] == [1]

    broker.signal(9)  # SIGKILL while the disk is full
    assert broker.popen.wait(10) == -9
    broker = brokers.start_broker()  # no SIGBUS, on tmpfs too
    assert broker.popen.poll() is None
    await check_readable(client, broker.addr, acked)
    sent, refused = await fill_until_refused(client, broker.addr, acked, sent)  # what was reserved, then refused
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refused.code, refused.remark)
    await check_readable(client, broker.addr, acked)

    await asyncio.to_thread(filler.unlink)  # space returns: the broker takes sends again

    async def accepted() -> bool:
        return await send_batch(client, broker.addr, sent, acked) is None

    await eventually(accepted, timeout=20, interval=0.1, message="sends accepted after space returned")
    await check_readable(client, broker.addr, acked)
    info = await runtime(client, broker.addr)
    assert info["storeWritable"] == "true" and info["commitLogMinOffset"] == "0"
    assert broker.terminate() == 0


@pytest.mark.parametrize("scenario", [pytest.param(("tmpfs", 48, {}), id="tmpfs")], indirect=True)
async def test_a_broker_starts_on_a_disk_without_a_free_byte(scenario: tuple[Path, Brokers],
                                                             client: RemotingClient) -> None:
    """Killed, then its disk filled to the last byte by someone else: the broker still starts, serves what it
    acknowledged, refuses sends naming the disk, and leaves no address record (the killed run's one is removed)."""
    disk, brokers = scenario
    broker = brokers.start_broker()
    acked: Acked = {}
    assert await send_batch(client, broker.addr, 0, acked) is None
    broker.signal(9)
    assert broker.popen.wait(10) == -9
    assert read_address(brokers.store) == broker.addr  # a crash leaves the record behind
    await asyncio.to_thread(fill_up, disk / "filler")
    assert free_bytes(disk) == 0

    broker = brokers.start_broker()
    await check_readable(client, broker.addr, acked)
    refused = await send(client, broker.addr, TOPIC, b"no room")
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refused.code, refused.remark)
    assert "disk is full" in (refused.remark or ""), refused.remark
    assert read_address(brokers.store) is None
    assert log_events(broker, "broker_address_not_recorded")
    code = broker.terminate()
    assert code == 0, broker.stderr_text()[-6000:]


async def commit_offset(client: RemotingClient, addr: str, group: str, queue_id: int, offset: int) -> None:
    fields = UpdateConsumerOffsetRequestHeader(group, TOPIC, queue_id, offset).to_fields()
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest.mark.parametrize("scenario", [pytest.param(("ext4", 100, {"cleanFileForciblyEnable": "true"}),
                                                   id="ext4-forced")], indirect=True)
async def test_forced_cleaning_when_enabled_reports_exactly_what_it_dropped(
        scenario: tuple[Path, Brokers], client: RemotingClient, capsys: pytest.CaptureFixture[str]) -> None:
    disk, brokers = scenario
    broker = brokers.start_broker()
    acked: Acked = {}
    for start in range(0, 256, BATCH):
        assert await send_batch(client, broker.addr, start, acked) is None
    consumed = {0: 100, 1: 0}  # group G read 100 messages of queue 0, none of queue 1
    for queue_id, offset in consumed.items():
        await commit_offset(client, broker.addr, "G", queue_id, offset)
    await asyncio.to_thread(fill, disk / "filler", free_bytes(disk) - HEADROOM)

    sent = 256
    deadline = time.monotonic() + 120
    while int((await runtime(client, broker.addr))["forcedCleanFiles"]) < 2:  # the disk passes 85 %: files go
        assert sent < MAX_SENDS and time.monotonic() < deadline, "forced cleaning never deleted two files"
        await send_batch(client, broker.addr, sent, acked)  # refused or not: retention frees room again
        sent += BATCH
    info = await retention_runs(client, broker.addr, 1)  # the queues' min offsets are corrected by now
    files = int(info["forcedCleanFiles"])
    assert int(info["commitLogMinOffset"]) == files * COMMIT_LOG_FILE
    assert int(info["forcedCleanBytes"]) == files * COMMIT_LOG_FILE and info["expiredDeletedFiles"] == "0"
    lows = {q: await min_offset(client, broker.addr, q) for q in range(QUEUES)}
    assert lows[0] > consumed[0] and lows[1] > 0
    lost = sum(max(0, lows[q] - consumed[q]) for q in range(QUEUES))
    assert info["forcedCleanDroppedByTopicGroup"] == f"{TOPIC}@G={lost}"

    deletions = log_events(broker, "commit_log_files_deleted_forcibly")
    assert sum(d["count"] for d in deletions) == files and all(d["forced"] for d in deletions)
    assert sum(d["unconsumed_dropped"] for d in deletions) == lost
    assert sum(d["dropped"].get(f"{TOPIC}@G", 0) for d in deletions) == lost
    status = await admin_disk_status(brokers.ns.addr, broker.addr, capsys)
    assert status["cleanFileForciblyEnable"] is True
    assert status["forcedClean"] == {"files": files, "bytes": files * COMMIT_LOG_FILE, "dropped": {f"{TOPIC}@G": lost}}
    metrics = scrape(metrics_port(broker))
    dropped = {(s["reason"], s["topic"], s["group"]): v
               for s, v in metrics["pocketmq_store_deleted_unconsumed_messages"]}
    assert dropped == {("forced", TOPIC, "G"): lost}

    old = await client.invoke(broker.addr, pull_request(TOPIC, 0, queue_id=1, max_nums=32))
    assert old.code != ResponseCode.SUCCESS and old.field("nextBeginOffset") == str(lows[1])  # gone, and said so
    await check_readable(client, broker.addr, acked, skip_below=lows)  # everything kept is whole


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    """A failed start is one log line with the reason, then exit status 1 (here: the store is another broker's)."""
    with mounted("tmpfs", tmp_path, 16) as disk:
        brokers = Brokers(tmp_path, disk, {})
        try:
            brokers.start_broker()
            args = [sys.executable, "-m", "pocketmq.broker.main", "-n", brokers.ns.addr, "--listen-host", "127.0.0.1",
                    "--listen-port", "0", "--store-dir", str(brokers.store), "--log-format", "json",
                    "-c", str(brokers.config)]
            second = Proc(args, "BROKER READY")
            brokers.procs.append(second)
            assert second.popen.wait(60) == 1
            failed = [json.loads(line) for line in second.lines if '"server_start_failed"' in line]
            assert len(failed) == 1 and "in use by another store" in failed[0]["error"], second.stderr_text()[-2000:]
            assert failed[0]["level"] == "error" and failed[0]["error_type"] == "StoreError"
        finally:
            brokers.kill_all()
