"""A child process for the crash tests of :mod:`pocketmq.broker.config_journal`: changes a topic table as fast as
it can from several tasks at once (puts and deletes, compactions every few hundred changes) until it is killed.

``python -m tests.broker.journal_writer <topics.json> <keys>``: change ``i`` (from 1) puts ``T<i % keys>`` with
``readQueueNums = i``, except every seventh, which deletes it; the table's version counter is ``i`` after it. It
starts from what the files hold (as a broker does), so a run after a kill goes on where the files say the last one
stopped. It prints ``READY <counter>`` on stderr once 50 more changes are written.
"""

from __future__ import annotations

import asyncio
import sys

from pocketmq.broker import config_journal
from pocketmq.broker.metadata import load_topics
from pocketmq.common.topic_config import DataVersion, TopicConfig

TASKS = 4


def change(i: int, keys: int) -> tuple[str, TopicConfig | None]:
    """Change ``i``: the topic it touches and its new config (None: deleted)."""
    name = f"T{i % keys}"
    return name, None if i % 7 == 0 else TopicConfig(name, i, 1, 6)


async def main(path: str, keys: int) -> None:
    config_journal.COMPACT_MIN_ENTRIES = 300  # compactions happen while changes keep coming, too
    config_journal.COMPACT_QUIET_S = 0.01
    stored = load_topics(path)
    table = {c.topic_name: c for c in stored.topics}
    version = stored.data_version or DataVersion(0, 1)
    start = version.counter
    journal = config_journal.ConfigJournal(path, "topicConfigTable", table=lambda: table, version=lambda: version,
                                           to_json=TopicConfig.to_json_dict)
    journal.start()

    enough = asyncio.Event()

    async def writer() -> None:
        while True:
            i = version.counter + 1
            name, config = change(i, keys)
            version.next_version()
            if config is None:
                table.pop(name, None)
                journal.delete(version, name)
            else:
                table[name] = config
                journal.put(version, name, config)
            await asyncio.sleep(0)  # the other tasks' turn
            if version.counter >= start + 50:
                enough.set()

    tasks = [asyncio.ensure_future(writer()) for _ in range(TASKS)]
    await enough.wait()
    print(f"READY {version.counter}", file=sys.stderr, flush=True)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
