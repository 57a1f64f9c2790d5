"""Fixtures of the index tests: a name server and a broker (with the trace topic) in the test's loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.controller import BrokerController
from namesrv.controller import NamesrvController
from tests.cluster import start_broker, start_namesrv


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ns = await start_namesrv(tmp_path)
    yield ns
    await ns.stop()


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    b = await start_broker(tmp_path, "broker-a", namesrv.addr, {"traceTopicEnable": "true"})
    yield b
    await b.stop()
