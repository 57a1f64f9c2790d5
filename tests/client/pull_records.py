"""Stored message records built field by field from reference §4.1, for the consumer-side decoder tests.

Deliberately written without the decoder's structs: each field is packed on its own, in the order of the
reference table, so the decoder is checked against the layout rather than against itself.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass, field

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB


def host(address: str) -> bytes:
    """``ip bytes + port as int32`` for ``"1.2.3.4:5"`` or ``"[::1]:5"``."""
    ip, _, port = address.rpartition(":")
    return ipaddress.ip_address(ip.strip("[]")).packed + struct.pack(">i", int(port))


@dataclass
class Record:
    """The fields of one stored record; :meth:`encode` lays them out as the broker stores them."""

    topic: str = "TopicTest"
    body: bytes = b"hello"
    queue_id: int = 3
    flag: int = 7
    queue_offset: int = 42
    physical_offset: int = 0xBBEA
    sys_flag: int = 0
    born_timestamp: int = 1_700_000_000_123
    born_host: str = "10.0.0.9:53001"
    store_timestamp: int = 1_700_000_000_456
    store_host: str = "192.168.58.128:10911"
    reconsume_times: int = 0
    prepared_offset: int = 0
    properties: str = "UNIQ_KEY\x010A000009AB12\x02TAGS\x01TagA\x02KEYS\x01k1 k2"
    magic: int = MAGIC_V1
    body_crc: int | None = None
    extra_fields: dict[str, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        born = host(self.born_host)
        store = host(self.store_host)
        sys_flag = self.sys_flag
        if len(born) == 20:
            sys_flag |= 0x10
        if len(store) == 20:
            sys_flag |= 0x20
        topic = self.topic.encode()
        props = self.properties.encode()
        crc = zlib.crc32(self.body) & 0x7FFFFFFF if self.body_crc is None else self.body_crc
        topic_len = struct.pack(">b", len(topic)) if self.magic == MAGIC_V1 else struct.pack(">h", len(topic))
        fields = [
            struct.pack(">I", self.magic),  # 2 MAGICCODE
            struct.pack(">i", crc),  # 3 BODYCRC
            struct.pack(">i", self.queue_id),  # 4 QUEUEID
            struct.pack(">i", self.flag),  # 5 FLAG
            struct.pack(">q", self.queue_offset),  # 6 QUEUEOFFSET
            struct.pack(">q", self.physical_offset),  # 7 PHYSICALOFFSET
            struct.pack(">i", sys_flag),  # 8 SYSFLAG
            struct.pack(">q", self.born_timestamp),  # 9 BORNTIMESTAMP
            born,  # 10 BORNHOST
            struct.pack(">q", self.store_timestamp),  # 11 STORETIMESTAMP
            store,  # 12 STOREHOSTADDRESS
            struct.pack(">i", self.reconsume_times),  # 13 RECONSUMETIMES
            struct.pack(">q", self.prepared_offset),  # 14 PREPARED TRANSACTION OFFSET
            struct.pack(">i", len(self.body)),  # 15 BODY length
            self.body,
            topic_len,  # 16 TOPIC
            topic,
            struct.pack(">h", len(props)),  # 17 PROPERTIES
            props,
        ]
        rest = b"".join(fields)
        return struct.pack(">i", 4 + len(rest)) + rest  # 1 TOTALSIZE


def body_of(*records: Record) -> bytes:
    """A pull response body: the records concatenated."""
    return b"".join(record.encode() for record in records)
