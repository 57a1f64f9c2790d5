"""The RocketMQ 4.x remoting protocol, shared by every PocketMQ process.

Layers, from the bytes up:

* :mod:`pocketmq.remoting.codes` — request, response, language and serialize-type enums;
* :mod:`pocketmq.remoting.command` — :class:`RemotingCommand`, the one message type on the wire;
* :mod:`pocketmq.remoting.serialization` — header codecs (JSON, ROCKETMQ binary, msgpack);
* :mod:`pocketmq.remoting.frame` — the sans-I/O frame encoder and incremental decoder;
* :mod:`pocketmq.remoting.headers` — typed request/response header dataclasses;
* :mod:`pocketmq.remoting.connection` — one asyncio protocol serving both directions of a connection;
* :mod:`pocketmq.remoting.server` / :mod:`pocketmq.remoting.client` — ``RemotingServer`` and ``RemotingClient``.
"""

from pocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError, ProtocolError, RemotingError, ResponseError

__all__ = [
    "LanguageCode",
    "PocketMQError",
    "ProtocolError",
    "RemotingCommand",
    "RemotingError",
    "RequestCode",
    "ResponseCode",
    "ResponseError",
    "SerializeType",
]
