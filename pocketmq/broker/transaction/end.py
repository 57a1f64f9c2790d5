"""``EndTransactionProcessor``: END_TRANSACTION (37), the producer's commit or rollback of a half message
(RocketMQ's ``EndTransactionProcessor``).

Slaves answer SLAVE_NOT_AVAILABLE. An unknown state (type 0) is not answered, as RocketMQ does (clients send
END_TRANSACTION oneway anyway). A header that does not match the half message it names (no half message at
``commitLogOffset``, another ``producerGroup``, another ``tranStateTableOffset``) or a half already resolved gets
SYSTEM_ERROR with a remark saying which, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pocketmq.broker.transaction.service import EndOutcome, TransactionalMessageService
from pocketmq.common.logs import get_logger
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import EndTransactionRequestHeader

log = get_logger("pocketmq.broker.transaction.end")


class EndTransactionProcessor:
    """Serves END_TRANSACTION for one broker (``service`` None on a slave)."""

    def __init__(self, service: TransactionalMessageService | None, *, broker_name: str,
                 broker_addr: Callable[[], str]) -> None:
        self.service = service
        self.broker_name = broker_name
        self.broker_addr = broker_addr

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, req: RemotingCommand,
                        conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        header = EndTransactionRequestHeader.from_command(req)
        if self.service is None:
            return req.response(ResponseCode.SLAVE_NOT_AVAILABLE,
                                f"the broker[{self.broker_name}, {self.broker_addr()}] is a slave: "
                                "END_TRANSACTION is forbidden")
        if header.from_transaction_check:
            log.info("transaction_check_answered", peer=conn.remote_addr, group=header.producer_group,
                     state=header.commit_or_rollback, half_offset=header.tran_state_table_offset,
                     remark=req.remark)
        outcome = self.service.end(header)
        if isinstance(outcome, EndOutcome):
            return _answer(req, outcome)
        return self._answer_later(req, outcome)

    @staticmethod
    async def _answer_later(req: RemotingCommand, outcome: Awaitable[EndOutcome]) -> RemotingCommand | None:
        return _answer(req, await outcome)


def _answer(req: RemotingCommand, outcome: EndOutcome) -> RemotingCommand | None:
    return None if outcome.code is None else req.response(outcome.code, outcome.remark)
