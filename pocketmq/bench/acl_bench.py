"""``rmq-bench acl``: what ACL signatures cost per request.

* **sign** — the SDK's ``SessionCredentials.sign`` on a SEND_MESSAGE_V2 request (its usual 13 header fields and
  a ``--size`` byte body, 1 KiB by default): µs per request;
* **validate** — the broker's ``PlainAccessValidator.validate`` on that signed request (signature recomputed,
  compared in constant time, topic permission checked): µs per request;
* **sends** — ``--sends`` sequential sends (default 3,000) through the SDK to an in-process broker (one name
  server, one ASYNC_MASTER broker in a temporary directory, the producer in the same event loop) with ACL off and
  unsigned, then with ``aclEnable=true`` and signed requests: mean µs per send and the difference.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import uvloop

from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer, SessionCredentials
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import SendMessageRequestHeaderV2
from pocketmq.remoting.plain_acl.config import load_plain_acl
from pocketmq.remoting.plain_acl.validator import PlainAccessValidator

ACCESS_KEY, SECRET_KEY = "benchUser", "benchSecret"
ACL_FILE = f"""accounts:
  - accessKey: {ACCESS_KEY}
    secretKey: {SECRET_KEY}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=int, default=1024, help="body bytes (1024)")
    parser.add_argument("--sends", type=int, default=3000, help="sequential sends per mode (3000)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    summary: dict[str, Any] = {"micro": _micro(args.size)}
    summary["sends"] = uvloop.run(_sends(args.sends, args.size))
    for label, value in {**summary["micro"], **summary["sends"]}.items():
        print(f"{label:42s} {value:8.2f} µs")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def _request(size: int) -> RemotingCommand:
    header = SendMessageRequestHeaderV2("benchPG", "BenchTopic", "TBW102", 4, 1, 0, int(time.time() * 1000), 0,
                                        "TAGS\x01t\x02UNIQ_KEY\x017F0000010001000000000000000000", 0, False, 16, False)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_fields(), b"x" * size)


def _micro(size: int) -> dict[str, float]:
    credentials = SessionCredentials(ACCESS_KEY, SECRET_KEY)
    request = _request(size)
    loops = 50_000
    sign = timeit.timeit(lambda: credentials.sign(request), number=loops) / loops * 1e6
    validator = PlainAccessValidator(load_plain_acl(ACL_FILE))
    validate = timeit.timeit(lambda: validator.validate(request, "10.0.0.1:5555"), number=loops) / loops * 1e6
    return {"sign one request (SDK)": sign, "validate one request (broker)": validate}


async def _sends(count: int, size: int) -> dict[str, float]:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="acl-bench-") as tmp:
        acl_file = Path(tmp) / "plain_acl.yml"
        acl_file.write_text(ACL_FILE)
        for label, props, credentials in (
                ("send, ACL off, unsigned", {}, None),
                ("send, ACL on, signed", {"aclEnable": "true", "plainAclFile": str(acl_file)},
                 SessionCredentials(ACCESS_KEY, SECRET_KEY))):
            results[label] = await _send_loop(Path(tmp) / label.replace(" ", "").replace(",", "-"), props,
                                              credentials, count, size)
    on, off = results["send, ACL on, signed"], results["send, ACL off, unsigned"]
    results["difference per send"] = on - off
    return results


async def _send_loop(root: Path, props: dict[str, str], credentials: SessionCredentials | None, count: int,
                     size: int) -> float:
    ns = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", listen_port=0,
                                         kv_config_path=str(root / "kv.json")))
    await ns.start()
    config = load_broker_config(props, broker_name="bench", namesrv_addr=ns.addr, listen_port=0,
                                listen_host="127.0.0.1", store_path_root_dir=str(root / "b"),
                                disk_max_used_space_ratio=100, disk_space_clean_forcibly_ratio=100,
                                disk_space_warning_level_ratio=100)
    broker = BrokerController(config)
    await broker.start()
    try:
        async with Producer("AclBenchPG", namesrv_addr=ns.addr, credentials=credentials) as producer:
            body = b"x" * size
            for _ in range(200):  # warm-up: routes, connections, topic creation
                await producer.send(Message("AclBench", body))
            started = time.perf_counter()
            for _ in range(count):
                await producer.send(Message("AclBench", body))
            return (time.perf_counter() - started) / count * 1e6
    finally:
        await broker.stop()
        await ns.stop()
