"""Fakes for the producer tests that exercise rules the real broker cannot be made to break on demand.

* :class:`ScriptedBroker` — a real :class:`RemotingServer` on 127.0.0.1:0 that registers topics with real name
  servers (REGISTER_BROKER, as the name-server tests' fake brokers do) and answers every send request with
  what its ``script`` says: a response code, "never answer", or "close the connection". It records every
  request it gets (sends, heartbeats, unregisters).
* :class:`ScriptedNamesrv` — a server answering GET_ROUTEINFO_BY_TOPIC from a table, optionally slowly or never,
  counting the requests per topic.

End-to-end behaviour is tested against the real broker elsewhere; these only pin down the client's rules.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, HandlerResult
from pocketmq.remoting.headers import RegisterBrokerRequestHeader
from pocketmq.remoting.server import RemotingServer, ServerConfig

CLUSTER = "DefaultCluster"
SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)

#: A script step: a response code, HANG (never answer) or CLOSE (drop the connection).
HANG = -1
CLOSE = -2


def ns_config(path: Path) -> NamesrvConfig:
    return NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=str(path / "kvConfig.json"))


async def start_namesrv(path: Path) -> NamesrvController:
    ns = NamesrvController(ns_config(path))
    await ns.start()
    return ns


async def stop_scripted(server: RemotingServer, hung: Sequence[asyncio.Future[Any]], *, grace: float) -> None:
    """Stop a scripted server: answer (with None) the requests it was told to hang on, then close it."""
    for fut in hung:
        if not fut.done():
            fut.set_result(None)
    await server.stop(grace=grace)


@dataclass
class Received:
    code: int
    fields: dict[str, str]
    body: bytes
    oneway: bool
    serialize_type: int


@dataclass
class ScriptedBroker:
    """A broker group's master that answers sends as scripted (default: SUCCESS)."""

    name: str
    topics: dict[str, int] = field(default_factory=dict)  # topic -> queue nums (perm 6); TBW102 gets perm 7
    script: list[int] = field(default_factory=list)  # consumed one per send; empty -> default_code
    default_code: int = ResponseCode.SUCCESS
    received: list[Received] = field(default_factory=list)
    heartbeats: list[dict[str, object]] = field(default_factory=list)
    unregisters: list[dict[str, str]] = field(default_factory=list)
    on_send: Callable[[Received], None] | None = None

    def __post_init__(self) -> None:
        self.server = RemotingServer(ServerConfig(host="127.0.0.1", port=0), name=self.name)
        for code in SEND_CODES:
            self.server.register(code, self._send)
        self.server.register(RequestCode.HEART_BEAT, self._heartbeat)
        self.server.register(RequestCode.UNREGISTER_CLIENT, self._unregister)
        self._offsets = itertools.count()
        self._hung: list[asyncio.Future[RemotingCommand | None]] = []
        self._registrar = RemotingClient()

    @property
    def addr(self) -> str:
        return self.server.addr

    @property
    def sends(self) -> list[Received]:
        return [r for r in self.received if r.code in SEND_CODES]

    async def start(self) -> ScriptedBroker:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await stop_scripted(self.server, self._hung, grace=0.5)
        await self._registrar.close()

    async def register(self, *namesrvs: str, counter: int = 1, addr: str | None = None) -> None:
        table = {
            topic: TopicConfig(topic, read_queue_nums=nums, write_queue_nums=nums,
                                  perm=7 if topic == "TBW102" else 6)
            for topic, nums in self.topics.items()
        }
        body = rd.encode_register_body(
            rd.RegisterBrokerBody(rd.TopicConfigSerializeWrapper(table, DataVersion(counter, 1690000000000)), [])
        )
        broker_addr = addr or self.addr
        header = RegisterBrokerRequestHeader(self.name, broker_addr, CLUSTER, broker_addr, 0,
                                             body_crc32=rd.body_crc32(body))
        for ns in namesrvs:
            resp = await self._registrar.invoke(
                ns, RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_fields(), body)
            )
            assert resp.code == ResponseCode.SUCCESS, resp

    def _send(self, cmd: RemotingCommand, conn: Connection) -> HandlerResult:
        rec = Received(cmd.code, dict(cmd.ext_fields or {}), bytes(cmd.body or b""), cmd.is_oneway,
                       cmd.serialize_type)
        self.received.append(rec)
        if self.on_send is not None:
            self.on_send(rec)
        step = self.script.pop(0) if self.script else self.default_code
        if step == HANG:
            fut: asyncio.Future[RemotingCommand | None] = asyncio.get_running_loop().create_future()
            self._hung.append(fut)
            return fut
        if step == CLOSE:
            conn.abort()
            return None
        if step in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                    ResponseCode.SLAVE_NOT_AVAILABLE):
            queue_id = rec.fields.get("e", rec.fields.get("queueId", "0"))
            offset = next(self._offsets)
            ids = self._offset_ids(rec, offset)
            return cmd.response(step, None, {
                "msgId": ids, "queueId": queue_id, "queueOffset": str(offset),
                "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
            })
        return cmd.response(step, f"scripted {step} from {self.name}")

    def _offset_ids(self, rec: Received, offset: int) -> str:
        count = 1
        if rec.code == RequestCode.SEND_BATCH_MESSAGE:
            count = _count_batch_entries(rec.body)
        return ",".join(f"{self.name.upper()}{offset:08X}{i:04X}" for i in range(count))

    def _heartbeat(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.received.append(Received(cmd.code, dict(cmd.ext_fields or {}), bytes(cmd.body or b""),
                                      cmd.is_oneway, cmd.serialize_type))
        self.heartbeats.append(json.loads(bytes(cmd.body or b"")))
        return cmd.response(ResponseCode.SUCCESS)

    def _unregister(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.unregisters.append(dict(cmd.ext_fields or {}))
        return cmd.response(ResponseCode.SUCCESS)


def _count_batch_entries(body: bytes) -> int:
    count = pos = 0
    while pos + 4 <= len(body):
        pos += int.from_bytes(body[pos:pos + 4], "big")
        count += 1
    return count


def route_for(*brokers: tuple[str, str, int]) -> rd.TopicRouteData:
    """A route over ``(broker name, master addr, queue nums)``."""
    return rd.TopicRouteData(
        [rd.QueueData(name, nums, nums, 6) for name, _, nums in brokers],
        [rd.BrokerData(CLUSTER, name, {0: addr}) for name, addr, _ in brokers],
    )


class ScriptedNamesrv:
    """GET_ROUTEINFO_BY_TOPIC from ``routes``; with a ``gate``, answers only once the test sets it; ``hang``
    never answers."""

    def __init__(self, routes: dict[str, rd.TopicRouteData] | None = None, *, gate: asyncio.Event | None = None,
                 hang: bool = False) -> None:
        self.routes = dict(routes or {})
        self.gate = gate
        self.hang = hang
        self.calls: dict[str, int] = {}
        self.server = RemotingServer(ServerConfig(host="127.0.0.1", port=0), name="scripted-ns")
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)
        self._hung: list[asyncio.Future[None]] = []

    @property
    def addr(self) -> str:
        return self.server.addr

    async def start(self) -> ScriptedNamesrv:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await stop_scripted(self.server, self._hung, grace=0.2)

    async def _route(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        topic = (cmd.ext_fields or {}).get("topic", "")
        self.calls[topic] = self.calls.get(topic, 0) + 1
        if self.hang:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hung.append(fut)
            await fut
            return None
        if self.gate is not None:
            await self.gate.wait()
        route = self.routes.get(topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        msgpack = cmd.serialize_type == SerializeType.MSGPACK
        body = rd.encode_route(route, standard_json=True,
                               serialize_type=SerializeType.MSGPACK if msgpack else SerializeType.JSON)
        return cmd.response(ResponseCode.SUCCESS, body=body)
