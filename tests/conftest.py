"""Fixtures every test package may use: a name server and one broker registered with it, in the test's event loop,
on 127.0.0.1 with port 0 and stores under ``tmp_path``. A module changes the broker by overriding
``broker_name`` or ``broker_props`` (broker.properties keys), not by writing its own ``broker`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.namesrv.controller import NamesrvController
from tests.cluster import start_broker, start_namesrv


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The container tests run last: CI makes their base image beside the rest of the suite."""
    items.sort(key=lambda item: item.get_closest_marker("docker") is not None)


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ns = await start_namesrv(tmp_path)
    yield ns
    await ns.stop()


@pytest.fixture
def broker_name() -> str:
    return "broker-a"


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {}


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController, broker_name: str,
                 broker_props: dict[str, str]) -> AsyncIterator[BrokerController]:
    b = await start_broker(tmp_path, broker_name, namesrv.addr, dict(broker_props) or None)
    yield b
    await b.stop()
