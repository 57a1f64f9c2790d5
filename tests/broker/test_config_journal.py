"""The topics and subscription-group files: RocketMQ's JSON snapshot plus a journal of one line per change
(:mod:`pocketmq.broker.config_journal`): what the lines look like, replay, a torn or damaged tail, compaction, and
kills in the middle of concurrent changes (a consistent table every time)."""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from pocketmq.broker import config_journal
from pocketmq.broker.config_journal import JOURNAL_SUFFIX, ConfigJournal, decode_entry, encode_entry, read_journal
from pocketmq.broker.metadata import SubscriptionGroupManager, load_topics
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.store.metadata import SubscriptionGroupConfig
from tests.broker.journal_writer import change
from tests.helpers import eventually
from tests.procs import Proc

pytestmark = pytest.mark.timeout(120)


def _journal(path: Path, table: dict[str, TopicConfig], version: DataVersion) -> ConfigJournal[TopicConfig]:
    return ConfigJournal(str(path), "topicConfigTable", table=lambda: table, version=lambda: version,
                         to_json=TopicConfig.to_json_dict)


def _journal_lines(path: Path) -> int:
    """Lines in the journal beside ``path`` (a compaction leaves none: the next change starts a new one)."""
    journal = Path(str(path) + JOURNAL_SUFFIX)
    return len(journal.read_bytes().splitlines()) if journal.exists() else 0


def _name(value: dict[str, object]) -> str:
    return str(value["topicName"])


def test_a_line_is_crc_json_and_newline_and_a_damaged_one_is_refused() -> None:
    line = encode_entry(DataVersion(7, 1000), "T", TopicConfig("T", 2, 2, 6).to_json_dict())
    crc, _, text = line.rstrip(b"\n").partition(b" ")
    assert line.endswith(b"\n") and len(crc) == 8 and json.loads(text)["v"] == {"counter": 7, "timestamp": 1000}
    entry = decode_entry(line.rstrip(b"\n"), _name)
    assert entry is not None and entry.name == "T" and entry.value is not None and entry.value["readQueueNums"] == 2
    assert decode_entry(encode_entry(DataVersion(8, 0), "T", None).rstrip(b"\n"), _name).value is None  # type: ignore[union-attr]
    flipped = bytearray(line.rstrip(b"\n"))
    flipped[-3] ^= 1
    assert decode_entry(bytes(flipped), _name) is None
    assert decode_entry(b"zzzzzzzz {}", _name) is None and decode_entry(b"", _name) is None


def test_reading_stops_at_a_torn_line_and_loading_cuts_it(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    lines = [encode_entry(DataVersion(i, 0), f"T{i}", TopicConfig(f"T{i}", i, i, 6).to_json_dict())
             for i in range(1, 4)]
    whole = b"".join(lines)
    Path(str(path) + JOURNAL_SUFFIX).write_bytes(whole + lines[0][:17])
    entries, length = read_journal(str(path) + JOURNAL_SUFFIX, _name)
    assert [e.name for e in entries] == ["T1", "T2", "T3"] and length == len(whole)
    stored = load_topics(str(path))
    assert {c.topic_name for c in stored.topics} >= {"T1", "T2", "T3"}
    assert stored.data_version is not None and stored.data_version.counter == 3
    assert Path(str(path) + JOURNAL_SUFFIX).read_bytes() == whole  # the torn tail is gone


async def test_changes_are_lines_until_compaction_writes_rocketmqs_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_journal, "COMPACT_MIN_ENTRIES", 10)
    monkeypatch.setattr(config_journal, "COMPACT_QUIET_S", 0.05)
    path = tmp_path / "config" / "topics.json"
    table: dict[str, TopicConfig] = {}
    version = DataVersion(0, 1)
    journal = _journal(path, table, version)
    journal.start()
    try:
        for i in range(5):
            table[f"T{i}"] = TopicConfig(f"T{i}", i + 1, 1, 6)
            journal.put(version.next_version(), f"T{i}", table[f"T{i}"])
        assert not path.exists() and _journal_lines(path) == 5
        del table["T0"]
        journal.delete(version.next_version(), "T0")
        for i in range(5, 12):
            table[f"T{i}"] = TopicConfig(f"T{i}", i + 1, 1, 6)
            journal.put(version.next_version(), f"T{i}", table[f"T{i}"])
        await eventually(lambda: path.exists() and _journal_lines(path) == 0, message="compacted once quiet")
        snapshot = json.loads(path.read_text())
        assert snapshot["dataVersion"]["counter"] == 13 and set(snapshot["topicConfigTable"]) == set(table)
        journal.put(version.next_version(), "T99", TopicConfig("T99", 9, 9, 6))
        table["T99"] = TopicConfig("T99", 9, 9, 6)
    finally:
        await journal.stop()
        await journal.close()
    stored = load_topics(str(path))
    assert {c.topic_name: c for c in stored.topics if c.topic_name in table} == table
    assert _journal_lines(path) == 0  # close folds the journal in


async def test_subscription_groups_are_journalled_and_loaded(tmp_path: Path) -> None:
    path = str(tmp_path / "subscriptionGroup.json")
    groups = SubscriptionGroupManager(path, auto_create=True)
    groups.journal.start()
    groups.update(SubscriptionGroupConfig("G1", retry_max_times=3))
    assert groups.find_or_create("G2") is not None
    groups.update(SubscriptionGroupConfig("G3"))
    groups.delete("G3")
    again = SubscriptionGroupManager(path, auto_create=False)
    assert again.load() and set(again.table) == {"G1", "G2"}
    assert again.table["G1"].retry_max_times == 3 and again.data_version.counter == groups.data_version.counter
    await groups.journal.stop()
    await groups.journal.close()


def _expected(m: int, keys: int) -> dict[str, int]:
    state: dict[str, int] = {}
    for i in range(1, m + 1):
        name, config = change(i, keys)
        if config is None:
            state.pop(name, None)
        else:
            state[name] = config.read_queue_nums
    return state


def test_kills_in_the_middle_of_concurrent_changes_leave_a_consistent_table(tmp_path: Path) -> None:
    """Four tasks change the table as fast as they can, compactions included; SIGKILL at random moments, five
    times over the same files: each time the table read back is exactly the one after the first m changes."""
    path = tmp_path / "config" / "topics.json"
    keys = 37
    rng = random.Random(2607)
    last = 0
    for _round in range(5):
        proc = Proc([sys.executable, "-m", "tests.broker.journal_writer", str(path), str(keys)], "READY")
        try:
            proc.wait_ready()
            time.sleep(rng.uniform(0.0, 0.3))
            proc.signal(signal.SIGKILL)
            proc.popen.wait(10)
        finally:
            proc.kill()
        stored = load_topics(str(path))
        assert stored.data_version is not None
        m = stored.data_version.counter
        assert m >= last + 50  # READY came after 50 changes written, each run going on from the last
        got = {c.topic_name: c.read_queue_nums for c in stored.topics if c.topic_name.startswith("T")
               and c.topic_name != "TBW102"}
        assert got == _expected(m, keys)
        last = m
