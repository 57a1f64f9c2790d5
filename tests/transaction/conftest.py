"""Fixtures of the transaction tests: an in-process name server and broker with short check-back timings."""

from __future__ import annotations

import pytest

from tests.transaction.support import TX_PROPS


@pytest.fixture
def broker_name() -> str:
    return "broker-tx"


@pytest.fixture
def broker_props() -> dict[str, str]:
    return dict(TX_PROPS)
