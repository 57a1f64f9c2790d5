"""Sans-I/O frame codec: ``RemotingCommand`` to bytes and back, no sockets involved.

Frame layout (big-endian)::

    offset 0   length:u32            = 4 + header_length + body_length (does not count itself)
    offset 4   serialize_type:u8 · header_length:u24
    offset 8   header (header_length bytes, see remoting.serialization)
    ...        body (the rest of the frame; may be empty)

:class:`FrameDecoder` is fed arbitrary chunks and returns the complete commands they finish. Anything
malformed raises :class:`~pocketmq.remoting.errors.ProtocolError` and poisons the decoder: a byte stream that lost
its framing cannot be resynchronised, so the connection must be closed.
"""

from __future__ import annotations

import struct

from pocketmq.remoting.codes import SerializeType
from pocketmq.remoting.command import Body, RemotingCommand
from pocketmq.remoting.errors import ProtocolError
from pocketmq.remoting.serialization import DECODERS, encode_header

DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
_PREFIX = struct.Struct(">II")
PREFIX_SIZE = _PREFIX.size
_MAX_HEADER = 0xFFFFFF
_KNOWN_TYPES = frozenset(int(t) for t in SerializeType)


def encode_prefix_and_header(cmd: RemotingCommand) -> tuple[bytes, Body | None]:
    """The frame as (prefix + header, body): the body is returned as is, so a caller can write it
    without copying it into a new buffer."""
    header = encode_header(cmd)
    if len(header) > _MAX_HEADER:
        raise ProtocolError(f"header of {len(header)} bytes exceeds the 24-bit header length")
    body = cmd.body
    body_len = len(body) if body else 0
    prefix = _PREFIX.pack(4 + len(header) + body_len, (cmd.serialize_type << 24) | len(header))
    return prefix + header, body if body_len else None


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame as one ``bytes`` object."""
    head, body = encode_prefix_and_header(cmd)
    return head + bytes(body) if body else head


class FrameDecoder:
    """Incremental decoder. ``feed(chunk)`` returns the commands completed by ``chunk``.

    Bytes wait in one bounded buffer: never more than one frame (at most ``max_frame_length``) plus the
    current chunk. ``_need`` remembers how many bytes the pending frame wants, so a large frame arriving
    in many small chunks is parsed once, not rescanned on every chunk.
    """

    __slots__ = ("_buf", "_error", "_need", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._need = PREFIX_SIZE
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._error is not None:
            raise self._error
        if self._buf:
            self._buf += chunk
            if len(self._buf) < self._need:
                return []
            data = bytes(self._buf)
            self._buf.clear()
        else:
            data = bytes(chunk) if not isinstance(chunk, bytes) else chunk
        try:
            return self._parse(data)
        except ProtocolError as exc:
            self._error = exc
            self._buf.clear()
            raise

    def _parse(self, data: bytes) -> list[RemotingCommand]:
        commands: list[RemotingCommand] = []
        pos = 0
        end = len(data)
        max_len = self.max_frame_length
        while end - pos >= PREFIX_SIZE:
            length, type_and_len = _PREFIX.unpack_from(data, pos)
            header_len = type_and_len & _MAX_HEADER
            serialize_type = type_and_len >> 24
            self._check(length, header_len, serialize_type, max_len)
            frame_end = pos + 4 + length
            if frame_end > end:
                self._need = 4 + length
                break
            header_start = pos + PREFIX_SIZE
            body_start = header_start + header_len
            cmd = DECODERS[serialize_type](data[header_start:body_start])  # type: ignore[index,unused-ignore]
            if body_start < frame_end:
                cmd.body = data[body_start:frame_end]
            commands.append(cmd)
            pos = frame_end
        else:
            self._need = PREFIX_SIZE
        if pos < end:
            self._buf += data[pos:] if pos else data
        return commands

    @staticmethod
    def _check(length: int, header_len: int, serialize_type: int, max_len: int) -> None:
        if length < 4:
            raise ProtocolError(f"frame length {length} is shorter than its 4-byte header-length word")
        if length > max_len:
            raise ProtocolError(f"frame length {length} exceeds the maximum {max_len}")
        if header_len > length - 4:
            raise ProtocolError(f"header length {header_len} is longer than the frame ({length - 4} bytes)")
        if serialize_type not in _KNOWN_TYPES:
            raise ProtocolError(f"unknown serialize type {serialize_type}")
