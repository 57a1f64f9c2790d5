"""``BrokerOuterAPI``: the broker's calls to every name server (register, unregister).

Registration goes to all name servers in parallel, each under its own timeout, so one dead name server
never delays the others; the result of each is reported, not raised, because a broker must keep running
while at least one name server answers.

Rejoin (:meth:`BrokerOuterAPI.rejoin`, every :data:`REJOIN_CHECK_INTERVAL`): a name server that refused or
missed a registration, or whose connection closed since it accepted one (it died or restarted), gets the
broker's last registration again on its own, at once and then with a doubling backoff up to
:data:`REJOIN_MAX_BACKOFF`, instead of at the next periodic round (30 s). A name server that has just
restarted knows only the brokers that registered since, and clients reading routes from it would see a
partial cluster: every broker rejoins it within about a second of its return.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError, error_for_response
from pocketmq.remoting.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)

log = get_logger("pocketmq.broker.registration")

#: Seconds between two checks for name servers to rejoin (cheap: no I/O unless one is due).
REJOIN_CHECK_INTERVAL = 0.25
#: First and largest delay between two registrations of the broker with a name server it lost (s).
REJOIN_FIRST_BACKOFF = 0.25
REJOIN_MAX_BACKOFF = 8.0


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    #: controller mode: the master epoch this broker knows (the name servers list as brokerId 0 only the newest)
    master_epoch: int | None = None


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
        #: The last registration sent (header fields, body): what a lost name server gets again.
        self._last: tuple[dict[str, str], bytes] | None = None
        #: Name servers that accepted the last registration they got.
        self._joined: set[str] = set()
        #: Name servers to register with again: the monotonic time it is due, and the backoff after it.
        self._due: dict[str, tuple[float, float]] = {}

    async def register_broker_all(
        self, me: BrokerIdentity, wrapper: rd.TopicConfigSerializeWrapper
    ) -> list[RegisterResult]:
        body = rd.encode_register_body(rd.RegisterBrokerBody(wrapper, []))
        header = RegisterBrokerRequestHeader(
            me.broker_name, me.broker_addr, me.cluster, me.ha_server_addr, me.broker_id,
            compressed=False, body_crc32=rd.body_crc32(body), master_epoch=me.master_epoch,
        ).to_fields()
        self._last = (header, body)
        return list(await asyncio.gather(*(self._register_one(ns, header, body) for ns in self.namesrv_addrs)))

    async def rejoin(self) -> list[RegisterResult]:
        """Register again with every name server lost since (module docstring) whose retry is due."""
        if self._last is None:
            return []
        now = time.monotonic()
        live = set(self.client.addresses)
        for ns in [ns for ns in self._joined if ns not in live]:
            self._joined.discard(ns)
            self._due[ns] = (now, REJOIN_FIRST_BACKOFF)
            log.info("namesrv_lost", namesrv=ns)
        due = [ns for ns, (when, _) in self._due.items() if when <= now]
        if not due:
            return []
        header, body = self._last
        results = await asyncio.gather(*(self._register_one(ns, header, body) for ns in due))
        for result in results:
            if result.ok:
                log.info("namesrv_rejoined", namesrv=result.namesrv)
        return list(results)

    def _record(self, namesrv: str, ok: bool) -> None:
        if ok:
            self._joined.add(namesrv)
            self._due.pop(namesrv, None)
            return
        self._joined.discard(namesrv)
        _, backoff = self._due.get(namesrv, (0.0, REJOIN_FIRST_BACKOFF / 2))
        backoff = min(backoff * 2, REJOIN_MAX_BACKOFF)
        self._due[namesrv] = (time.monotonic() + backoff, backoff)

    async def _register_one(self, namesrv: str, header: dict[str, str], body: bytes) -> RegisterResult:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            response = await self.client.invoke(namesrv, request, self.timeout)
        except PocketMQError as exc:
            log.warning("register_failed", namesrv=namesrv, error=str(exc))
            self._record(namesrv, False)
            return RegisterResult(namesrv, False, error=str(exc))
        if response.code != ResponseCode.SUCCESS:
            error = str(error_for_response(response.code, response.remark, namesrv))
            log.warning("register_refused", namesrv=namesrv, error=error)
            self._record(namesrv, False)
            return RegisterResult(namesrv, False, error=error)
        self._record(namesrv, True)
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
