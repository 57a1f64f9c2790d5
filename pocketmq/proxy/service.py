"""``apache.rocketmq.v2.MessagingService``: each call of the service, mapped onto the cluster as RocketMQ 5's proxy
maps it (``GrpcMessagingApplication`` and its activities; the mapping is in docs/design/grpc.md).

Every call answers with a ``Status`` in its response (``apache.rocketmq.v2.Code``), never with a gRPC error, as
the Java proxy does; a call this proxy does not serve answers NOT_IMPLEMENTED. The gRPC layer itself (a request
that is not a protobuf of the method's type, an unknown method) answers with gRPC's own status. Each call is
timed and counted by method and code (:class:`CallMetrics`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message as ProtoMessage
from grpc import aio

from pocketmq.client.core.message_ext import decode_messages
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.recall import RecallHandle
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.proxy import convert
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.auth import Authenticator, CallIdentity
from pocketmq.proxy.backend import Backend
from pocketmq.proxy.checks import MALFORMED, Malformed, aggregate, check_group, check_topic, parser, subscription_of
from pocketmq.proxy.clients import ClientRegistry, ClientState
from pocketmq.proxy.config import ProxyConfig
from pocketmq.proxy.consume import POP_MAX_NUMS, ConsumeCalls
from pocketmq.proxy.errors import OK_STATUS, Code, ProxyError, code_of_response, status
from pocketmq.proxy.metrics import CallMetrics
from pocketmq.proxy.renew import ReceiptHandles
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = get_logger("pocketmq.proxy.service")

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
_DEFAULT_RETRY_NEXT_MS = (1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                          420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)
"""A consumer's back-off between delivery attempts: RocketMQ's default ``CustomizedRetryPolicy`` (delay levels)."""

_OK = int(Code.OK)
"""``Code.OK`` read once: a protobuf enum's attribute is looked up in Python on every access (about 3 µs)."""

Req = TypeVar("Req", bound=ProtoMessage)
Resp = TypeVar("Resp", bound=ProtoMessage)


