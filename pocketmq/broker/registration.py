"""``BrokerOuterAPI``: the broker's calls to every name server (register, unregister).

Registration goes to all name servers in parallel, each under its own timeout, so one dead name server
never delays the others; the result of each is reported, not raised, because a broker must keep running
while at least one name server answers.

Two kinds of REGISTER_BROKER, both RocketMQ's (4.9's ``registerBrokerAll`` and ``registerIncrementBrokerData``),
so Java name servers take them as they are:

* **full** (:meth:`BrokerOuterAPI.register_broker_all`): the whole topic table, every
  ``registerNameServerPeriod`` and when a name server needs it. Compressed (RocketMQ's ``compressed=true`` form,
  :mod:`pocketmq.remoting.route`) once the table has :data:`COMPRESS_MIN_TOPICS` topics and none carries a
  ``topicSysFlag`` (the compressed form cannot); the body is encoded once per table version (in a thread: zlib
  gives the GIL back) and reused until the table changes;
* **incremental** (:meth:`BrokerOuterAPI.register_increment`): just the topics created or changed, with the
  table's new ``DataVersion``. A name server records that version, so the next full registration, carrying the
  same version, changes nothing there: an increment may go only to a name server known to hold every topic up
  to it. That is one that accepted a full registration and every increment since, all over the connection
  still open (a name server that restarted is reached over a new connection). Registrations to one name server
  are sent one at a time, in order; a name server that missed one, or whose connection changed, gets a full
  registration instead.

Rejoin (:meth:`BrokerOuterAPI.rejoin`, every :data:`REJOIN_CHECK_INTERVAL`): a name server that refused or
missed a registration, or whose connection closed since it accepted one (it died or restarted), gets a full
registration on its own, at once and then with a doubling backoff up to :data:`REJOIN_MAX_BACKOFF`, instead of
at the next periodic round (30 s). A name server that has just restarted knows only the brokers that registered
since, and clients reading routes from it would see a partial cluster: every broker rejoins it within about a
second of its return.

:class:`IncrementalRegistration` folds the topics created while an increment is on its way into the next one, so
a burst of creations costs a few small registrations, not one per topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
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
#: Topics from which a full registration goes compressed (with ``compressedRegister=true``): below it the
#: body is small anyway, and plain JSON is what a packet capture shows best.
COMPRESS_MIN_TOPICS = 100


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


#: What a full registration sends now: who the broker is and its topic table (a snapshot).
FullSource = Callable[[], tuple[BrokerIdentity, rd.TopicConfigSerializeWrapper]]


def split_namesrv_addr(text: str | None) -> list[str]:
    """``"a:9876;b:9876"`` → ``["a:9876", "b:9876"]`` (blank entries dropped)."""
    return [part.strip() for part in (text or "").split(";") if part.strip()]


def _compressible(table: dict[str, TopicConfig]) -> bool:
    return len(table) >= COMPRESS_MIN_TOPICS and not any(c.topic_sys_flag for c in table.values())


def encode_full_body(wrapper: rd.TopicConfigSerializeWrapper, *, compress: bool) -> tuple[bytes, bool]:
    """A full registration's body and whether it is compressed (see the module docstring). Blocking: a large
    table takes tens of milliseconds."""
    compressed = compress and _compressible(wrapper.topic_config_table)
    return rd.encode_register_body(rd.RegisterBrokerBody(wrapper, []), compressed=compressed), compressed


class CompactLines:
    """Each topic's line of the compressed body, kept from one full registration to the next: a round encodes only
    the topics created or changed since (a config is never changed in place, so identity tells)."""

    def __init__(self) -> None:
        self._lines: dict[str, tuple[TopicConfig, bytes]] = {}

    def lines(self, table: dict[str, TopicConfig]) -> list[bytes]:
        """The table's lines, in its order; topics gone from it are forgotten."""
        kept, out = self._lines, []
        fresh: dict[str, tuple[TopicConfig, bytes]] = {}
        for name, config in table.items():
            entry = kept.get(name)
            if entry is None or entry[0] is not config:
                entry = (config, rd.compact_line(config))
            fresh[name] = entry
            out.append(entry[1])
        self._lines = fresh
        return out


