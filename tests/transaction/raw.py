"""A bare RocketMQ remoting client for the wire-level transaction tests: frames built and parsed by hand with
``struct`` and ``json`` as a Java 4.9 client sends them (JSON header, ``extFields`` strings), independent of
PocketMQ's remoting package and SDK."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import struct
from dataclasses import dataclass, field
from typing import Any

FLAG_RESPONSE = 1
FLAG_ONEWAY = 2


@dataclass
class Frame:
    code: int
    opaque: int
    flag: int
    ext: dict[str, str] = field(default_factory=dict)
    remark: str | None = None
    body: bytes = b""


def encode(code: int, opaque: int, ext: dict[str, str], body: bytes = b"", *, flag: int = 0) -> bytes:
    header = json.dumps({"code": code, "extFields": ext, "flag": flag, "language": "JAVA", "opaque": opaque,
                         "serializeTypeCurrentRPC": "JSON", "version": 395}).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


class RawClient:
    """One connection: requests matched to responses by opaque; broker-initiated requests queued."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.opaques = itertools.count(1000)
        self.waiting: dict[int, asyncio.Future[Frame]] = {}
        self.server_requests: asyncio.Queue[Frame] = asyncio.Queue(maxsize=1000)
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, addr: str) -> RawClient:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    async def _read(self) -> None:
        while True:
            try:
                total, header_len = struct.unpack(">ii", await self.reader.readexactly(8))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            rest = await self.reader.readexactly(total - 4)
            header_len &= 0xFFFFFF
            raw: dict[str, Any] = json.loads(rest[:header_len])
            frame = Frame(raw["code"], raw["opaque"], raw.get("flag", 0),
                          {k: str(v) for k, v in (raw.get("extFields") or {}).items()}, raw.get("remark"),
                          rest[header_len:])
            if frame.flag & FLAG_RESPONSE:
                fut = self.waiting.pop(frame.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(frame)
            else:
                self.server_requests.put_nowait(frame)

    async def request(self, code: int, ext: dict[str, str], body: bytes = b"", timeout: float = 5.0) -> Frame:
        opaque = next(self.opaques)
        fut: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self.waiting[opaque] = fut
        self.writer.write(encode(code, opaque, ext, body))
        return await asyncio.wait_for(fut, timeout)

    async def oneway(self, code: int, ext: dict[str, str], body: bytes = b"") -> None:
        self.writer.write(encode(code, next(self.opaques), ext, body, flag=FLAG_ONEWAY))
        await self.writer.drain()

    def respond(self, request: Frame, code: int, remark: str | None = None) -> None:
        """Answer a broker-initiated request as a Java client's processor does (its opaque, the response flag)."""
        header = json.dumps({"code": code, "flag": FLAG_RESPONSE, "language": "JAVA", "opaque": request.opaque,
                             "remark": remark, "serializeTypeCurrentRPC": "JSON", "version": 395}).encode()
        self.writer.write(struct.pack(">ii", 4 + len(header), len(header)) + header)

    @property
    def local_addr(self) -> str:
        """This end's ``ip:port`` (what the broker sees as the peer)."""
        host, port = self.writer.get_extra_info("sockname")[:2]
        return f"{host}:{port}"

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def decode_message_id(msg_id: str) -> int:
    """The commit-log offset in an offset message id (16 bytes hex: ip 4, port 4, offset 8)."""
    return int(msg_id[16:32], 16)


def properties(**values: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in values.items())
