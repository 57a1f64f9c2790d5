"""``RemotingCommand``: the one message type every request and response on the wire is.

A command carries the seven header fields of RocketMQ's ``RemotingCommand`` and an opaque body. ``ext_fields`` always
holds strings on the way out (RocketMQ clients read them unguarded as strings); decoders coerce whatever
a peer sent (numbers, booleans) into strings on the way in.
"""

from __future__ import annotations

import itertools

from pocketmq.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    ROCKETMQ_VERSION,
    LanguageCode,
    SerializeType,
)

#: The body type the codec accepts: bytes-like objects are written without another copy.
Body = bytes | bytearray | memoryview

_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A process-wide request id, wrapped to a positive int32 as Java's ``AtomicInteger`` would be."""
    return next(_opaque_counter) & 0x7FFFFFFF


class RemotingCommand:
    """A request or response. Plain slotted class: it is created once per message on every hot path."""

    __slots__ = ("body", "code", "ext_fields", "flag", "language", "opaque", "remark", "serialize_type", "version")

    def __init__(
        self,
        code: int,
        *,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body | None = None,
        language: int = LanguageCode.PYTHON,
        version: int = ROCKETMQ_VERSION,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    # -- constructors -------------------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body | None = None,
        *,
        serialize_type: int = SerializeType.JSON,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request with a fresh ``opaque``."""
        return cls(
            code,
            opaque=next_opaque(),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=ext_fields,
            body=body,
            serialize_type=serialize_type,
        )

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body | None = None,
    ) -> RemotingCommand:
        """The response to this request: same ``opaque`` and serialize type, response flag set.

        Servers answer as a Java broker does (language JAVA), because that is what every RocketMQ
        client has been tested against.
        """
        return RemotingCommand(
            code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields,
            body=body,
            language=LanguageCode.JAVA,
            serialize_type=self.serialize_type,
        )

    # -- flags --------------------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def field(self, name: str, default: str | None = None) -> str | None:
        """One ``extFields`` value, or ``default``."""
        ext = self.ext_fields
        if ext is None:
            return default
        return ext.get(name, default)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        size = 0 if self.body is None else len(self.body)
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={size}B type={self.serialize_type})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__ if s != "body") and bytes(
            self.body or b""
        ) == bytes(other.body or b"")

    __hash__ = None  # type: ignore[assignment]
