"""The SDK behaves as a library: importing and using it configures nothing global and writes nothing to stdout;
its records go through :mod:`logging` under ``pocketmq.*`` names and appear only once the application
configures logging (docs/logging.md).

An application is a subprocess that imports pocketmq, sends and consumes against a real name server and broker
(subprocesses too), and prints one line of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import ROOT, Proc, start_broker, start_namesrv

pytestmark = pytest.mark.timeout(180)

APPLICATION = r"""
import asyncio, json, logging, signal, sys, warnings

if sys.argv[2] == "configured":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
before = {
    "root_handlers": list(logging.getLogger().handlers), "root_level": logging.getLogger().level,
    "meta_path": list(sys.meta_path), "policy": type(asyncio.get_event_loop_policy()).__name__,
    "signals": [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)], "warnings": list(warnings.filters),
}

import structlog
import pocketmq
from pocketmq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

async def main(namesrv):
    got = asyncio.Event()
    async with Producer("EtiquettePG", namesrv_addr=namesrv) as producer:
        await producer.send(Message("EtiquetteT", b"hello"))

    async def handle(message):
        got.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("EtiquetteCG", namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                            rebalance_interval=1.0)
    consumer.subscribe("EtiquetteT", "*")
    consumer.register_handler(handle)
    await consumer.start()
    try:
        await asyncio.wait_for(got.wait(), 60)
    finally:
        await consumer.shutdown()

asyncio.run(main(sys.argv[1]))
import pocketmq.common.compiled as compiled
added = [type(f).__name__ for f in sys.meta_path if f not in before["meta_path"]]
after = {
    "root_handlers": list(logging.getLogger().handlers), "root_level": logging.getLogger().level,
    "meta_path": [f for f in sys.meta_path if type(f).__name__ != "SourceFinder"],
    "policy": type(asyncio.get_event_loop_policy()).__name__,
    "signals": [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)], "warnings": list(warnings.filters),
}
changed = sorted(k for k in before if before[k] != after[k])
print(json.dumps({"changed": changed, "finder": added, "active": compiled.ACTIVE,
                  "structlog_configured": structlog.is_configured()}))
"""


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("etiquette")
    ns = start_namesrv(kv_dir=tmp)
    broker: Proc | None = None
    try:
        broker = start_broker(namesrv=ns.addr, store_dir=tmp / "store")
        yield ns.addr
    finally:
        if broker is not None:
            broker.terminate(30)
        ns.terminate(30)


def _application(namesrv: str, mode: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "POCKETMQ_PURE_PYTHON"}, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", APPLICATION, namesrv, mode], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _own_line(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # the application's line and nothing of the SDK's
    result: dict[str, object] = json.loads(lines[0])
    assert result["changed"] == [], result  # no handler, level, policy, signal or warning filter touched
    assert result["structlog_configured"] is False
    # The pure-source finder appears only when the extensions beside the sources must not run (docs/install.md).
    assert result["finder"] == [] or (result["finder"] == ["SourceFinder"] and result["active"] != "cython")
    return result


def test_an_application_that_configures_no_logging_sees_nothing(namesrv: str, tmp_path: Path) -> None:
    done = _application(namesrv, "silent", tmp_path)
    _own_line(done)
    assert done.stderr == ""


def test_configured_logging_shows_the_sdk_records_under_pocketmq_names(namesrv: str, tmp_path: Path) -> None:
    done = _application(namesrv, "configured", tmp_path)
    _own_line(done)
    records = [line.split(":", 2) for line in done.stderr.splitlines() if line.startswith(("INFO:", "WARNING:"))]
    names = {name for _level, name, _message in records}
    assert names and all(name.startswith("pocketmq.") for name in names), names
    events = {(name, message.split()[0]) for _level, name, message in records}
    assert {("pocketmq.client.instance", "client_instance_started"), ("pocketmq.client.producer", "producer_started"),
            ("pocketmq.client.push_consumer", "push_consumer_started")} <= events, events
    started = next(message for _l, name, message in records if message.startswith("producer_started"))
    assert "group=EtiquettePG" in started  # bound context rendered as key=value
