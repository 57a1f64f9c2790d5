"""``PullMessageProcessor``: PULL_MESSAGE (11) with broker-side tag filtering and long polling.

The store's status becomes a response code in :func:`pocketmq.broker.status.get_status_to_response`.
A pull that finds nothing and carries the SUSPEND flag is parked in
:class:`~pocketmq.broker.long_polling.PullRequestHoldService` until a matching message arrives or its
``suspendTimeoutMillis`` passes, then re-run once without suspending. Parking is a coroutine of its own,
so other requests on the same connection (heartbeats) are answered meanwhile.

SQL92 subscriptions (``expressionType=SQL92``, from the group's heartbeat or the pull's own ``subscription``)
are compiled once by :class:`~pocketmq.broker.filter.ConsumerFilterManager` and evaluated on each message's properties
while the store reads (tag codes first when the selector allows it). As in RocketMQ 4.9: an expression in the
pull that does not compile is SUBSCRIPTION_PARSE_FAILED (23), one from a heartbeat FILTER_DATA_NOT_EXIST (27),
and with ``enablePropertyFilter=false`` a SQL92 subscription is SYSTEM_ERROR (1) "The broker does not support
consumer to filter message by SQL92".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.filter import ConsumerFilterManager, is_tag_type
from pocketmq.broker.long_polling import MessageFilter, PullRequestHoldService, RecordFilter
from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from pocketmq.broker.rewind_guard import RewindGuard
from pocketmq.broker.status import get_status_to_response
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.filter import FilterError
from pocketmq.common.subscription import SubscriptionData, build_subscription_data
from pocketmq.common.sysflag import PullSysFlag
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetMessageResult, GetMessageStatus

#: Longest a pull may be parked whatever the client asks (clients send 15-30 s).
MAX_SUSPEND_SECONDS = 60.0


class PullMessageProcessor:
    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        clients: ClientManager,
        offsets: ConsumerOffsetManager,
        groups: SubscriptionGroupManager,
        hold: PullRequestHoldService,
        is_master: bool,
        broker_permission: Callable[[], int],
        slave_read_enable: bool,
        on_get: Callable[[int, int, str, str], None] | None = None,
        filters: ConsumerFilterManager | None = None,
        enable_property_filter: bool = False,
        rewind: RewindGuard | None = None,
    ) -> None:
        self.store = store
        #: after an abnormal start on a master: first pulls from beyond a queue's recovered end move back to it
        self.rewind = rewind
        self.topics = topics
        self.clients = clients
        self.offsets = offsets
        self.groups = groups
        self.hold = hold
        self.is_master = is_master
        self.broker_permission = broker_permission
        self.slave_read_enable = slave_read_enable
        self.on_get = on_get
        self.filters = filters if filters is not None else ConsumerFilterManager()
        self.enable_property_filter = enable_property_filter
        hold.set_record_reader(self._record_at)

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.PULL_MESSAGE: self.pull}

    def pull(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = PullMessageRequestHeader.from_command(req)
        checked = self._check(req, h)
        if isinstance(checked, RemotingCommand):
            return checked
        filters = self._filters(req, h, checked)
        if isinstance(filters, RemotingCommand):
            return filters
        message_filter, record_filter = filters
        if self.rewind is not None:
            end = self.rewind.moved_to(h.consumer_group, h.topic, h.queue_id, h.queue_offset)
            if end is not None:  # an offset from before a power loss (broker.rewind_guard): neither read nor commit
                cq = self.store.find_consume_queue(h.topic, h.queue_id)
                low, high = (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)
                return self._respond(req, h, GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, end, low, high))
        if h.sys_flag & PullSysFlag.COMMIT_OFFSET and self.is_master and h.commit_offset >= 0:
            self.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        result = self._read(h, message_filter, record_filter)
        suspend = h.sys_flag & PullSysFlag.SUSPEND and h.suspend_timeout_millis > 0
        # Every "not found" is parked, as RocketMQ does: the queue's end (OFFSET_OVERFLOW_ONE) and a queue
        # never written to yet, pulled at 0.
        if (suspend and get_status_to_response(result, h.queue_offset, self.is_master)[0] == ResponseCode.PULL_NOT_FOUND
                and self.hold.has_room()):
            result.release()
            return self._suspend(req, h, message_filter, record_filter, conn)
        return self._respond(req, h, result)

    def _suspend(self, req: RemotingCommand, h: PullMessageRequestHeader, message_filter: MessageFilter | None,
                 record_filter: RecordFilter | None, conn: Connection) -> Awaitable[RemotingCommand]:
        timeout = min(h.suspend_timeout_millis / 1000, MAX_SUSPEND_SECONDS)
        woken = self.hold.park(h.topic, h.queue_id, h.queue_offset, timeout, message_filter, record_filter)
        conn.park(woken)  # a pull whose consumer left (or a stopping broker) is not held
        return self._answer_when_woken(req, h, message_filter, record_filter, woken)

    async def _answer_when_woken(self, req: RemotingCommand, h: PullMessageRequestHeader,
                                 message_filter: MessageFilter | None, record_filter: RecordFilter | None,
                                 woken: Awaitable[bool]) -> RemotingCommand:
        await woken
        return self._respond(req, h, self._read(h, message_filter, record_filter))

    def _read(self, h: PullMessageRequestHeader, message_filter: MessageFilter | None,
              record_filter: RecordFilter | None) -> GetMessageResult:
        return self.store.get_messages(h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums,
                                       h.max_msg_bytes, message_filter, record_filter)

    def _record_at(self, topic: str, queue_id: int, offset: int) -> memoryview | None:
        """The stored record at a queue offset (the long-poll wake-up's property check); None if gone."""
        cq = self.store.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(offset) if cq is not None and cq.min_offset <= offset < cq.max_offset else None
        if unit is None or unit[1] == BLANK_UNIT_SIZE:
            return None
        return self.store.get_commit_log_data(unit[0], unit[1])

    def _filters(self, req: RemotingCommand, h: PullMessageRequestHeader, sub: SubscriptionData
                 ) -> RemotingCommand | tuple[MessageFilter | None, RecordFilter | None]:
        """The tag-code and record filters of a subscription, or the error answer (see the module docstring)."""
        if is_tag_type(sub.expression_type):
            return sub.tags_code_filter(), None
        try:
            compiled = self.filters.get(h.consumer_group, sub)
        except FilterError:
            if h.sys_flag & PullSysFlag.SUBSCRIPTION:
                return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
            return req.response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                "The broker's consumer filter data is not exist!Your expression may be wrong!")
        if not self.enable_property_filter:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {sub.expression_type}")
        return compiled.tags_filter, compiled.record_filter

    def _check(self, req: RemotingCommand, h: PullMessageRequestHeader) -> RemotingCommand | SubscriptionData:
        if not self.broker_permission() & PermName.PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, "the broker pulling message is forbidden")
        group = self.groups.find_or_create(h.consumer_group)
        if group is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{h.consumer_group}] does not exist")
        if not group.consume_enable:
            return req.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
        topic = self.topics.get(h.topic)
        if topic is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not topic.perm & PermName.PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if not 0 <= h.queue_id < topic.read_queue_nums:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] has {topic.read_queue_nums}")
        if h.sys_flag & PullSysFlag.SUBSCRIPTION:
            if is_tag_type(h.expression_type):
                return build_subscription_data(h.topic, h.subscription, h.sub_version)
            return SubscriptionData(h.topic, h.subscription or "", sub_version=h.sub_version,
                                    expression_type=str(h.expression_type))
        info = self.clients.consumers.get(h.consumer_group)
        if info is None:
            return req.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                f"the consumer's group info not exist, group: {h.consumer_group}")
        sub = info.subscriptions.get(h.topic)
        if sub is None:
            return req.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                f"the consumer's subscription not exist, topic: {h.topic}")
        if sub.sub_version < h.sub_version:
            return req.response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        return sub

    def _respond(self, req: RemotingCommand, h: PullMessageRequestHeader, result: GetMessageResult) -> RemotingCommand:
        code, next_offset = get_status_to_response(result, h.queue_offset, self.is_master)
        suggest = 0
        if self.slave_read_enable and result.suggest_pulling_from_slave:
            suggest = 1
        fields = PullMessageResponseHeader(suggest, next_offset, result.min_offset, result.max_offset).to_fields()
        body = None
        if code == ResponseCode.SUCCESS:
            body = b"".join(result.message_buffers)
            if self.on_get is not None:
                self.on_get(result.message_count, len(body), h.topic, h.consumer_group)
        result.release()
        return req.response(code, None if code == ResponseCode.SUCCESS else result.status.value, fields, body)
