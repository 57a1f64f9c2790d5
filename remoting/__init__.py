"""The RocketMQ 4.x remoting protocol, shared by every PocketMQ process.

Layers, from the bytes up:

* :mod:`remoting.codes` — request, response, language and serialize-type enums;
* :mod:`remoting.command` — :class:`RemotingCommand`, the one message type on the wire;
* :mod:`remoting.serialization` — header codecs (JSON, ROCKETMQ binary, msgpack);
* :mod:`remoting.frame` — the sans-I/O frame encoder and incremental decoder;
* :mod:`remoting.headers` — typed request/response header dataclasses;
* :mod:`remoting.connection` — one asyncio protocol serving both directions of a connection;
* :mod:`remoting.server` / :mod:`remoting.client` — ``RemotingServer`` and ``RemotingClient``.
"""

import common.compiled  # noqa: F401  (first: it picks compiled or source modules, see common.compiled)
from remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.errors import PocketMQError, ProtocolError, RemotingError, ResponseError

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
