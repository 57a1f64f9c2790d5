"""Recall handles: RocketMQ 5.3's base64url text, decoded with or without padding; anything else (a control
character included) is refused."""

from __future__ import annotations

import pytest

from pocketmq.common.recall import RecallHandle, delete_key

JAVA = "djEgVG9waWNBIGJyb2tlci1hIDE4OTM0NTYwMDAwMDEgMEEwQjBD"
"""``RecallMessageHandle.HandleV1.buildHandle("TopicA", "broker-a", "1893456000001", "0A0B0C")``."""


def test_the_java_handle_decodes_and_encodes_back() -> None:
    handle = RecallHandle.decode(JAVA)
    assert handle == RecallHandle("TopicA", "broker-a", "1893456000001", "0A0B0C")
    assert handle.deliver_ms == 1893456000001
    assert handle.encode() == JAVA
    assert RecallHandle.decode(JAVA.rstrip("=")) == handle


# "v1 T b 1 u" + a property injected with control characters: refused, never put in a marker's properties.
INJECTED = "djEgVCBiIDEgdQJUSU1FUl9ERUxBWV9TRUMBMQ=="


@pytest.mark.parametrize("text", ["", "not base64 !", "djIgYSBiIGMgZA==", "djEgYSBiIGM=", "//79", INJECTED])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="recall handle is invalid"):
        RecallHandle.decode(text)


def test_a_time_that_is_not_a_number_and_the_delete_key() -> None:
    assert RecallHandle("T", "b", "soon", "u").deliver_ms == -1
    assert delete_key("TopicA", "0A0B0C") == "TopicA+0A0B0C"
