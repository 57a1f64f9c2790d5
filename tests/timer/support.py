"""Reading what a timer delivered: raw pulls of a queue, each message with its due time (``TIMER_OUT_MS``) and the
time it was stored in its real topic (when it fired)."""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.message import parse_properties
from pocketmq.common.record import decode_records
from tests.transaction.raw import RawClient


@dataclass(frozen=True)
class Fired:
    body: bytes
    due: int
    stored: int
    properties: dict[str, str]

    @property
    def lateness(self) -> int:
        return self.stored - self.due


async def pull_all(client: RawClient, topic: str, queue_id: int = 0) -> list[Fired]:
    """Every message of the queue so far, from offset 0."""
    out: list[Fired] = []
    offset = 0
    while True:
        frame = await client.request(11, {
            "consumerGroup": "GTimerReader", "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subVersion": "0", "subscription": "*", "expressionType": "TAG"})
        if frame.code != 0:
            return out
        for record in decode_records(frame.body):
            props = parse_properties(record.properties)
            out.append(Fired(bytes(record.body), int(props.get("TIMER_OUT_MS", "0")), record.store_timestamp, props))
        offset = int(frame.ext["nextBeginOffset"])
