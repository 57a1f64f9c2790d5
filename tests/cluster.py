"""In-process clusters for tests: name servers and brokers in the test's own event loop, port 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController

#: Small files so tests roll over and stay fast.
TEST_COMMIT_LOG_SIZE = 1 << 20
TEST_CQ_SIZE = 1000 * 20


async def start_namesrv(tmp: Path, name: str = "ns", **kw: Any) -> NamesrvController:
    ns = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", listen_port=0,
                                         kv_config_path=str(tmp / name / "kvConfig.json"), **kw))
    await ns.start()
    return ns


def broker_config_kwargs(tmp: Path, name: str, namesrv: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        broker_name=name, namesrv_addr=namesrv, listen_port=0, listen_host="127.0.0.1",
        store_path_root_dir=str(tmp / f"{name}-{kw.get('broker_id', 0)}"),
        mapped_file_size_commit_log=TEST_COMMIT_LOG_SIZE, mapped_file_size_consume_queue=TEST_CQ_SIZE,
        # How full the host's disk is must not make a test broker delete files or refuse puts.
        disk_max_used_space_ratio=100, disk_space_clean_forcibly_ratio=100, disk_space_warning_level_ratio=100,
    )
    base.update(kw)
    return base


async def start_broker(tmp: Path, name: str, namesrv: str, props: dict[str, str] | None = None,
                       **kw: Any) -> BrokerController:
    config = load_broker_config(props or {}, **broker_config_kwargs(tmp, name, namesrv, **kw))
    broker = BrokerController(config)
    await broker.start()
    return broker
