"""A broker process for the crash tests: ``broker.main`` that kills itself with SIGKILL at one step of a
transaction, named by the environment variable ``TX_CRASH_AT``:

* ``before_op`` — END_TRANSACTION commit: after the committed message is appended, before its op record;
* ``after_check_copy`` — a check-back: after the half message's copy is appended, before CHECK_TRANSACTION_STATE
  is sent.

Without the variable it is the plain broker (the restart after the crash runs ``broker.main`` itself).
"""

from __future__ import annotations

import os
import signal
import sys

from pocketmq.broker.main import main
from pocketmq.broker.transaction.check import TransactionalMessageCheckService
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common.record import MessageRecord
from pocketmq.store.results import PutMessageStatus


def _die() -> None:
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _die_before_op(self: TransactionalMessageService, targets: list[int]) -> PutMessageStatus:
    _die()
    return PutMessageStatus.UNKNOWN_ERROR


def _die_before_check(self: TransactionalMessageCheckService, record: MessageRecord) -> None:
    _die()


def install(point: str) -> None:
    if point == "before_op":
        TransactionalMessageService.put_ops = _die_before_op  # type: ignore[method-assign]
    elif point == "after_check_copy":
        TransactionalMessageCheckService._send_check = _die_before_check  # type: ignore[method-assign]
    elif point:
        raise SystemExit(f"unknown TX_CRASH_AT {point!r}")


if __name__ == "__main__":
    install(os.environ.get("TX_CRASH_AT", ""))
    sys.exit(main())
