"""``TopicConfig``, ``DataVersion`` and ``PermName``: one JSON form for topics.json and the wire (fastjson's
field names, alphabetical), a tolerant reader for what other RocketMQ versions write, and the compact line of
a compressed REGISTER_BROKER body."""

from __future__ import annotations

import json

import pytest

from pocketmq.common.errors import FieldFormatError
from pocketmq.common.topic_config import DataVersion, PermName, TopicConfig, TopicFilterType


def test_json_form_is_byte_exact() -> None:
    config = TopicConfig("TBW102", 8, 8, PermName.PERM_READ | PermName.PERM_WRITE | PermName.PERM_INHERIT)
    assert json.dumps(config.to_json_dict(), separators=(",", ":")) == (
        '{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102",'
        '"topicSysFlag":0,"writeQueueNums":8}'
    )
    assert json.dumps(DataVersion(1, 1700000000000).to_json_dict(), separators=(",", ":")) == (
        '{"counter":1,"timestamp":1700000000000}'
    )
    assert TopicConfig.from_json_dict(config.to_json_dict()) == config


def test_defaults() -> None:
    assert TopicConfig("T") == TopicConfig("T", 16, 16, 6, "SINGLE_TAG", 0, False)
    assert TopicConfig.from_json_dict({"topicName": "T"}) == TopicConfig("T")
    assert (PermName.PERM_PRIORITY, PermName.PERM_READ, PermName.PERM_WRITE, PermName.PERM_INHERIT) == (8, 4, 2, 1)


def test_topic_config_tolerates_ordinals_and_old_names() -> None:
    config = TopicConfig.from_json_dict(
        {"perm": 7, "topicFilterType": 1, "topicSynFlag": 2, "order": "true", "readQueueNums": "8"}, "T"
    )
    assert config == TopicConfig("T", 8, 16, 7, TopicFilterType.MULTI_TAG, 2, True)
    assert TopicConfig.from_json_dict({"topicName": "A", "attributes": {"x": 1}}, "B").topic_name == "A"
    for bad, what in (({"topicName": "T", "topicFilterType": "REGEX"}, "topicFilterType"),
                      ({"topicName": "T", "order": 5}, "topicConfig.order"),
                      ({"topicName": "T", "perm": 6.0}, "topicConfig.perm"),
                      ({}, "topicConfig.topicName")):
        with pytest.raises(FieldFormatError, match=what):
            TopicConfig.from_json_dict(bad)


def test_data_version_next_version_and_json() -> None:
    version = DataVersion(12, 5)
    assert version.next_version(now_ms=1690000000000) is version
    assert version == DataVersion(13, 1690000000000)
    assert version.copy() == version and version.copy() is not version
    assert version.to_json_dict() == {"counter": 13, "timestamp": 1690000000000}
    assert DataVersion.from_json_dict({"counter": 1, "timestamp": 2, "stateVersion": 0}) == DataVersion(1, 2)
    assert DataVersion.from_json_dict(None) == DataVersion() == DataVersion(0, 0)
    assert DataVersion().next_version().timestamp > 1_600_000_000_000
    fresh = DataVersion.now()
    assert fresh.counter == 0 and fresh.timestamp > 1_600_000_000_000
    with pytest.raises(FieldFormatError):
        DataVersion.from_json_dict({"counter": "x"})


def test_compact_line() -> None:
    config = TopicConfig("T", 4, 2, 6, "MULTI_TAG", topic_sys_flag=3, order=True)
    assert config.encode_compact() == "T 4 2 6 MULTI_TAG"
    assert TopicConfig.decode_compact("T 4 2 6 MULTI_TAG") == TopicConfig("T", 4, 2, 6, "MULTI_TAG")
    assert TopicConfig.decode_compact("T 1 1 6 SINGLE_TAG extra=1") == TopicConfig("T", 1, 1, 6)
    with pytest.raises(ValueError):
        TopicConfig("a b").encode_compact()
    for bad in ("T 1 1 6", " 1 1 6 SINGLE_TAG", "T x 1 6 SINGLE_TAG", "T 1 1 6 REGEX"):
        with pytest.raises(FieldFormatError):
            TopicConfig.decode_compact(bad)
