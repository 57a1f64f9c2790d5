"""Fixtures of the store tests: a started store on tiny files under ``tmp_path``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.store import MessageStore
from tests.store.support import small_config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    """A started ASYNC_FLUSH store with 64 KiB commit-log files and 64-unit consume-queue files."""
    message_store = MessageStore(small_config(tmp_path / "store"))
    await message_store.start()
    yield message_store
    await message_store.shutdown()
