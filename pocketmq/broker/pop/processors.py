"""The POP request codes on the wire (RocketMQ 5's ``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``, ``NotificationProcessor``, ``PollingInfoProcessor``): header checks with
RocketMQ's codes and remarks, then :class:`~pocketmq.broker.pop.service.PopService`.

* POP_MESSAGE (200050): SUCCESS with the stored records as the body (as a pull's), or POLLING_TIMEOUT (210) when
  nothing came within ``pollTime`` (long polling in :mod:`pocketmq.broker.pop.long_polling`), POLLING_FULL (209)
  when too many pops wait. ``maxMsgNums`` above 32 and an ``invisibleTime`` outside
  [``minInvisibleTimeMillsForRecv``, ``maxInvisibleTimeMills``] are INVALID_PARAMETER (29).
* ACK_MESSAGE (200051) / BATCH_ACK_MESSAGE (200151) / CHANGE_MESSAGE_INVISIBLETIME (200053): a malformed
  receipt handle is INVALID_PARAMETER; one that names no message in flight (unknown, expired, another group's,
  superseded) is NO_MESSAGE (208) with the reason; a batch acks what it can and says what it could not.
* NOTIFICATION (200054): ``hasMsg`` once the group has something to pop (long polling as a pop's).
* POLLING_INFO (200055): how many pops of the group wait on the queue.

A slave answers SERVICE_NOT_AVAILABLE: POP's state is written by the master.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from pocketmq.broker.filter import ConsumerFilterManager, is_tag_type
from pocketmq.broker.metadata import SubscriptionGroupManager
from pocketmq.broker.pop.long_polling import PopLongPollingService
from pocketmq.broker.pop.revive_log import now_ms
from pocketmq.broker.pop.service import (
    AckEntry,
    MessageFilter,
    PopError,
    PopRequest,
    PopResult,
    PopService,
    RecordFilter,
)
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.filter import FilterError
from pocketmq.common.pop import (
    POP_MAX_MSG_NUMS,
    PopFormatError,
    ReceiptHandle,
    decode_batch_ack_body,
    join_entries,
    pop_retry_topic,
    real_topic,
)
from pocketmq.common.subscription import SUB_ALL, ExpressionType, SubscriptionData, build_subscription_data
from pocketmq.common.topic_config import PermName, TopicConfig
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import GetConsumeStatsRequestHeader
from pocketmq.remoting.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
)

#: Longest a POP or NOTIFICATION waits for a message whatever its ``pollTime``.
MAX_POLL_MS = 60_000
#: RocketMQ refuses a pop that arrives this late after its ``bornTime + pollTime`` (clock skew included).
TIMEOUT_TOO_MUCH_MS = 500


class PopProcessor:
    """The POP codes of one broker; ``pop`` is None on a slave."""

    def __init__(self, *, pop: PopService | None, hold: PopLongPollingService, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, filters: ConsumerFilterManager, broker_name: str,
                 broker_permission: Callable[[], int], enable_property_filter: Callable[[], bool],
                 min_invisible_time: int, max_invisible_time: int) -> None:
        self.pop = pop
        self.hold = hold
        self.topics = topics
        self.groups = groups
        self.filters = filters
        self.broker_name = broker_name
        self.broker_permission = broker_permission
        self.enable_property_filter = enable_property_filter
        self.min_invisible_time = min_invisible_time
        self.max_invisible_time = max_invisible_time

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.POP_MESSAGE: self.pop_message,
            RequestCode.ACK_MESSAGE: self.ack_message,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
            RequestCode.NOTIFICATION: self.notification,
            RequestCode.POLLING_INFO: self.polling_info,
            RequestCode.GET_POP_INFLIGHT_STATS: self.inflight_stats,
        }

    # -- checks -------------------------------------------------------------------------------------------

    def _service(self, req: RemotingCommand) -> PopService | RemotingCommand:
        if self.pop is None:
            return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                f"the broker[{self.broker_name}] is a slave: POP is served by its master")
        return self.pop

    def _check(self, req: RemotingCommand, topic: str, queue_id: int, group: str) -> RemotingCommand | TopicConfig:
        """RocketMQ's checks of a POP, NOTIFICATION or POLLING_INFO, in its order and with its remarks."""
        if not self.broker_permission() & PermName.PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_name}] pop message is forbidden")
        config = self.topics.get(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not config.perm & PermName.PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= config.read_queue_nums or queue_id < -1:
            return req.response(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                                                f"topicConfig.readQueueNums:[{config.read_queue_nums}]")
        sub_group = self.groups.find_or_create(group)
        if sub_group is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not "
                                                                           "exist")
        if not sub_group.consume_enable:
            return req.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return config

    def _filters(self, req: RemotingCommand, h: PopMessageRequestHeader
                 ) -> RemotingCommand | tuple[MessageFilter | None, RecordFilter | None]:
        """The tag-code and record filters of the pop's ``expType``/``exp`` (``pocketmq.broker.filter``)."""
        if not h.exp or (h.exp == SUB_ALL and is_tag_type(h.exp_type)):
            return None, None  # every message: no subscription to build for each pop
        if is_tag_type(h.exp_type):
            return build_subscription_data(h.topic, h.exp, 0).tags_code_filter(), None
        if h.exp_type != ExpressionType.SQL92:
            return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                f"parse the consumer's subscription failed: unknown expType {h.exp_type!r}")
        if not self.enable_property_filter():
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {h.exp_type}")
        try:
            compiled = self.filters.get(h.consumer_group, SubscriptionData(h.topic, h.exp,
                                                                           expression_type=ExpressionType.SQL92))
        except FilterError as exc:
            return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                f"parse the consumer's subscription failed: {exc.message}")
        return compiled.tags_filter, compiled.record_filter

    # -- POP_MESSAGE --------------------------------------------------------------------------------------

    def pop_message(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = PopMessageRequestHeader.from_command(req)
        service = self._service(req)
        if isinstance(service, RemotingCommand):
            return service
        now = now_ms()
        born = h.born_time or now
        if h.poll_time > 0 and now - born - h.poll_time > TIMEOUT_TOO_MUCH_MS:
            return req.response(ResponseCode.POLLING_TIMEOUT,
                                f"the broker[{self.broker_name}] pop message is timeout too much")
        refusal = self._check_pop(req, h)
        if refusal is not None:
            return refusal
        filters = self._filters(req, h)
        if isinstance(filters, RemotingCommand):
            return filters
        request = PopRequest(h.consumer_group, h.topic, h.queue_id, h.max_msg_nums, h.invisible_time, h.init_mode,
                             bool(h.order), h.attempt_id, *filters)
        outcome = service.pop(request)
        deadline = born + min(h.poll_time, MAX_POLL_MS)
        if isinstance(outcome, PopResult) and (outcome.found or h.poll_time <= 0 or now >= deadline):
            return self._pop_response(req, outcome)
        return self._pop_later(req, conn, service, request, outcome, deadline)

    def _check_pop(self, req: RemotingCommand, h: PopMessageRequestHeader) -> RemotingCommand | None:
        if not 0 < h.max_msg_nums <= POP_MAX_MSG_NUMS:
            return req.response(ResponseCode.INVALID_PARAMETER, f"the broker[{self.broker_name}] pop message's num "
                                                                f"{h.max_msg_nums} is not in [1, {POP_MAX_MSG_NUMS}]")
        if not self.min_invisible_time <= h.invisible_time <= self.max_invisible_time:
            return req.response(ResponseCode.INVALID_PARAMETER,
                                f"invisibleTime {h.invisible_time} is out of range [{self.min_invisible_time}, "
                                f"{self.max_invisible_time}] ms")
        checked = self._check(req, h.topic, h.queue_id, h.consumer_group)
        return checked if isinstance(checked, RemotingCommand) else None

    async def _pop_later(self, req: RemotingCommand, conn: Connection, service: PopService, request: PopRequest,
                         outcome: PopResult | Awaitable[PopResult], deadline: int) -> RemotingCommand:
        result = outcome if isinstance(outcome, PopResult) else await outcome
        while not result.found and result.failure is None:
            remaining = deadline - now_ms()
            if remaining <= 0:
                break
            if not self.hold.room_for(request.topic, request.group, request.queue_id):
                return self._pop_response(req, result, ResponseCode.POLLING_FULL)
            woken = self.hold.park(request.topic, request.group, request.queue_id, remaining / 1000,
                                   pop_retry_topic(request.topic, request.group), request.message_filter)
            conn.park(woken)  # a pop whose consumer left (or a stopping broker) is not held
            await woken
            outcome = service.pop(request)
            result = outcome if isinstance(outcome, PopResult) else await outcome
        return self._pop_response(req, result)

    @staticmethod
    def _pop_response(req: RemotingCommand, result: PopResult, empty_code: int = ResponseCode.POLLING_TIMEOUT
                      ) -> RemotingCommand:
        # PopMessageResponseHeader's extFields, written directly: one answer per pop (tests compare the two).
        fields = {"popTime": str(result.pop_time), "invisibleTime": str(result.invisible_time),
                  "reviveQid": str(result.revive_qid), "restNum": str(result.rest_num),
                  "startOffsetInfo": join_entries(result.start_infos),
                  "msgOffsetInfo": join_entries(result.msg_infos)}
        if result.order_infos:
            fields["orderCountInfo"] = join_entries(result.order_infos)
        if result.found:
            body = result.body()
            result.release()
            return req.response(ResponseCode.SUCCESS, "FOUND", fields, body)
        result.release()
        if result.failure is not None:
            code, remark = result.failure
            return req.response(code, remark, fields)
        return req.response(empty_code, "NO_MESSAGE_IN_QUEUE", fields)

    # -- ACK_MESSAGE, BATCH_ACK_MESSAGE -------------------------------------------------------------------

    def _check_message(self, req: RemotingCommand, topic: str, queue_id: int) -> RemotingCommand | None:
        config = self.topics.get(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not 0 <= queue_id < config.read_queue_nums:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                                              f"topicConfig.readQueueNums:[{config.read_queue_nums}]")
        return None

    @staticmethod
    def _handle(req: RemotingCommand, extra_info: str) -> ReceiptHandle | RemotingCommand:
        try:
            return ReceiptHandle.decode(extra_info)
        except PopFormatError as exc:
            return req.response(ResponseCode.INVALID_PARAMETER, f"malformed receipt handle: {exc}")

    def _message_request(self, req: RemotingCommand, h: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader
                         ) -> RemotingCommand | tuple[PopService, ReceiptHandle]:
        """The checks an ack and a change of invisible time share: the service, the handle, the topic and queue."""
        service = self._service(req)
        if isinstance(service, RemotingCommand):
            return service
        handle = self._handle(req, h.extra_info)
        if isinstance(handle, RemotingCommand):
            return handle
        refusal = self._check_message(req, h.topic, h.queue_id)
        return refusal if refusal is not None else (service, handle)

    def ack_message(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = AckMessageRequestHeader.from_command(req)
        checked = self._message_request(req, h)
        if isinstance(checked, RemotingCommand):
            return checked
        service, handle = checked
        try:
            outcome = service.ack(h.consumer_group, h.topic, h.queue_id, h.offset, handle)
        except PopError as exc:
            return req.response(exc.code, exc.remark)
        return req.response(ResponseCode.SUCCESS) if outcome is None else self._ack_later(req, outcome)

    @staticmethod
    async def _ack_later(req: RemotingCommand, outcome: Awaitable[None]) -> RemotingCommand:
        try:
            await outcome
        except PopError as exc:
            return req.response(exc.code, exc.remark)
        return req.response(ResponseCode.SUCCESS)

    def batch_ack_message(self, req: RemotingCommand,
                          conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        service = self._service(req)
        if isinstance(service, RemotingCommand):
            return service
        try:
            broker, acks = decode_batch_ack_body(bytes(req.body) if req.body else None)
        except PopFormatError as exc:
            return req.response(ResponseCode.INVALID_PARAMETER, f"malformed batch ack body: {exc}")
        entries: list[AckEntry] = []
        problems: list[str] = []
        for ack in acks:
            try:
                topic = real_topic(ack.topic, ack.consumer_group, ack.retry)
            except PopFormatError as exc:
                problems.append(str(exc))
                continue
            handle = ReceiptHandle(ack.start_offset, ack.pop_time, ack.invisible_time, ack.revive_queue_id,
                                   ack.retry, broker or self.broker_name, ack.queue_id)
            entries.append((ack.consumer_group, topic, ack.queue_id, handle, list(ack.offsets)))
        total = sum(len(ack.offsets) for ack in acks)
        if not total:
            return req.response(ResponseCode.NO_MESSAGE, "the batch ack names no message")
        unparsed = total - sum(len(entry[4]) for entry in entries)
        if not entries:
            return self._batch_ack_response(req, total, unparsed, problems)
        outcome = service.batch_ack(entries)
        if isinstance(outcome, list):
            return self._batch_ack_response(req, total, unparsed + len(outcome), problems + outcome)
        return self._batch_ack_later(req, total, unparsed, problems, outcome)

    async def _batch_ack_later(self, req: RemotingCommand, total: int, unparsed: int, problems: list[str],
                               outcome: Awaitable[list[str]]) -> RemotingCommand:
        refused = await outcome
        return self._batch_ack_response(req, total, unparsed + len(refused), problems + refused)

    @staticmethod
    def _batch_ack_response(req: RemotingCommand, total: int, refused: int, problems: list[str]) -> RemotingCommand:
        """SUCCESS when every offset named was acked, else NO_MESSAGE saying how many were and the first
        problem (the others were acked all the same)."""
        if not problems:
            return req.response(ResponseCode.SUCCESS)
        return req.response(ResponseCode.NO_MESSAGE, f"acked {max(total - refused, 0)} of {total}; {refused} "
                                                     f"refused, first: {problems[0]}")

    # -- CHANGE_MESSAGE_INVISIBLETIME ---------------------------------------------------------------------

    def change_invisible_time(self, req: RemotingCommand,
                              conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = ChangeInvisibleTimeRequestHeader.from_command(req)
        checked = self._message_request(req, h)
        if isinstance(checked, RemotingCommand):
            return checked
        return self._change_later(req, *checked, h)

    @staticmethod
    async def _change_later(req: RemotingCommand, service: PopService, handle: ReceiptHandle,
                            h: ChangeInvisibleTimeRequestHeader) -> RemotingCommand:
        try:
            pop_time, invisible = await service.change_invisible_time(h.consumer_group, h.topic, h.queue_id,
                                                                      h.offset, handle, h.invisible_time)
        except PopError as exc:
            return req.response(exc.code, exc.remark)
        fields = ChangeInvisibleTimeResponseHeader(pop_time, invisible, handle.revive_queue_id).to_fields()
        return req.response(ResponseCode.SUCCESS, None, fields)

    # -- NOTIFICATION, POLLING_INFO -----------------------------------------------------------------------

    def notification(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = NotificationRequestHeader.from_command(req)
        service = self._service(req)
        if isinstance(service, RemotingCommand):
            return service
        checked = self._check(req, h.topic, h.queue_id, h.consumer_group)
        if isinstance(checked, RemotingCommand):
            return checked
        now = now_ms()
        deadline = (h.born_time or now) + min(h.poll_time, MAX_POLL_MS)
        if service.has_message(h.consumer_group, h.topic, h.queue_id, bool(h.order), h.attempt_id):
            return req.response(ResponseCode.SUCCESS, None, NotificationResponseHeader(True).to_fields())
        if h.poll_time <= 0 or now >= deadline:
            return req.response(ResponseCode.SUCCESS, None, NotificationResponseHeader(False).to_fields())
        if not self.hold.room_for(h.topic, h.consumer_group, h.queue_id):
            return req.response(ResponseCode.SUCCESS, None, NotificationResponseHeader(False, True).to_fields())
        return self._notify_later(req, conn, service, h, deadline)

    async def _notify_later(self, req: RemotingCommand, conn: Connection, service: PopService,
                            h: NotificationRequestHeader, deadline: int) -> RemotingCommand:
        has = False
        while not has:
            remaining = deadline - now_ms()
            if remaining <= 0:
                break
            woken = self.hold.park(h.topic, h.consumer_group, h.queue_id, remaining / 1000,
                                   pop_retry_topic(h.topic, h.consumer_group), None)
            conn.park(woken)
            await woken
            has = service.has_message(h.consumer_group, h.topic, h.queue_id, bool(h.order), h.attempt_id)
        return req.response(ResponseCode.SUCCESS, None, NotificationResponseHeader(has).to_fields())

    def polling_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = PollingInfoRequestHeader.from_command(req)
        checked = self._check(req, h.topic, h.queue_id, h.consumer_group)
        if isinstance(checked, RemotingCommand):
            return checked
        num = self.hold.polling_num(h.topic, h.consumer_group, h.queue_id)
        return req.response(ResponseCode.SUCCESS, None, PollingInfoResponseHeader(num).to_fields())

    # -- GET_POP_INFLIGHT_STATS (PocketMQ's, for the console) ---------------------------------------------

    def inflight_stats(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """The group's messages in flight per queue (of ``topic`` and its POP retry topic when one is named):
        ``{"inflightTable": [{"topic", "queueId", "inflight"}], "total": n}``."""
        h = GetConsumeStatsRequestHeader.from_command(req)
        if self.pop is None:
            return req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"the broker[{self.broker_name}] is a slave: its master holds the POP state")
        topics = {h.topic, pop_retry_topic(h.topic, h.consumer_group)} if h.topic else None
        rows = [{"topic": topic, "queueId": queue_id, "inflight": len(state.owners)}
                for (topic, group, queue_id), state in sorted(self.pop.state.queues.items())
                if group == h.consumer_group and state.owners and (topics is None or topic in topics)]
        body = json.dumps({"inflightTable": rows, "total": sum(r["inflight"] for r in rows)},
                          separators=(",", ":")).encode()
        return req.response(ResponseCode.SUCCESS, None, None, body)