class MessagingService:
    """The calls (module docstring); :meth:`handler` is what the gRPC server serves."""

    def __init__(self, config: ProxyConfig, backend: Backend, clients: ClientRegistry, metrics: CallMetrics,
                 auth: Authenticator | None = None) -> None:
        self.config = config
        self.backend = backend
        self.clients = clients
        self.metrics = metrics
        self.auth = auth
        self.limits = config.limits()
        self.renew = ReceiptHandles(
            backend, invisible_ms=config.default_invisible_time_mills, ahead_ms=config.renew_ahead_time_millis,
            max_ms=config.renew_max_time_millis, clear_ms=config.invisible_time_millis_when_clear,
            period_s=config.renew_schedule_period_millis / 1000, limit=config.max_renewed_handles,
        ) if config.enable_proxy_auto_renew else None
        if self.renew is not None:
            clients.on_gone = self.renew.release
            clients.service.add_child(self.renew.service)
        self.consume = ConsumeCalls(config, backend, clients, self.renew)
        backend.on_request(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)

    # -- the handler table ---------------------------------------------------------------------------------

    def handler(self) -> grpc.GenericRpcHandler:
        unary: dict[str, tuple[Callable[..., Awaitable[Any]], type[ProtoMessage], type[ProtoMessage]]] = {
            "QueryRoute": (self.query_route, spb.QueryRouteRequest, spb.QueryRouteResponse),
            "Heartbeat": (self.heartbeat, spb.HeartbeatRequest, spb.HeartbeatResponse),
            "SendMessage": (self.send_message, spb.SendMessageRequest, spb.SendMessageResponse),
            "QueryAssignment": (self.query_assignment, spb.QueryAssignmentRequest, spb.QueryAssignmentResponse),
            "AckMessage": (self.consume.ack_message, spb.AckMessageRequest, spb.AckMessageResponse),
            "ForwardMessageToDeadLetterQueue": (self.consume.forward_to_dlq, spb.ForwardMessageToDeadLetterQueueRequest,
                                                spb.ForwardMessageToDeadLetterQueueResponse),
            "EndTransaction": (self.end_transaction, spb.EndTransactionRequest, spb.EndTransactionResponse),
            "NotifyClientTermination": (self.notify_client_termination, spb.NotifyClientTerminationRequest,
                                        spb.NotifyClientTerminationResponse),
            "ChangeInvisibleDuration": (self.consume.change_invisible_duration, spb.ChangeInvisibleDurationRequest,
                                        spb.ChangeInvisibleDurationResponse),
            "UpdateOffset": (self._not_implemented, spb.UpdateOffsetRequest, spb.UpdateOffsetResponse),
            "GetOffset": (self._not_implemented, spb.GetOffsetRequest, spb.GetOffsetResponse),
            "QueryOffset": (self._not_implemented, spb.QueryOffsetRequest, spb.QueryOffsetResponse),
            "RecallMessage": (self.recall_message, spb.RecallMessageRequest, spb.RecallMessageResponse),
            "SyncLiteSubscription": (self._not_implemented, spb.SyncLiteSubscriptionRequest,
                                     spb.SyncLiteSubscriptionResponse),
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for name, (fn, req, resp) in unary.items():
            handlers[name] = grpc.unary_unary_rpc_method_handler(
                self._unary(name, fn, resp), request_deserializer=parser(req),
                response_serializer=resp.SerializeToString)
        handlers["ReceiveMessage"] = grpc.unary_stream_rpc_method_handler(
            self._streaming("ReceiveMessage", self.consume.receive_message, spb.ReceiveMessageResponse),
            request_deserializer=parser(spb.ReceiveMessageRequest),
            response_serializer=spb.ReceiveMessageResponse.SerializeToString)
        handlers["PullMessage"] = grpc.unary_stream_rpc_method_handler(
            self._streaming("PullMessage", self._pull_not_implemented, spb.PullMessageResponse),
            request_deserializer=parser(spb.PullMessageRequest),
            response_serializer=spb.PullMessageResponse.SerializeToString)
        handlers["Telemetry"] = grpc.stream_stream_rpc_method_handler(
            self.telemetry, request_deserializer=parser(spb.TelemetryCommand),
            response_serializer=spb.TelemetryCommand.SerializeToString)
        return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)

    def _identity(self, method: str, request: ProtoMessage, context: aio.ServicerContext[Any, Any]) -> CallIdentity:
        identity = CallIdentity.of(context)
        if self.auth is not None:
            self.auth.check(method, request, identity)
        return identity

    def _unary(self, method: str, fn: Callable[[Any, CallIdentity, aio.ServicerContext[Any, Any]], Awaitable[Any]],
               response: type[ProtoMessage]) -> Callable[[Any, aio.ServicerContext[Any, Any]], Awaitable[Any]]:
        timer = self.metrics.timer(method)

        async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            started = time.perf_counter()
            if isinstance(request, Malformed):
                timer(Code.BAD_REQUEST, time.perf_counter() - started)
                await context.abort(grpc.StatusCode.INTERNAL, MALFORMED)
            try:
                result = await fn(request, self._identity(method, request, context), context)
            except ProxyError as exc:
                result = response(status=exc.status())
            except Exception as exc:
                log.exception("call_failed", method=method)
                result = response(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))
            timer(result.status.code, time.perf_counter() - started)
            return result

        return call

    def _streaming(self, method: str,
                   fn: Callable[[Any, CallIdentity, aio.ServicerContext[Any, Any]], AsyncIterator[Any]],
                   response: type[ProtoMessage]) -> Callable[[Any, aio.ServicerContext[Any, Any]], AsyncIterator[Any]]:
        timer = self.metrics.timer(method)

        async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            started = time.perf_counter()
            if isinstance(request, Malformed):
                timer(Code.BAD_REQUEST, time.perf_counter() - started)
                await context.abort(grpc.StatusCode.INTERNAL, MALFORMED)
            code: int = Code.OK
            try:
                async for item in fn(request, self._identity(method, request, context), context):
                    if item.HasField("status"):
                        code = item.status.code
                    yield item
            except ProxyError as exc:
                code = exc.code
                yield response(status=exc.status())
            except Exception as exc:
                log.exception("call_failed", method=method)
                code = Code.INTERNAL_SERVER_ERROR
                yield response(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))
            timer(code, time.perf_counter() - started)

        return call

    async def _not_implemented(self, request: Any, identity: CallIdentity,
                               context: aio.ServicerContext[Any, Any]) -> Any:
        raise ProxyError(Code.NOT_IMPLEMENTED, f"{type(request).__name__[:-len('Request')]} is not implemented "
                                               "by the PocketMQ proxy")

    async def _pull_not_implemented(self, request: Any, identity: CallIdentity,
                                    context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        raise ProxyError(Code.NOT_IMPLEMENTED, "PullMessage is not implemented by the PocketMQ proxy")
        yield  # an async generator, like every streaming call

    def _client(self, identity: CallIdentity) -> ClientState:
        return self.clients.touch(identity.client_id, identity.language, identity.version, identity.remote)

    # -- routes ------------------------------------------------------------------------------------------

    def _endpoints(self, requested: pb.Endpoints) -> pb.Endpoints:
        """Where clients reach this proxy: ``proxyAdvertisedAddr``, else the address they used."""
        advertised = self.config.proxy_advertised_addr
        if advertised:
            host, _, port = advertised.rpartition(":")
            return pb.Endpoints(scheme=pb.IPv4 if host.replace(".", "").isdigit() else pb.DOMAIN_NAME,
                                addresses=[pb.Address(host=host, port=int(port))])
        if not requested.addresses:
            raise ProxyError(Code.ILLEGAL_ACCESS_POINT, "the request names no endpoints")
        return requested

    async def query_route(self, request: spb.QueryRouteRequest, identity: CallIdentity,
                          context: aio.ServicerContext[Any, Any]) -> spb.QueryRouteResponse:
        topic = request.topic.name
        check_topic(topic)
        route = await self.backend.route(topic)
        accepted = convert.accepted_types(await self.backend.topic_attributes(topic))
        endpoints = self._endpoints(request.endpoints)
        masters = {b.broker_name for b in route.broker_datas if 0 in b.broker_addrs}
        queues = []
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if data.broker_name not in masters:
                continue
            broker = pb.Broker(name=data.broker_name, id=0, endpoints=endpoints)
            for queue_id, permission in _queue_permissions(data.perm, data.read_queue_nums, data.write_queue_nums):
                queues.append(pb.MessageQueue(topic=request.topic, id=queue_id, permission=permission,  # type: ignore[arg-type]
                                              broker=broker, accept_message_types=accepted))  # type: ignore[arg-type]
        return spb.QueryRouteResponse(status=OK_STATUS, message_queues=queues)

    async def query_assignment(self, request: spb.QueryAssignmentRequest, identity: CallIdentity,
                               context: aio.ServicerContext[Any, Any]) -> spb.QueryAssignmentResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        route = await self.backend.route(topic)
        settings = await self.backend.group_settings(group, self.config.default_max_delivery_attempts)
        endpoints = self._endpoints(request.endpoints)
        assignments = []
        masters = {b.broker_name for b in route.broker_datas if 0 in b.broker_addrs}
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if data.broker_name not in masters or not data.perm & 4 or data.read_queue_nums <= 0:
                continue
            permission = _permission(data.perm)
            broker = pb.Broker(name=data.broker_name, id=0, endpoints=endpoints)
            ids = range(data.read_queue_nums) if settings.fifo else (-1,)
            for queue_id in ids:
                queue = pb.MessageQueue(topic=request.topic, id=queue_id, permission=permission,  # type: ignore[arg-type]
                                        broker=broker)
                assignments.append(pb.Assignment(message_queue=queue))
        if not assignments:
            return spb.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return spb.QueryAssignmentResponse(status=OK_STATUS, assignments=assignments)

    # -- clients -----------------------------------------------------------------------------------------

    async def heartbeat(self, request: spb.HeartbeatRequest, identity: CallIdentity,
                        context: aio.ServicerContext[Any, Any]) -> spb.HeartbeatResponse:
        client = self._client(identity)
        kind = client.settings.client_type if client.settings is not None else request.client_type
        if kind in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            check_group(request.group.name)
            self.clients.note_consumer(client, kind, request.group.name)
        elif kind != pb.PRODUCER:
            return spb.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                       pb.ClientType.Name(kind)))
        return spb.HeartbeatResponse(status=OK_STATUS)

    async def notify_client_termination(self, request: spb.NotifyClientTerminationRequest, identity: CallIdentity,
                                        context: aio.ServicerContext[Any, Any]) -> spb.NotifyClientTerminationResponse:
        removed = await self.clients.remove(identity.client_id)
        if removed is None:
            return spb.NotifyClientTerminationResponse(
                status=status(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
        return spb.NotifyClientTerminationResponse(status=OK_STATUS)

    async def telemetry(self, requests: AsyncIterator[spb.TelemetryCommand],
                        context: aio.ServicerContext[Any, Any]) -> AsyncIterator[spb.TelemetryCommand]:
        """The client's settings in, the merged settings (and check-backs) out, until either side ends."""
        timer = self.metrics.timer("Telemetry")
        started = time.perf_counter()
        identity = CallIdentity.of(context)
        try:
            if self.auth is not None:
                self.auth.check("Telemetry", None, identity)
            client = self._client(identity)
        except ProxyError as exc:
            timer(exc.code, time.perf_counter() - started)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED if exc.code == Code.UNAUTHORIZED
                                else grpc.StatusCode.INVALID_ARGUMENT, exc.message)
            return
        outbox = self.clients.open_stream(client)
        reader = asyncio.get_running_loop().create_task(self._read_telemetry(requests, client, outbox))
        code: int = Code.OK
        try:
            while True:
                getter = asyncio.ensure_future(outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                command = getter.result()
                if command.ByteSize() == 0:
                    break
                yield command
            failure = reader.exception() if reader.done() and not reader.cancelled() else None
            if isinstance(failure, ProxyError):
                code = failure.code
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"process client telemetryCommand failed. {failure.message}")
        finally:
            reader.cancel()
            self.clients.close_stream(client, outbox)
            timer(code, time.perf_counter() - started)

    async def _read_telemetry(self, requests: AsyncIterator[spb.TelemetryCommand], client: ClientState,
                              outbox: asyncio.Queue[spb.TelemetryCommand]) -> None:
        async for command in requests:
            client.last_seen = time.monotonic()
            if isinstance(command, Malformed):
                raise ProxyError(Code.BAD_REQUEST, MALFORMED)
            if command.HasField("settings"):
                await outbox.put(await self._settings(client, command.settings))

    async def _settings(self, client: ClientState, settings: pb.Settings) -> spb.TelemetryCommand:
        """``ClientActivity.processAndWriteClientSettings``: register the client, answer the merged settings."""
        subscriptions: list[SubscriptionData] = []
        merged = pb.Settings()
        merged.CopyFrom(settings)
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                check_topic(topic.name)
            backoff = merged.backoff_policy
            backoff.max_attempts = self.config.grpc_client_producer_max_attempts
            backoff.exponential_backoff.initial.FromMilliseconds(self.config.grpc_client_producer_backoff_initial_millis)
            backoff.exponential_backoff.max.FromMilliseconds(self.config.grpc_client_producer_backoff_max_millis)
            backoff.exponential_backoff.multiplier = self.config.grpc_client_producer_backoff_multiplier
            merged.publishing.validate_message_type = self.config.enable_topic_message_type_check
            merged.publishing.max_body_size = self.config.max_message_size
        elif settings.HasField("subscription"):
            group = settings.subscription.group.name
            check_group(group)
            for entry in settings.subscription.subscriptions:
                subscriptions.append(subscription_of(entry.topic.name, entry.expression))
            group_settings = await self.backend.group_settings(group, self.config.default_max_delivery_attempts)
            sub = merged.subscription
            sub.receive_batch_size = POP_MAX_NUMS
            sub.long_polling_timeout.FromMilliseconds(self.config.grpc_client_consumer_max_long_polling_timeout_millis)
            sub.fifo = group_settings.fifo
            merged.backoff_policy.max_attempts = group_settings.max_delivery_attempts
            del merged.backoff_policy.customized_backoff.next[:]
            for delay in _DEFAULT_RETRY_NEXT_MS:
                merged.backoff_policy.customized_backoff.next.add().FromMilliseconds(delay)
        else:
            raise ProxyError(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        merged.metric.on = False
        self.clients.update_settings(client, merged, subscriptions)
        return spb.TelemetryCommand(status=OK_STATUS, settings=merged)

    # -- send --------------------------------------------------------------------------------------------

    async def send_message(self, request: spb.SendMessageRequest, identity: CallIdentity,
                           context: aio.ServicerContext[Any, Any]) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        check_topic(topic.name)
        for message in request.messages:
            if message.topic != topic:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
        outs = [convert.outgoing(m, limits=self.limits, remote_host=lambda: identity.remote)
                for m in request.messages]
        if self.config.enable_topic_message_type_check:
            attributes = await self.backend.topic_attributes(topic.name)
            for out in outs:
                convert.check_message_type(attributes, out.properties)
        if len(outs) == 1:  # what every 5.x client sends: the call's status is the entry's code
            entry = await self._send_one(outs[0], identity)
            code = entry.status.code
            return spb.SendMessageResponse(status=OK_STATUS if code == _OK else status(code), entries=(entry,))
        entries = []
        codes: set[int] = set()
        for out in outs:
            entry = await self._send_one(out, identity)
            entries.append(entry)
            codes.add(entry.status.code)
        return spb.SendMessageResponse(status=aggregate(codes), entries=entries)

    async def _send_one(self, out: convert.Outgoing, identity: CallIdentity) -> spb.SendResultEntry:
        try:
            outcome = await self.backend.send(out)
        except ProxyError as exc:
            return spb.SendResultEntry(status=exc.status())
        if outcome.code != ResponseCode.SUCCESS:
            code = code_of_response(outcome.code)
            return spb.SendResultEntry(status=status(code, f"send message failed, sendStatus={outcome.code}"))
        transaction_id = ""
        if out.sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            transaction_id = convert.encode_transaction_id(outcome.queue.broker_name, outcome.commit_log_offset,
                                                           outcome.queue_offset, out.uniq_key)
            if identity.client_id:
                self.clients.note_producer(self._client(identity), out.topic)
        return spb.SendResultEntry(status=OK_STATUS, message_id=out.uniq_key, transaction_id=transaction_id,
                                   offset=outcome.queue_offset, recall_handle=outcome.recall_handle)

    async def recall_message(self, request: spb.RecallMessageRequest, identity: CallIdentity,
                             context: aio.ServicerContext[Any, Any]) -> spb.RecallMessageResponse:
        """A timer message recalled by the handle its send answered (the broker named in it checks the rest)."""
        topic = request.topic.name
        check_topic(topic)
        try:
            handle = RecallHandle.decode(request.recall_handle)
        except ValueError as exc:
            raise ProxyError(Code.BAD_REQUEST, str(exc)) from None
        message_id = await self.backend.recall(topic, request.recall_handle, handle.broker_name)
        return spb.RecallMessageResponse(status=OK_STATUS, message_id=message_id)

    # -- transactions ------------------------------------------------------------------------------------

    async def end_transaction(self, request: spb.EndTransactionRequest, identity: CallIdentity,
                              context: aio.ServicerContext[Any, Any]) -> spb.EndTransactionResponse:
        topic = request.topic.name
        check_topic(topic)
        if not request.transaction_id.strip():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        ref = convert.decode_transaction_id(request.transaction_id)
        resolution = {pb.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                      pb.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}.get(
            request.resolution, MessageSysFlag.TRANSACTION_NOT_TYPE)
        header = EndTransactionRequestHeader(
            producer_group=topic, tran_state_table_offset=ref.queue_offset, commit_log_offset=ref.commit_log_offset,
            commit_or_rollback=resolution, msg_id=request.message_id or ref.uniq_key,
            from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK, transaction_id=ref.uniq_key)
        await self.backend.end_transaction(header, ref.broker_name)
        return spb.EndTransactionResponse(status=OK_STATUS)

    def _on_check_transaction_state(self, request: RemotingCommand, conn: Connection) -> None:
        """CHECK_TRANSACTION_STATE from a broker: handed to a producer of the half's topic over Telemetry as
        RecoverOrphanedTransactionCommand (the producer answers with EndTransaction, source SERVER_CHECK)."""
        try:
            header = CheckTransactionStateRequestHeader.from_command(request)
            messages = decode_messages(request.body or b"")
        except Exception as exc:
            log.warning("transaction_check_malformed", peer=conn.remote_addr, error=str(exc))
            return
        if not messages:
            return
        msg = messages[0]
        topic = msg.get_property(MessageConst.PROPERTY_PRODUCER_GROUP) or msg.topic
        broker_name = self._broker_name_of(conn.remote_addr)
        if broker_name is None:
            log.warning("transaction_check_unknown_broker", peer=conn.remote_addr)
            return
        uniq = msg.uniq_key or header.msg_id or ""
        transaction_id = convert.encode_transaction_id(broker_name, header.commit_log_offset,
                                                       header.tran_state_table_offset, uniq)
        command = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=convert.incoming(msg, topic=msg.topic), transaction_id=transaction_id))
        if not self.clients.push_to_producer(topic, command):
            log.info("transaction_check_no_producer", topic=topic, broker=broker_name)

    def _broker_name_of(self, addr: str) -> str | None:
        for name, master in self.backend.instance.routes.master_table.items():
            if master == addr:
                return name
        return None

    async def stop(self) -> None:
        await self.consume.stop()


def _permission(perm: int) -> int:
    readable, writable = bool(perm & 4), bool(perm & 2)
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


def _queue_permissions(perm: int, read: int, write: int) -> list[tuple[int, int]]:
    """``RouteActivity.genMessageQueueFromQueueData``: read-only, write-only, then read-write queue ids."""
    readable, writable = bool(perm & 4), bool(perm & 2)
    r = w = rw = n = 0
    if readable and writable:
        rw = min(read, write)
        r, w = read - rw, write - rw
    elif writable:
        w = write
    elif readable:
        r = read
    else:
        n = max(1, read, write)
    kinds = [pb.READ] * r + [pb.WRITE] * w + [pb.READ_WRITE] * rw + [pb.NONE] * n
    return list(enumerate(kinds))
