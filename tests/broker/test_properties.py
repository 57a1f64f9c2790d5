"""The send path's property handling: WAIT is taken out of what is stored, whatever the string looks like."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.processors.send import strip_wait


def strip_wait_by_parts(properties: str) -> tuple[str, bool]:
    """The definition: every WAIT pair and every empty pair dropped; wait unless WAIT=false appears."""
    if "WAIT\x01" not in properties:
        return properties, True
    parts = [p for p in properties.split("\x02") if p and not p.startswith("WAIT\x01")]
    return "\x02".join(parts), "WAIT\x01false" not in properties


PIECES = st.sampled_from(["WAIT\x01", "\x01", "\x02", "true", "false", "a", "UNIQ_KEY\x01X", "WAIT\x01false",
                          "WAIT\x01true\x02", "TAGS\x01t\x02", "\x02\x02"])


@given(st.lists(PIECES, max_size=8).map("".join))
def test_strip_wait_matches_its_definition(properties: str) -> None:
    assert strip_wait(properties) == strip_wait_by_parts(properties)


def test_strip_wait_on_what_clients_send() -> None:
    assert strip_wait("WAIT\x01true\x02UNIQ_KEY\x01ABC\x02TAGS\x01t") == ("UNIQ_KEY\x01ABC\x02TAGS\x01t", True)
    assert strip_wait("WAIT\x01false\x02KEYS\x01k") == ("KEYS\x01k", False)
    assert strip_wait("KEYS\x01k\x02WAIT\x01false") == ("KEYS\x01k", False)
    assert strip_wait("KEYS\x01k") == ("KEYS\x01k", True)
