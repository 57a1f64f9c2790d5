"""Fixtures of the transaction tests: an in-process name server and broker with short check-back timings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.controller import BrokerController
from namesrv.controller import NamesrvController
from tests.cluster import start_broker, start_namesrv
from tests.transaction.support import TX_PROPS


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ns = await start_namesrv(tmp_path)
    yield ns
    await ns.stop()


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    b = await start_broker(tmp_path, "broker-tx", namesrv.addr, dict(TX_PROPS))
    yield b
    await b.stop()
