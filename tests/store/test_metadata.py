"""Metadata files: RocketMQ's JSON shapes (unquoted integer keys included), defaults, and atomic writes
that survive a kill at any moment."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
from pathlib import Path

import pytest

from pocketmq.common.files import write_atomically
from pocketmq.common.topic import AUTO_CREATE_TOPIC_KEY_TOPIC
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.store.metadata import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfigTable,
    config_paths,
    quote_integer_keys,
)
from tests.store.support import names_in

REPO = Path(__file__).resolve().parents[2]


def test_topics_json_has_the_default_topic(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "topics.json")
    table = TopicConfigTable(path)
    assert not table.load()
    tbw = table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
    assert tbw is not None and (tbw.perm, tbw.read_queue_nums, tbw.write_queue_nums) == (7, 8, 8)
    table.put(TopicConfig("Orders", 4, 4, 6, order=True))
    table.persist()
    data = json.loads(Path(path).read_text())
    assert data["topicConfigTable"]["Orders"] == {
        "order": True, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": "Orders",
        "topicSysFlag": 0, "writeQueueNums": 4}
    assert data["dataVersion"]["counter"] == 1
    again = TopicConfigTable(path)
    assert again.load()
    assert again.table == table.table
    assert again.delete("Orders") is not None and again.get("Orders") is None


def test_topics_json_text_is_byte_exact(tmp_path: Path) -> None:
    table = TopicConfigTable(str(tmp_path / "topics.json"))
    table.data_version = DataVersion(2, 1700000000000)
    table.persist()
    assert (tmp_path / "topics.json").read_text() == (
        '{\n\t"dataVersion": {\n\t\t"counter": 2,\n\t\t"timestamp": 1700000000000\n\t},\n'
        '\t"topicConfigTable": {\n\t\t"TBW102": {\n\t\t\t"order": false,\n\t\t\t"perm": 7,\n'
        '\t\t\t"readQueueNums": 8,\n\t\t\t"topicFilterType": "SINGLE_TAG",\n\t\t\t"topicName": "TBW102",\n'
        '\t\t\t"topicSysFlag": 0,\n\t\t\t"writeQueueNums": 8\n\t\t}\n\t}\n}'
    )
    assert TopicConfigTable(str(tmp_path / "missing.json")).data_version.timestamp > 1_600_000_000_000


def test_topics_json_written_by_rocketmq(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text('{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"A":{'
                    '"attributes":{},"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
                    '"topicName":"A","topicSysFlag":0,"writeQueueNums":2}}}')
    table = TopicConfigTable(str(path))
    assert table.load()
    assert table.get("A") == TopicConfig("A", 2, 2, 6)
    assert AUTO_CREATE_TOPIC_KEY_TOPIC in table.table  # added when missing
    assert table.data_version.counter == 3


def test_consumer_offsets_use_unquoted_integer_keys(tmp_path: Path) -> None:
    path = str(tmp_path / "consumerOffset.json")
    table = ConsumerOffsetTable(path)
    table.commit_offset("group", "topic", 1, 9)
    table.commit_offset("group", "topic", 0, 12)
    table.persist()
    assert Path(path).read_text() == '{"offsetTable":{"topic@group":{0:12,1:9}}}'
    again = ConsumerOffsetTable(path)
    assert again.load()
    assert again.query_offset("group", "topic", 0) == 12
    assert again.query_offset("group", "topic", 7) == -1
    assert again.query_offsets("group", "topic") == {0: 12, 1: 9}
    assert again.topics_of_group("group") == {"topic"} and again.groups_of_topic("topic") == {"group"}
    again.remove_group("group")
    assert again.offset_table == {}


def test_offset_reader_accepts_both_key_forms(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text('{\n\t"offsetTable":{\n\t\t"T@G":{0:5, 1 : 6},\n\t\t"U@G":{"0":7}\n\t}\n}')
    table = ConsumerOffsetTable(str(path))
    assert table.load()
    assert table.offset_table == {"T@G": {0: 5, 1: 6}, "U@G": {0: 7}}
    tricky = '{"offsetTable":{"a{1:2},3:@g":{3:4}}}'  # digits and braces inside a string stay as they are
    assert json.loads(quote_integer_keys(tricky)) == {"offsetTable": {"a{1:2},3:@g": {"3": 4}}}
    table.decode(tricky)
    assert table.offset_table == {"a{1:2},3:@g": {3: 4}}


def test_delay_offsets(tmp_path: Path) -> None:
    path = str(tmp_path / "delayOffset.json")
    table = DelayOffsetTable(path)
    table.offset_table = {2: 3, 1: 0}
    table.persist()
    assert Path(path).read_text() == '{"offsetTable":{1:0,2:3}}'
    again = DelayOffsetTable(path)
    assert again.load() and again.offset_table == {1: 0, 2: 3}


def test_subscription_groups(tmp_path: Path) -> None:
    path = str(tmp_path / "subscriptionGroup.json")
    table = SubscriptionGroupTable(path)
    group = table.get_or_create("g1")
    assert (group.consume_enable, group.consume_from_min_enable, group.consume_broadcast_enable) == (True,) * 3
    assert (group.retry_queue_nums, group.retry_max_times, group.broker_id) == (1, 16, 0)
    assert group.which_broker_when_consume_slowly == 1
    table.put(SubscriptionGroupConfig("g2", retry_max_times=3))
    table.persist()
    data = json.loads(Path(path).read_text())
    assert data["subscriptionGroupTable"]["g1"] == {
        "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
        "groupName": "g1", "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1}
    again = SubscriptionGroupTable(path)
    assert again.load() and again.table == table.table
    assert again.delete("g2") is not None and again.get("g2") is None


def test_bad_files_are_errors_and_bak_is_a_fallback(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text("")
    with pytest.raises(ValueError, match="empty"):
        ConsumerOffsetTable(str(path)).load()
    Path(str(path) + ".bak").write_text('{"offsetTable":{"t@g":{0:1}}}')
    table = ConsumerOffsetTable(str(path))
    assert table.load() and table.offset_table == {"t@g": {0: 1}}


async def test_atomic_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    paths = config_paths(str(tmp_path))
    assert set(paths) == {"topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json"}
    table = ConsumerOffsetTable(paths["consumerOffset.json"])
    for i in range(20):
        table.commit_offset("g", "t", 0, i)
        await table.persist_async()
    write_atomically(str(tmp_path / "x.json"), b"{}")
    assert names_in(tmp_path) == ["consumerOffset.json", "x.json"]
    again = ConsumerOffsetTable(paths["consumerOffset.json"])
    assert again.load() and again.query_offset("g", "t", 0) == 19


async def test_kill_during_writes_never_leaves_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    rng = random.Random(5)
    last_written = 0
    for _ in range(15):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.store.metadata_writer", str(path), cwd=REPO,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        wanted = rng.randint(1, 40)
        try:
            for _ in range(wanted):
                line = await asyncio.wait_for(proc.stdout.readline(), 30)
                assert line.startswith(b"WROTE"), line
                last_written = int(line.split()[1])
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        for line in (await proc.stdout.read()).splitlines():
            if line.startswith(b"WROTE ") and line.split()[1].isdigit():
                last_written = int(line.split()[1])
        table = ConsumerOffsetTable(str(path))
        assert table.load(), "the file vanished"
        version = len(table.offset_table)
        assert version >= last_written  # everything acknowledged is there ...
        assert all(queues == {0: version, 1: version} for queues in table.offset_table.values())  # ... whole
        assert names_in(tmp_path) == ["consumerOffset.json"]  # interrupted temporaries are gone
