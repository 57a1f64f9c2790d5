"""Run by ``test_metadata`` as a subprocess: rewrites consumerOffset.json over and over, each version
bigger than the last, and prints ``WROTE <version>`` once a version is durably written.

Version ``v`` holds ``v`` keys ``topic@group<i>`` whose offsets are all ``v``, so a reader can tell a
whole file from a half-written one. Usage: ``python -m tests.store.metadata_writer <path>``.
"""

from __future__ import annotations

import sys

from pocketmq.store.metadata import ConsumerOffsetTable


def main(path: str) -> None:
    table = ConsumerOffsetTable(path)
    version = len(table.offset_table) if table.load() else 0
    while True:
        version += 1
        table.offset_table = {f"topic@group{i}": {0: version, 1: version} for i in range(version)}
        table.persist()
        print("WROTE", version, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
