"""Shared pieces of the SDK-level transaction tests: a recording listener and a cluster with short check-back
timings."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.core.message import Message
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.transaction import TransactionState

#: Check-back after 300 ms without an outcome, scanned every 200 ms, at most 3 times.
TX_PROPS = {"transactionTimeOut": "300", "transactionCheckInterval": "200", "transactionCheckMax": "3"}


@dataclass
class Ledger:
    """A listener: ``execute_local_transaction`` returns its ``arg`` (or raises it when it is an exception);
    ``check_local_transaction`` answers ``answer(msg)`` (default: what was recorded for the message's key)."""

    answer: Callable[[MessageExt], TransactionState] | None = None
    executed: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    decided: dict[str, TransactionState] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        with self.lock:
            self.executed.append(bytes(msg.body).decode())
        if isinstance(arg, BaseException):
            raise arg
        assert isinstance(arg, TransactionState)
        return arg

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        with self.lock:
            self.checked.append(msg.body.decode())
        if self.answer is not None:
            return self.answer(msg)
        return self.decided.get(msg.body.decode(), TransactionState.UNKNOWN)
