"""``BrokerOuterAPI``: the broker's calls to every name server (register, unregister).

Registration goes to all name servers in parallel, each under its own timeout, so one dead name server
never delays the others; the result of each is reported, not raised, because a broker must keep running
while at least one name server answers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from common.logs import get_logger
from remoting import route as rd
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import PocketMQError, error_for_response
from remoting.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)

log = get_logger("broker.registration")


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    namesrv: str
    ok: bool
    master_addr: str | None = None
    ha_server_addr: str | None = None
    error: str | None = None


def split_namesrv_addr(text: str | None) -> list[str]:
    """``"a:9876;b:9876"`` → ``["a:9876", "b:9876"]`` (blank entries dropped)."""
    return [part.strip() for part in (text or "").split(";") if part.strip()]


class BrokerOuterAPI:
    """Talks to the name servers on behalf of one broker."""

    def __init__(self, client: RemotingClient, namesrv_addrs: list[str], *, timeout: float = 6.0) -> None:
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout

    async def register_broker_all(
        self, me: BrokerIdentity, wrapper: rd.TopicConfigSerializeWrapper
    ) -> list[RegisterResult]:
        body = rd.encode_register_body(rd.RegisterBrokerBody(wrapper, []))
        header = RegisterBrokerRequestHeader(
            me.broker_name, me.broker_addr, me.cluster, me.ha_server_addr, me.broker_id,
            compressed=False, body_crc32=rd.body_crc32(body),
        ).to_fields()
        return list(await asyncio.gather(*(self._register_one(ns, header, body) for ns in self.namesrv_addrs)))

    async def _register_one(self, namesrv: str, header: dict[str, str], body: bytes) -> RegisterResult:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            response = await self.client.invoke(namesrv, request, self.timeout)
        except PocketMQError as exc:
            log.warning("register_failed", namesrv=namesrv, error=str(exc))
            return RegisterResult(namesrv, False, error=str(exc))
        if response.code != ResponseCode.SUCCESS:
            error = str(error_for_response(response.code, response.remark, namesrv))
            log.warning("register_refused", namesrv=namesrv, error=error)
            return RegisterResult(namesrv, False, error=error)
        answer = RegisterBrokerResponseHeader.from_command(response)
        return RegisterResult(namesrv, True, answer.master_addr, answer.ha_server_addr)

    async def unregister_broker_all(self, me: BrokerIdentity) -> None:
        header = UnregisterBrokerRequestHeader(me.broker_name, me.broker_addr, me.cluster, me.broker_id).to_fields()

        async def one(namesrv: str) -> None:
            try:
                request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
                await self.client.invoke(namesrv, request, self.timeout)
            except PocketMQError as exc:
                log.warning("unregister_failed", namesrv=namesrv, error=str(exc))

        await asyncio.gather(*(one(ns) for ns in self.namesrv_addrs))
