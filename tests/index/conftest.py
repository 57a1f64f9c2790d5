"""Fixtures of the index tests: a name server and a broker (with the trace topic) in the test's loop."""

from __future__ import annotations

import pytest


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"traceTopicEnable": "true"}
