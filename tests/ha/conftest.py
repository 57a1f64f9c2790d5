"""Fixtures of the replication tests. Every async test runs twice: on asyncio's default loop and on
uvloop (the broker's loop), whose transports behave differently (they are not asyncio.Transport
subclasses, and writelines/BufferedProtocol take other code paths)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import uvloop

from tests.ha.support import Cluster


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Callable[[], Any]]:
    del config, item
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Stores, HA services and clients started by the test, all stopped afterwards."""
    c = Cluster(tmp_path)
    yield c
    await c.close()
