"""The heartbeat's consumer vocabulary: Java names as values, Java ordinals as positions."""

from __future__ import annotations

import pytest

from pocketmq.common.consumer import ConsumeFromWhere, ConsumeType, MessageModel


def test_ordinals_are_javas_declaration_order() -> None:
    assert [m.value for m in MessageModel] == ["BROADCASTING", "CLUSTERING"]
    assert [m.value for m in ConsumeType] == ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"]  # 5.x adds POP
    assert [m.value for m in ConsumeFromWhere] == [
        "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP",
    ]


@pytest.mark.parametrize(("raw", "member"), [
    ("CLUSTERING", MessageModel.CLUSTERING), (0, MessageModel.BROADCASTING), ("1", MessageModel.CLUSTERING),
    ("BROADCASTING", MessageModel.BROADCASTING),
])
def test_from_wire_reads_names_and_ordinals(raw: object, member: MessageModel) -> None:
    assert MessageModel.from_wire(raw) is member


def test_from_wire_reads_member_names_and_refuses_the_rest() -> None:
    assert ConsumeFromWhere.from_wire("FIRST_OFFSET") is ConsumeFromWhere.FIRST_OFFSET
    assert ConsumeFromWhere.from_wire(5) is ConsumeFromWhere.TIMESTAMP
    assert ConsumeFromWhere.TIMESTAMP.java_name == "CONSUME_FROM_TIMESTAMP"
    for raw in ("clustering", 2, -1, None, "x"):
        with pytest.raises(ValueError):
            MessageModel.from_wire(raw)
