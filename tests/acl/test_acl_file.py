"""Which ACL file a broker enforces when ``plainAclFile`` is not set: ``$ROCKETMQ_HOME/conf/plain_acl.yml``, then
``./conf/plain_acl.yml``; the start says which, and refuses when there is none (pocketmq.remoting.plain_acl.service)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.common.logs import Event
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.plain_acl import AclConfigError
from pocketmq.remoting.plain_acl.service import find_acl_file
from tests.acl.test_acl_broker import ACL, send_request
from tests.cluster import start_broker, start_namesrv
from tests.procs import ROOT

#: A file that would let every local client in unchecked: it must not be the one in force when another wins.
WHITELIST_ALL = "globalWhiteRemoteAddresses:\n  - 127.0.0.1\naccounts: []\n"


def _acl_file(directory: Path, text: str) -> Path:
    path = directory / "conf" / "plain_acl.yml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_plain_acl_file_wins_and_must_exist(tmp_path: Path) -> None:
    given = tmp_path / "mine.yml"
    given.write_text(ACL)
    home = tmp_path / "home"
    _acl_file(home, WHITELIST_ALL)
    assert find_acl_file(str(given), {"ROCKETMQ_HOME": str(home)}, tmp_path) == (given, "plainAclFile")
    with pytest.raises(AclConfigError, match=r"missing\.yml"):
        find_acl_file(str(tmp_path / "missing.yml"), {}, tmp_path)


def test_rocketmq_home_then_the_working_directory(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    in_cwd = _acl_file(cwd, WHITELIST_ALL)
    assert find_acl_file("", {"ROCKETMQ_HOME": str(home)}, cwd) == (in_cwd, "working directory")
    in_home = _acl_file(home, ACL)
    assert find_acl_file("", {"ROCKETMQ_HOME": str(home)}, cwd) == (in_home, "$ROCKETMQ_HOME")
    assert find_acl_file("", {}, cwd) == (in_cwd, "working directory")
    assert find_acl_file("", {"ROCKETMQ_HOME": ""}, cwd) == (in_cwd, "working directory")


def test_no_file_anywhere_is_refused_naming_every_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(AclConfigError) as refused:
        find_acl_file("", {"ROCKETMQ_HOME": str(home)}, tmp_path)
    assert str(home / "conf" / "plain_acl.yml") in str(refused.value)
    assert str(tmp_path / "conf" / "plain_acl.yml") in str(refused.value)
    with pytest.raises(AclConfigError, match=r"\$ROCKETMQ_HOME is not set"):
        find_acl_file("", {}, tmp_path)


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ns = await start_namesrv(tmp_path)
    yield ns
    await ns.stop()


async def test_a_broker_enforces_rocketmq_home_and_says_so(tmp_path: Path, namesrv: NamesrvController,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """``$ROCKETMQ_HOME/conf/plain_acl.yml`` (accounts, no whitelist) is in force, not the whitelisting file in
    the working directory: an unsigned send is refused, a signed one stored; ``acl_loaded`` names the file."""
    home = tmp_path / "home"
    in_home = _acl_file(home, ACL)
    cwd = tmp_path / "cwd"
    _acl_file(cwd, WHITELIST_ALL)
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    monkeypatch.chdir(cwd)
    caplog.set_level(logging.INFO, logger="pocketmq.remoting.plain_acl")
    broker = await start_broker(tmp_path, "broker-home", namesrv.addr, {"aclEnable": "true"})
    client = RemotingClient()
    try:
        unsigned = await client.invoke(broker.addr, send_request("both", ak=None), 5)
        assert unsigned.code == ResponseCode.NO_PERMISSION, unsigned.remark
        assert (await client.invoke(broker.addr, send_request("both"), 5)).code == ResponseCode.SUCCESS
    finally:
        await client.close()
        await broker.stop()
    loaded = [r.msg for r in caplog.records if isinstance(r.msg, Event) and r.msg.name == "acl_loaded"]
    assert [(e.fields["file"], e.fields["source"], e.fields["whitelisted"]) for e in loaded] == [
        (str(in_home.resolve()), "$ROCKETMQ_HOME", 0)]


async def test_a_broker_without_any_acl_file_does_not_start(tmp_path: Path, namesrv: NamesrvController,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AclConfigError, match="no ACL file"):
        await start_broker(tmp_path, "broker-none", namesrv.addr, {"aclEnable": "true"})
    store = tmp_path / "broker-none-0"
    assert not await asyncio.to_thread(store.exists)  # refused before the store was opened


def test_the_broker_process_refuses_with_one_clear_line(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}, "PYTHONPATH": str(ROOT)}
    props = tmp_path / "broker.properties"
    props.write_text(f"aclEnable=true\nlistenPort=0\nstorePathRootDir={tmp_path / 'store'}\n")
    done = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(props), "--listen-host",
                           "127.0.0.1", "-n", "127.0.0.1:1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    refusal = [line for line in done.stderr.splitlines() if line.startswith("rmq-broker: ")]
    assert len(refusal) == 1 and "no ACL file" in refusal[0] and "ROCKETMQ_HOME is not set" in refusal[0]

