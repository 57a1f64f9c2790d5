"""What RocketMQ 5's Java remoting client does around POP, written out by hand for the wire tests: the
``extFields`` of its POP, ACK, CHANGE_INVISIBLE_TIME and NOTIFICATION requests (field names and value forms as
``RemotingCommand.createRequestCommand`` puts them), its ``BatchAckMessageRequestBody`` JSON, and how
``MQClientAPIImpl.processPopResponse`` gives each popped message its ``POP_CK`` (from the response's
``startOffsetInfo``/``msgOffsetInfo``) and its reconsume times (from ``orderCountInfo``). Records are decoded with
the commit-log codec (a format, not the SDK)."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field

from pocketmq.common.record import MessageRecord, decode_records
from tests.transaction.raw import Frame, RawClient

POP_MESSAGE, ACK_MESSAGE, CHANGE_INVISIBLE, NOTIFICATION, POLLING_INFO = 200050, 200051, 200053, 200054, 200055
BATCH_ACK_MESSAGE = 200151


def now_ms() -> int:
    return int(time.time() * 1000)


def pop_fields(group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32, invisible: int = 60_000,
               poll: int = 0, init_mode: int = 0, exp_type: str = "TAG", exp: str = "*", order: bool = False,
               attempt_id: str | None = None, broker: str = "broker-a") -> dict[str, str]:
    """``PopMessageRequestHeader`` as a 5.x client fills it (plus the ``bname`` every RPC header carries)."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_nums),
              "invisibleTime": str(invisible), "pollTime": str(poll), "bornTime": str(now_ms()),
              "initMode": str(init_mode), "expType": exp_type, "exp": exp, "order": "true" if order else "false",
              "bname": broker}
    if attempt_id is not None:
        fields["attemptId"] = attempt_id
    return fields


def retry_marker(topic: str) -> str:
    if topic.startswith("%RETRY%") and "+" in topic:
        return "2"
    return "1" if topic.startswith("%RETRY%") else "0"


def _parse(info: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in (info or "").split(";"):
        if entry:
            marker, queue, value = entry.split(" ")
            out[f"{marker}@{queue}"] = value
    return out


@dataclass
class Popped:
    """A popped message as the Java client hands it on: POP_CK and reconsume times set."""

    record: MessageRecord
    pop_ck: str
    reconsume_times: int
    ext: dict[str, str] = field(default_factory=dict)

    @property
    def body(self) -> bytes:
        return bytes(self.record.body)

    @property
    def stored_topic(self) -> str:
        return self.record.topic

    @property
    def queue_offset(self) -> int:
        return self.record.queue_offset

    def receipt_handle(self) -> str:
        """What a 5.x proxy gives a gRPC client: POP_CK and the commit-log offset."""
        return f"{self.pop_ck} {self.record.physical_offset}"


def popped(frame: Frame, broker: str = "broker-a") -> list[Popped]:
    """``processPopResponse``: each message's POP_CK from the offset infos, its reconsume times from the order
    counts."""
    if frame.code != 0:
        return []
    starts, offsets, counts = (_parse(frame.ext.get("startOffsetInfo")), _parse(frame.ext.get("msgOffsetInfo")),
                               _parse(frame.ext.get("orderCountInfo")))
    out = []
    for record in decode_records(frame.body, check_crc=True):
        marker = retry_marker(record.topic)
        key = f"{marker}@{record.queue_id}"
        listed = [int(o) for o in offsets[key].split(",")]
        assert record.queue_offset in listed, (record.queue_offset, listed)
        pop_ck = " ".join(map(str, (starts[key], frame.ext["popTime"], frame.ext["invisibleTime"],
                                    frame.ext["reviveQid"], marker, broker, record.queue_id, record.queue_offset)))
        count = counts.get(f"{marker}@qo{record.queue_id}%{record.queue_offset}") or counts.get(key)
        reconsume = int(count) if count is not None and int(count) > 0 else record.reconsume_times
        out.append(Popped(record, pop_ck, reconsume, frame.ext))
    return out


def real_topic(topic: str, group: str, marker: str) -> str:
    return topic if marker == "0" else f"%RETRY%{group}_{topic}"


def ack_fields(group: str, topic: str, message: Popped, handle: str | None = None) -> dict[str, str]:
    """``AckMessageRequestHeader`` as the proxy builds it from a receipt handle: the message's stored topic."""
    handle = handle or message.pop_ck
    parts = handle.split(" ")
    return {"consumerGroup": group, "topic": real_topic(topic, group, parts[4]), "queueId": parts[6],
            "extraInfo": handle, "offset": parts[7], "bname": parts[5]}


def change_fields(group: str, topic: str, message: Popped, invisible: int, handle: str | None = None) -> dict[str, str]:
    fields = ack_fields(group, topic, message, handle)
    fields["invisibleTime"] = str(invisible)
    return fields


def changed_handle(frame: Frame, fields: dict[str, str], broker: str = "broker-a") -> str:
    """The Java client's new extraInfo after CHANGE_MESSAGE_INVISIBLETIME: the message's own offset as the
    check-point offset, the response's pop time and invisible time."""
    parts = fields["extraInfo"].split(" ")
    return " ".join((fields["offset"], frame.ext["popTime"], frame.ext["invisibleTime"], frame.ext["reviveQid"],
                     parts[4], broker, fields["queueId"], fields["offset"]))


def batch_ack_body(group: str, topic: str, handles: list[str]) -> bytes:
    """``MQClientAPIImpl.batchAckMessageAsync``: handles merged by retry@queue@startOffset@popTime, one bit per
    message, fastjson's base64 of ``BitSet.toByteArray``."""
    merged: dict[str, dict[str, object]] = {}
    bits: dict[str, int] = {}
    broker = None
    for handle in handles:
        p = handle.split(" ")
        broker = broker or p[5]
        key = f"{p[4]}@{p[6]}@{p[0]}@{p[1]}"
        merged.setdefault(key, {"c": group, "t": topic, "r": p[4], "so": int(p[0]), "q": int(p[6]),
                                "rq": int(p[3]), "pt": int(p[1]), "it": int(p[2])})
        bits[key] = bits.get(key, 0) | 1 << (int(p[7]) - int(p[0]))
    acks = []
    for key, ack in merged.items():
        raw = bits[key].to_bytes((bits[key].bit_length() + 7) // 8, "little")
        acks.append({**ack, "b": base64.b64encode(raw).decode()})
    return json.dumps({"acks": acks, "brokerName": broker}, separators=(",", ":"), sort_keys=True).encode()


async def pop(client: RawClient, group: str, topic: str, timeout: float = 10.0, **kw: object) -> Frame:
    return await client.request(POP_MESSAGE, pop_fields(group, topic, **kw), timeout=timeout)  # type: ignore[arg-type]


async def send(client: RawClient, topic: str, body: bytes, *, queue_id: int = 0,
               properties: dict[str, str] | None = None, **props: str) -> Frame:
    """SEND_MESSAGE_V2 as a Java producer sends it (``properties`` and ``props`` together)."""
    text = "\x02".join(f"{k}\x01{v}" for k, v in {**(properties or {}), **props}.items())
    return await client.request(310, {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
                                      "g": str(now_ms()), "h": "0", "i": text, "j": "0", "k": "false",
                                      "m": "false", "n": "broker-a"}, body)


async def create_topic(client: RawClient, topic: str, queues: int = 4) -> None:
    frame = await client.request(17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                                      "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                                      "topicSysFlag": "0", "order": "false"})
    assert frame.code == 0, frame.remark
