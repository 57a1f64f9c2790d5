"""``SlaveSynchronize``: a slave copies its master's metadata every 10 s (first after 3 s).

Topics, subscription groups and delay offsets are taken as the master has them. Consumer offsets are
merged by maximum, never moved backwards: while the master was down, consumers committed to this slave,
and the master's older offsets must not overwrite them when it returns (apache/rocketmq#1094).
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets, SubscriptionGroupManager
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError, error_for_response
from pocketmq.store.metadata import loads_fastjson

log = get_logger("pocketmq.broker.slave_sync")


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
        wrapper = rd.TopicConfigSerializeWrapper.from_json_dict(
            rd.decode_body(await self._fetch(master, RequestCode.GET_ALL_TOPIC_CONFIG)))
        self.topics.replace_all(wrapper)
        offsets = loads_fastjson((await self._fetch(master, RequestCode.GET_ALL_CONSUMER_OFFSET)).decode())
        self.offsets.merge_max({str(k): {int(q): int(o) for q, o in v.items()}
                                for k, v in (offsets.get("offsetTable") or {}).items()})
        delay = loads_fastjson((await self._fetch(master, RequestCode.GET_ALL_DELAY_OFFSET)).decode())
        for level, offset in (delay.get("offsetTable") or {}).items():
            self.delay_offsets.advance(int(level), int(offset))
        self.groups.replace_from((await self._fetch(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).decode())
        self.synced += 1
