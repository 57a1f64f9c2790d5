"""``ConsumerIdsChangeNotifier``: NOTIFY_CONSUMER_IDS_CHANGED (40) to the clients of a consumer group whose members
changed, so that they rebalance now instead of at their next 20 s round (RocketMQ's
``DefaultConsumerIdsChangeListener``).

RocketMQ notifies every member on every change, so N clients of a group starting together cost N(N+1)/2 oneway
requests and as many rebalances. Here a change marks the group; the marks are gathered for
:data:`COALESCE_S` and each marked group's members are told once: a burst of joins or a restart of many clients
costs one notification per member. A group whose ``notifyConsumerIdsChangedEnable`` is false is not notified.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pocketmq.broker.client_manager import ClientManager
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError

log = get_logger("pocketmq.broker.ids_change")

#: Seconds the changes of a burst are gathered before their groups are notified.
COALESCE_S = 0.1


class ConsumerIdsChangeNotifier(Service):
    """See the module docstring. ``enabled(group)`` is the group's ``notifyConsumerIdsChangedEnable``."""

    name = "broker-notify-consumer-ids"

    def __init__(self, clients: ClientManager, enabled: Callable[[str], bool] | None = None,
                 coalesce: float = COALESCE_S) -> None:
        super().__init__()
        self.clients = clients
        self.enabled = enabled
        self.coalesce = coalesce
        self._changed: set[str] = set()
        #: notifications sent so far (one per member of a changed group)
        self.sent = 0

    def changed(self, group: str) -> None:
        """``group``'s members changed: notify them after the gathering delay."""
        self._changed.add(group)
        self.trigger()

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(None)
            await asyncio.sleep(self.coalesce)
            groups, self._changed = self._changed, set()
            for group in sorted(groups):
                self.notify(group)

    def notify(self, group: str) -> None:
        """Push NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every live client of ``group`` now."""
        info = self.clients.consumers.get(group)
        if info is None or (self.enabled is not None and not self.enabled(group)):
            return
        for channel in list(info.channels.values()):
            if channel.connection.is_closed:
                continue
            request = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group},
                                              oneway=True)
            try:
                channel.connection.send(request)
                self.sent += 1
            except PocketMQError:
                log.debug("notify_failed", group=group, client=channel.client_id)
