"""brokerIP1 and brokerIP2: host names resolved once at start, brokerIP2 the HA address a master gives its slaves."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pocketmq.broker.config import load_broker_config
from pocketmq.common.config import ConfigError
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import SendMessageRequestHeaderV2
from pocketmq.store.config import BrokerRole
from tests.cluster import start_broker
from tests.helpers import eventually

#: A label longer than DNS allows: refused before any lookup leaves the machine.
UNRESOLVABLE = "x" * 64 + ".example"


def test_a_host_name_is_resolved_and_its_address_advertised_and_stored() -> None:
    config = load_broker_config({"brokerIP1": "localhost", "brokerIP2": "localhost", "listenPort": "10911"})
    assert config.broker_ip1 in ("127.0.0.1", "::1") and config.broker_ip2 == config.broker_ip1
    assert config.store.store_host == f"{config.broker_ip1}:10911"  # written into every record and message id


def test_addresses_are_kept_and_brokerIP2_defaults_to_none() -> None:
    config = load_broker_config({"brokerIP1": "10.1.2.3"})
    assert (config.broker_ip1, config.broker_ip2) == ("10.1.2.3", None)
    assert load_broker_config({}, broker_ip1="::1").broker_ip1 == "::1"


@pytest.mark.parametrize("key", ["brokerIP1", "brokerIP2"])
def test_a_name_that_does_not_resolve_is_a_config_error_naming_the_key(key: str) -> None:
    with pytest.raises(ConfigError, match=f"{key} '{UNRESOLVABLE}' is neither an IP address nor a host name"):
        load_broker_config({key: UNRESOLVABLE})


def test_rmq_broker_refuses_an_unresolvable_name_with_exit_2(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "--store-dir", str(tmp_path),
                          "--broker-ip", UNRESOLVABLE, "--print-config"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "brokerIP1" in bad.stderr
    shown = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "--store-dir", str(tmp_path),
                            "--broker-ip", "localhost", "--broker-ip2", "127.0.0.1", "--print-config"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert "brokerIP2=127.0.0.1" in shown and "brokerIP1=localhost" not in shown


async def test_slaves_replicate_from_brokerIP2(tmp_path: Path, namesrv: NamesrvController) -> None:
    """A master that advertises 127.0.0.2 to clients and 127.0.0.1 to its slaves: the slave is told the
    brokerIP2 address, connects there, and a SYNC_MASTER send is acknowledged by it."""
    master = await start_broker(tmp_path, "broker-a", namesrv.addr, broker_role=BrokerRole.SYNC_MASTER,
                                listen_host="127.0.0.2", broker_ip1="127.0.0.2", broker_ip2="127.0.0.1")
    slave = await start_broker(tmp_path, "broker-a", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    client = RemotingClient()
    try:
        assert master.addr.startswith("127.0.0.2:") and master.config.ha.ha_listen_host == "127.0.0.1"
        assert slave.master_addr == master.addr and slave.master_ha_addr == f"127.0.0.1:{master.ha_port}"
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         timeout=20, message="slave attached through brokerIP2")
        header = SendMessageRequestHeaderV2("PG", "IP2", "TBW102", 4, 0, 0, int(time.time() * 1000), 0, "")
        resp = await client.invoke(master.addr, RemotingCommand.request(310, header.to_fields(), b"x"), 10)
        assert resp.code == ResponseCode.SUCCESS, resp
    finally:
        await client.close()
        await slave.stop()
        await master.stop()
