"""``SlaveSynchronize``: a slave copies its master's metadata every ``interval`` (10 s by default, RocketMQ's period;
``slaveSynchronizeInterval``), the first time after ``first_delay``.

What is copied is a registry (:meth:`SlaveSynchronize.register`): each item names the request code the master
answers with its whole table and how the slave takes it in. Built in, as in RocketMQ: topics (taken as the master
has them), subscription groups (likewise), delay offsets (moved forward only) and consumer offsets (merged by maximum,
never moved backwards: while the master was down, consumers committed to this slave, and the master's older offsets
must not overwrite them when it returns, apache/rocketmq#1094). Anything else that must move with the master
(POP checkpoints, timer progress...) registers its own item and is copied the same way, and so is on a new master of
controller mode when it takes over (:mod:`pocketmq.broker.controller_mode`).

Controller mode copies every ``slaveSynchronizeInterval`` (1 s in the presets) and on demand: a master that created
or changed a topic or a subscription group asks each in-sync slave to copy at once
(SYNC_BROKER_METADATA_NOW, :meth:`SlaveSynchronize.sync_now`) and answers the administrator once they did, so a topic
created on a master is on the replica that may replace it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets, SubscriptionGroupManager
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import PocketMQError, error_for_response
from pocketmq.store.metadata import loads_fastjson

__all__ = ["MetadataItem", "SlaveSynchronize"]

log = get_logger("pocketmq.broker.slave_sync")


@dataclass(frozen=True, slots=True)
class MetadataItem:
    """One thing a slave copies: the request the master answers with the whole table, and how to take it in."""

    name: str
    code: int
    apply: Callable[[bytes], None]


class SlaveSynchronize(PeriodicService):
    """Every ``interval`` seconds (the first after ``first_delay``), copy the master's metadata when the
    master is known."""

    name = "slave-synchronize"

    def __init__(self, *, client: RemotingClient, master_addr: Callable[[], str | None], topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager, groups: SubscriptionGroupManager, delay_offsets: DelayOffsets,
                 interval: float = 10.0, first_delay: float = 3.0, timeout: float = 3.0) -> None:
        super().__init__(interval, initial_delay=first_delay)
        self.client = client
        self.master_addr = master_addr
        self.topics = topics
        self.offsets = offsets
        self.groups = groups
        self.delay_offsets = delay_offsets
        self.timeout = timeout
        self.synced = 0
        self.items: list[MetadataItem] = []
        self.register(MetadataItem("topics", RequestCode.GET_ALL_TOPIC_CONFIG, self._apply_topics))
        self.register(MetadataItem("consumerOffsets", RequestCode.GET_ALL_CONSUMER_OFFSET, self._apply_offsets))
        self.register(MetadataItem("delayOffsets", RequestCode.GET_ALL_DELAY_OFFSET, self._apply_delay_offsets))
        self.register(MetadataItem("subscriptionGroups", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                   lambda body: self.groups.replace_from(body.decode())))

    def register(self, item: MetadataItem) -> None:
        """Copy ``item`` too, from the next round on (an item of the same name is replaced)."""
        self.items = [i for i in self.items if i.name != item.name] + [item]

    async def tick(self) -> None:
        master = self.master_addr()
        if master:
            try:
                await self.sync_all(master)
            except PocketMQError as exc:
                log.warning("slave_sync_failed", master=master, error=str(exc))

    async def _fetch(self, master: str, code: int) -> bytes:
        response = await self.client.invoke(master, RemotingCommand.request(code), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark, master)
        return bytes(response.body or b"")

    async def sync_all(self, master: str) -> None:
        """Copy every registered item from ``master`` (raises PocketMQError; an item whose body does not parse is
        logged and skipped)."""
        for item in list(self.items):
            body = await self._fetch(master, item.code)
            try:
                item.apply(body)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("slave_sync_item_unreadable", item=item.name, master=master, error=str(exc))
        self.synced += 1

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.SYNC_BROKER_METADATA_NOW: self.sync_now}

    async def sync_now(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """The master asks for a copy now (see the module docstring); answered once it is done."""
        master = self.master_addr()
        if not master:
            return None if req.is_oneway else req.response(ResponseCode.SYSTEM_ERROR, "this broker follows no master")
        try:
            await self.sync_all(master)
        except PocketMQError as exc:
            return None if req.is_oneway else req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return None if req.is_oneway else req.response(ResponseCode.SUCCESS)

    # ================================================================================ the built-in items

    def _apply_topics(self, body: bytes) -> None:
        self.topics.replace_all(rd.TopicConfigSerializeWrapper.from_json_dict(rd.decode_body(body)))

    def _apply_offsets(self, body: bytes) -> None:
        offsets = loads_fastjson(body.decode())
        self.offsets.merge_max({str(k): {int(q): int(o) for q, o in v.items()}
                                for k, v in (offsets.get("offsetTable") or {}).items()})

    def _apply_delay_offsets(self, body: bytes) -> None:
        delay = loads_fastjson(body.decode())
        for level, offset in (delay.get("offsetTable") or {}).items():
            self.delay_offsets.advance(int(level), int(offset))
