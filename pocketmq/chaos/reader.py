"""The independent read at the end of a run: every queue of the topic on every master and every slave.

Each member is asked directly (PULL_MESSAGE to its own address, from offset 0 until it has nothing more),
not through routes or a consumer group, and the records are decoded with :mod:`pocketmq.common.record`'s decoder:
what the checkers compare is what each process has in its log. A member that cannot be read is reported by
name with the error; its records are then simply absent (so a loss can never be hidden by a failed read:
the master *and* the slave would both have to miss an id).
"""

from __future__ import annotations

from collections.abc import Sequence

from pocketmq.chaos.events import StoredRecord
from pocketmq.common.record import decode_records
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.controller_headers import epoch_cache_from_json
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import PullMessageRequestHeader
from pocketmq.remoting.route import decode_body

__all__ = ["Member", "read_epochs", "read_member"]

PULL_BATCH = 32
PULL_TIMEOUT = 5.0
#: sysFlag of the pull: FLAG_SUBSCRIPTION (the expression is in the request).
SUBSCRIPTION_FLAG = 0x4
#: A bound on the pulls per queue (32 records each): over a million records per queue is not a chaos run.
MAX_PULLS_PER_QUEUE = 40_000
CHECK_GROUP = "chaos-check"

Member = tuple[str, str, bool, str]  # broker group, process name, is master, address


async def read_member(member: Member, topic: str, queues: int) -> list[StoredRecord]:
    """Every record of ``topic`` in queues ``0..queues-1`` of one member. Raises :class:`PocketMQError`."""
    broker, name, is_master, addr = member
    client = RemotingClient()
    out: list[StoredRecord] = []
    try:
        for queue_id in range(queues):
            offset = 0
            for _ in range(MAX_PULLS_PER_QUEUE):
                header = PullMessageRequestHeader(CHECK_GROUP, topic, queue_id, offset, PULL_BATCH,
                                                  SUBSCRIPTION_FLAG, -1, 0, 0, "*")
                request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
                response = await client.invoke(addr, request, PULL_TIMEOUT)
                if response.code != ResponseCode.SUCCESS:
                    break
                records = list(decode_records(bytes(response.body or b"")))
                if not records:
                    break
                for r in records:
                    out.append(StoredRecord(broker, name, is_master, queue_id, r.queue_offset,
                                            r.body.decode(errors="replace")))
                offset = records[-1].queue_offset + 1
    finally:
        await client.close()
    return out


async def read_all(members: Sequence[Member], topic: str, queues: int) -> tuple[list[StoredRecord], dict[str, str]]:
    """Every member's records, and member name -> error for those that could not be read."""
    records: list[StoredRecord] = []
    unread: dict[str, str] = {}
    for member in members:
        try:
            records += await read_member(member, topic, queues)
        except (PocketMQError, OSError, ValueError) as exc:
            unread[member[1]] = f"{type(exc).__name__}: {exc}"
    return records, unread


async def read_epochs(members: Sequence[Member]) -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Controller mode: each member's epoch file (GET_BROKER_EPOCH_CACHE), address -> (group, [(epoch, start)])."""
    client = RemotingClient()
    out: dict[str, tuple[str, list[tuple[int, int]]]] = {}
    try:
        for broker, _name, _is_master, addr in members:
            try:
                response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE),
                                               PULL_TIMEOUT)
                entries, _max = epoch_cache_from_json(decode_body(bytes(response.body or b"{}")))
            except (PocketMQError, OSError, ValueError):
                continue
            out[addr] = (broker, [(e.epoch, e.start_offset) for e in entries])
    finally:
        await client.close()
    return out