def _header(me: BrokerIdentity, body: bytes, compressed: bool) -> dict[str, str]:
    return RegisterBrokerRequestHeader(me.broker_name, me.broker_addr, me.cluster, me.ha_server_addr, me.broker_id,
                                       compressed=compressed, body_crc32=rd.body_crc32(body)).to_fields()


class BrokerOuterAPI:
    """Talks to the name servers on behalf of one broker. ``source`` gives what a full registration sends (the
    rejoin of a lost name server needs it); ``compress`` is ``compressedRegister``."""

    def __init__(self, client: RemotingClient, namesrv_addrs: list[str], *, timeout: float = 6.0,
                 compress: bool = True, source: FullSource | None = None) -> None:
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout
        self.compress = compress
        self.source = source
        #: Name servers known to hold every topic up to the last registration they accepted, and the connection
        #: over which they accepted everything since their last full registration.
        self._synced: dict[str, Connection] = {}
        #: Name servers to register with again: the monotonic time it is due, and the backoff after it.
        self._due: dict[str, tuple[float, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: The last full body: (identity, table version, topic count) it was made for, header fields, body.
        self._full: tuple[tuple[BrokerIdentity, int, int, int], dict[str, str], bytes] | None = None
        self._compact = CompactLines()

    # -- full registration ------------------------------------------------------------------------------------

    async def register_broker_all(
        self, me: BrokerIdentity, wrapper: rd.TopicConfigSerializeWrapper
    ) -> list[RegisterResult]:
        """A full registration with every name server."""
        header, body = await self._full_body(me, wrapper)
        return list(await asyncio.gather(*(self._full_one(ns, header, body) for ns in self.namesrv_addrs)))

    async def _full_body(self, me: BrokerIdentity,
                         wrapper: rd.TopicConfigSerializeWrapper) -> tuple[dict[str, str], bytes]:
        version = wrapper.data_version
        key = (me, version.counter, version.timestamp, len(wrapper.topic_config_table))
        if self._full is not None and self._full[0] == key:
            return self._full[1], self._full[2]
        table = wrapper.topic_config_table
        compressed = self.compress and _compressible(table)
        if compressed:  # the lines on the loop (most are kept), zlib in a thread (it gives the GIL back)
            body = await asyncio.to_thread(rd.encode_compressed_register_body, version, self._compact.lines(table), [])
        else:
            body, _plain = await asyncio.to_thread(encode_full_body, wrapper, compress=False)
        header = _header(me, body, compressed)
        self._full = (key, header, body)
        return header, body

    async def _full_one(self, namesrv: str, header: dict[str, str], body: bytes) -> RegisterResult:
        async with self._lock(namesrv):
            return await self._send(namesrv, header, body, full=True)

    # -- incremental registration -----------------------------------------------------------------------------

    async def register_increment(self, me: BrokerIdentity, configs: list[TopicConfig],
                                 version: DataVersion) -> list[RegisterResult]:
        """Register ``configs`` (created or changed topics) with the table's ``version``; a name server that
        cannot take an increment gets a full registration instead (module docstring)."""
        wrapper = rd.TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, version.copy())
        body = rd.encode_register_body(rd.RegisterBrokerBody(wrapper, []))
        header = _header(me, body, False)
        return list(await asyncio.gather(*(self._increment_one(ns, header, body) for ns in self.namesrv_addrs)))

    async def _increment_one(self, namesrv: str, header: dict[str, str], body: bytes) -> RegisterResult:
        async with self._lock(namesrv):
            conn = self._synced.get(namesrv)
            if conn is not None and not conn.is_closed:
                return await self._send(namesrv, header, body, full=False, conn=conn)
        if self.source is None:
            return RegisterResult(namesrv, False, error="no full registration to send")
        full_header, full_body = await self._full_body(*self.source())
        return await self._full_one(namesrv, full_header, full_body)

    # -- sending ----------------------------------------------------------------------------------------------

    def _lock(self, namesrv: str) -> asyncio.Lock:
        lock = self._locks.get(namesrv)
        if lock is None:
            lock = self._locks[namesrv] = asyncio.Lock()
        return lock

    async def _send(self, namesrv: str, header: dict[str, str], body: bytes, *, full: bool,
                    conn: Connection | None = None) -> RegisterResult:
        """One registration (the caller holds the name server's lock)."""
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            if conn is None:
                conn = await self.client.connection(namesrv)
            response = await conn.request(request, self.timeout)
        except PocketMQError as exc:
            log.warning("register_failed", namesrv=namesrv, error=str(exc), full=full)
            self._record(namesrv, None)
            return RegisterResult(namesrv, False, error=str(exc))
        if response.code != ResponseCode.SUCCESS:
            error = str(error_for_response(response.code, response.remark, namesrv))
            log.warning("register_refused", namesrv=namesrv, error=error, full=full)
            self._record(namesrv, None)
            return RegisterResult(namesrv, False, error=error)
        if full or self._synced.get(namesrv) is conn:
            self._record(namesrv, conn)
        answer = RegisterBrokerResponseHeader.from_command(response)
        return RegisterResult(namesrv, True, answer.master_addr, answer.ha_server_addr)

    def _record(self, namesrv: str, conn: Connection | None) -> None:
        """``conn``: the name server now holds everything, over it; None: it may lack something."""
        if conn is not None:
            self._synced[namesrv] = conn
            self._due.pop(namesrv, None)
            return
        self._synced.pop(namesrv, None)
        _, backoff = self._due.get(namesrv, (0.0, REJOIN_FIRST_BACKOFF / 2))
        backoff = min(backoff * 2, REJOIN_MAX_BACKOFF)
        self._due[namesrv] = (time.monotonic() + backoff, backoff)

    async def rejoin(self) -> list[RegisterResult]:
        """A full registration with every name server lost since (module docstring) whose retry is due."""
        if self.source is None:
            return []
        now = time.monotonic()
        for ns in [ns for ns, conn in self._synced.items() if conn.is_closed]:
            del self._synced[ns]
            self._due[ns] = (now, REJOIN_FIRST_BACKOFF)
            log.info("namesrv_lost", namesrv=ns)
        due = [ns for ns, (when, _) in self._due.items() if when <= now]
        if not due:
            return []
        header, body = await self._full_body(*self.source())
        results = await asyncio.gather(*(self._full_one(ns, header, body) for ns in due))
        for result in results:
            if result.ok:
                log.info("namesrv_rejoined", namesrv=result.namesrv)
        return list(results)

    async def unregister_broker_all(self, me: BrokerIdentity) -> None:
        header = UnregisterBrokerRequestHeader(me.broker_name, me.broker_addr, me.cluster, me.broker_id).to_fields()

        async def one(namesrv: str) -> None:
            try:
                request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
                await self.client.invoke(namesrv, request, self.timeout)
            except PocketMQError as exc:
                log.warning("unregister_failed", namesrv=namesrv, error=str(exc))

        await asyncio.gather(*(one(ns) for ns in self.namesrv_addrs))


class IncrementalRegistration(Service):
    """Registers created and changed topics incrementally, folding those that come while one registration is
    on its way into the next. :meth:`registered` waits for the registration that carries what was added."""

    name = "broker-register-increment"

    def __init__(self, api: BrokerOuterAPI, identity: Callable[[], BrokerIdentity],
                 version: Callable[[], DataVersion]) -> None:
        super().__init__()
        self._api = api
        self._identity = identity
        self._version = version
        self._pending: dict[str, TopicConfig] = {}
        self._waiters: list[asyncio.Future[list[RegisterResult]]] = []
        #: the results of the last increment sent
        self.last: list[RegisterResult] = []

    def add(self, config: TopicConfig) -> None:
        self._pending[config.topic_name] = config
        self.trigger()

    async def registered(self) -> list[RegisterResult]:
        """The results of the registration that carries every topic added so far (at once when none is left)."""
        if not self._pending or not self.running:
            return []
        waiter: asyncio.Future[list[RegisterResult]] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    async def stop(self) -> None:
        """Stop; a caller still waiting (the broker stops under it) gets no results rather than a hang."""
        await super().stop()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result([])

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(None)
            while self._pending:
                # Taken together on the loop: every change up to this version is in this round or an earlier one.
                configs, waiters = list(self._pending.values()), self._waiters
                self._pending, self._waiters = {}, []
                try:
                    self.last = await self._api.register_increment(self._identity(), configs, self._version())
                finally:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(self.last)
