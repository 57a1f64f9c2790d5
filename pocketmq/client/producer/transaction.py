"""``TransactionProducer``: transactional messages from the SDK (RocketMQ's ``TransactionMQProducer``).

Usage::

    class Orders(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            db.insert_order(arg)                       # the local transaction
            return TransactionState.COMMIT
        def check_local_transaction(self, msg):
            return TransactionState.COMMIT if db.has_order(msg.keys) else TransactionState.ROLLBACK

    async with TransactionProducer("order-tx", Orders(), namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send_message_in_transaction(Message("Orders", b"..."), arg=order)

``send_message_in_transaction`` sends a *half message* (``TRAN_MSG=true``, ``PGROUP`` and sys flag 4: invisible to
consumers), runs ``execute_local_transaction`` when it was stored (SEND_OK; otherwise the state is ROLLBACK), and
ends the transaction with a oneway END_TRANSACTION (37) to the broker that stored it: COMMIT makes the message
visible, ROLLBACK drops it, UNKNOWN leaves it to the broker's check-back. An exception from the listener counts as
UNKNOWN (its text travels in the request's remark). Either listener method may be a coroutine function.

The broker checks an unresolved half message back with CHECK_TRANSACTION_STATE (39) on a connection of a producer
of its group; the client instance hands it to this producer, which calls ``check_local_transaction`` and answers
with a oneway END_TRANSACTION, ``fromTransactionCheck=true``, on the same connection, exactly as the Java client
does. At most :data:`MAX_PENDING_CHECKS` checks wait or run at once (RocketMQ's check executor queue); more are
dropped with a warning (the broker asks again in its next round).

Batches and delayed messages cannot be transactional: ``send_batch`` raises, and so does a message with a delay
level (RocketMQ 4.9 silently drops the level; refusing says so).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, Unpack

from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.member import State
from pocketmq.client.core.message import Message, SendResult, SendStatus
from pocketmq.client.core.message_ext import MessageExt, decode_messages
from pocketmq.client.producer.config import ProducerArgs
from pocketmq.client.producer.producer import Producer
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.record import decode_message_id
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

__all__ = ["MAX_PENDING_CHECKS", "TransactionListener", "TransactionProducer", "TransactionSendResult",
           "TransactionState"]

log = get_logger("pocketmq.client.producer.transaction")

MAX_PENDING_CHECKS = 2000
"""Check-backs waiting or running at once in one producer (RocketMQ's ``checkRequestHolder`` queue)."""
END_TRANSACTION_TIMEOUT = 3.0
"""Seconds to connect to the broker for END_TRANSACTION after a send."""


class TransactionState(enum.Enum):
    """A local transaction's outcome (RocketMQ's ``LocalTransactionState``); the value is END_TRANSACTION's
    ``commitOrRollback``."""

    COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
    ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    UNKNOWN = MessageSysFlag.TRANSACTION_NOT_TYPE


class TransactionListener(Protocol):
    """The application's side of a transaction; either method may be ``async``."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState | Awaitable[TransactionState]:
        """Run the local transaction of a half message just stored."""
        ...

    def check_local_transaction(self, msg: MessageExt) -> TransactionState | Awaitable[TransactionState]:
        """The broker asks what became of the local transaction of ``msg`` (a half message with no outcome)."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The half message's send result and the local transaction's state (sent to the broker)."""

    send_result: SendResult
    local_state: TransactionState

    @property
    def transaction_id(self) -> str | None:
        return self.send_result.transaction_id or self.send_result.msg_id


async def _call_listener(fn: Any, *args: Any, what: str) -> tuple[TransactionState, str | None]:
    """The state a listener method returns, UNKNOWN (with the exception's text, after ``what``: the Java
    client's remark) when it raises or returns something else."""
    try:
        state = fn(*args)
        if inspect.isawaitable(state):
            state = await state
    except Exception as exc:
        log.warning("local_transaction_failed", error=repr(exc))
        return TransactionState.UNKNOWN, f"{what}: {exc!r}"
    if not isinstance(state, TransactionState):
        log.warning("local_transaction_bad_state", state=repr(state))
        return TransactionState.UNKNOWN, f"the listener returned {state!r}, not a TransactionState"
    return state, None


class TransactionProducer(Producer):
    """A producer of transactional messages; see the module docstring."""

    def __init__(self, group: str, listener: TransactionListener, **options: Unpack[ProducerArgs]) -> None:
        super().__init__(group, **options)
        self.listener = listener
        self._checks: set[asyncio.Task[None]] = set()

    # -- sending ---------------------------------------------------------------------------------------

    async def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                          timeout: float | None = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction (module docstring).
        Send failures raise as :meth:`Producer.send` does (no local transaction runs then)."""
        if not isinstance(msg, Message):
            raise InvalidMessageError(f"expected a Message, got {type(msg).__name__}")
        level = msg.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if level and level != "0":
            raise InvalidMessageError("a transactional message cannot be delayed")
        if self._state is not State.RUNNING:
            self._raise_not_running()
        msg.properties[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PROPERTY_PRODUCER_GROUP] = self.group
        out = self._preparer.prepare(msg)
        out.sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        out.batchable = False
        result = await self._send_sync(out, timeout, None, None, None)
        remark = None
        if result.status is SendStatus.SEND_OK:
            state, remark = await _call_listener(self.listener.execute_local_transaction, msg, arg,
                                                 what="executeLocalTransactionBranch exception")
        else:
            state = TransactionState.ROLLBACK
        await self._end_transaction(result, state, remark)
        return TransactionSendResult(result, state)

    async def send_batch(self, messages: Iterable[Message], *, timeout: float | None = None) -> SendResult:
        raise InvalidMessageError("a transactional producer does not send batches")

    async def _end_transaction(self, result: SendResult, state: TransactionState, remark: str | None) -> None:
        """END_TRANSACTION (oneway) to the master that stored the half message; a failure is logged (the broker
        checks the transaction back)."""
        addr = self.instance.routes.master_table.get(result.message_queue.broker_name)
        _, _, commit_log_offset = decode_message_id(result.offset_msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=state.value, msg_id=result.msg_id,
            from_transaction_check=False, transaction_id=result.transaction_id or result.msg_id)
        try:
            if addr is None:
                raise PocketMQError(f"no master address for {result.message_queue.broker_name}")
            conn = await self.instance.connect(addr, END_TRANSACTION_TIMEOUT)
            await conn.oneway(_end_request(header, remark, self.config.client.serialize_type))
        except (PocketMQError, OSError) as exc:
            self._log.warning("end_transaction_failed", broker=result.message_queue.broker_name,
                              msg_id=result.msg_id, state=state.name, error=str(exc))

    # -- check-backs -----------------------------------------------------------------------------------

    def check_transaction_state(self, request: RemotingCommand, conn: Connection) -> None:
        """CHECK_TRANSACTION_STATE (39) from a broker, handed over by the client instance: answered in a task."""
        if len(self._checks) >= MAX_PENDING_CHECKS:
            self._log.warning("transaction_check_dropped", pending=len(self._checks), peer=conn.remote_addr)
            return
        task = asyncio.get_running_loop().create_task(self._answer_check(request, conn))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, request: RemotingCommand, conn: Connection) -> None:
        try:
            header = CheckTransactionStateRequestHeader.from_command(request)
            messages = decode_messages(request.body or b"")
        except PocketMQError as exc:
            self._log.warning("transaction_check_malformed", peer=conn.remote_addr, error=str(exc))
            return
        if not messages:
            return
        msg = messages[0]
        state, remark = await _call_listener(self.listener.check_local_transaction, msg,
                                            what="checkLocalTransactionState Exception")
        end = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=state.value,
            msg_id=msg.uniq_key or msg.offset_msg_id, from_transaction_check=True,
            transaction_id=header.transaction_id)
        try:
            await conn.oneway(_end_request(end, remark, self.config.client.serialize_type))
        except (PocketMQError, OSError) as exc:
            self._log.warning("transaction_check_answer_failed", peer=conn.remote_addr, error=str(exc))

    async def shutdown(self, grace: float | None = None) -> None:
        for task in list(self._checks):
            task.cancel()
        if self._checks:
            await asyncio.wait(set(self._checks), timeout=1.0)
        await super().shutdown(grace)


def _end_request(header: EndTransactionRequestHeader, remark: str | None, serialize_type: int) -> RemotingCommand:
    """A oneway END_TRANSACTION in the client's header encoding (JSON as Java's, or the SDK's msgpack)."""
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_fields(), oneway=True,
                                      serialize_type=serialize_type)
    request.remark = remark
    return request
