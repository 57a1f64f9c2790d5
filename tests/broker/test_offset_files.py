"""The 5 s offset persist on a disk that will not take the file: the table stays changed for the next round, the
other table is still written, the failure is logged once, and the next successful write says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets, OffsetFiles


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def error(self, event: str, **fields: Any) -> None:
        self.events.append(("error", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.events.append(("info", event, fields))


def test_a_failed_write_keeps_the_table_changed_and_is_logged_once(tmp_path: Path) -> None:
    blocker = tmp_path / "config"
    blocker.write_text("a file where the config directory should be")  # every write below it fails
    offsets = ConsumerOffsetManager(str(blocker / "consumerOffset.json"))
    delays = DelayOffsets(str(tmp_path / "delayOffset.json"))
    log = Log()
    files = OffsetFiles(log, offsets, delays)
    offsets.commit_offset("G", "T", 0, 42)
    delays.advance(3, 7)

    files.persist()
    files.persist()
    assert offsets.dirty and not delays.dirty
    written = DelayOffsets(delays.path)
    assert written.load() and written.offset_table == {3: 7}
    assert [(level, event) for level, event, _ in log.events] == [("error", "offsets_not_persisted")]
    assert log.events[0][2]["path"] == offsets.path

    blocker.unlink()  # room again
    files.persist()
    assert not offsets.dirty
    reread = ConsumerOffsetManager(offsets.path)
    assert reread.load() and reread.query_offset("G", "T", 0) == 42
    assert log.events[-1][:2] == ("info", "offsets_persisted_again")
