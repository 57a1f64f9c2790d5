"""PocketMQ: a lightweight RocketMQ-compatible message broker cluster, and its asyncio SDK.

The SDK's public names import from the top::

    from pocketmq import Message, Producer, PushConsumer, ConsumeResult

They are loaded on first use, so ``import pocketmq.store`` (a broker, the Spark reader) does not load the SDK.
The components live under their own names: :mod:`pocketmq.common` (the shared model), :mod:`pocketmq.remoting`
(the 4.x wire), :mod:`pocketmq.store`, :mod:`pocketmq.namesrv`, :mod:`pocketmq.ha`, :mod:`pocketmq.client`
(the SDK, with blocking facades in :mod:`pocketmq.client.blocking`), :mod:`pocketmq.broker`,
:mod:`pocketmq.spark_jobs`, :mod:`pocketmq.admin`, and the tools :mod:`pocketmq.bench` and :mod:`pocketmq.chaos`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pocketmq.common.compiled  # noqa: F401  (first: it picks compiled or source modules)

if TYPE_CHECKING:
    from pocketmq.client import (
        BatchMessageHandler,
        BrokerNotFoundError,
        ConsumeFromWhere,
        ConsumeResult,
        ConsumerStateError,
        InvalidMessageError,
        LitePullConsumer,
        Message,
        MessageBatch,
        MessageExt,
        MessageHandler,
        MessageModel,
        MessageQueue,
        MessageQueueSelector,
        MessageSelector,
        MQBrokerError,
        MQClientError,
        NoNameServerError,
        NoRouteError,
        Producer,
        ProducerStateError,
        PullConsumer,
        PullResult,
        PullStatus,
        PushConsumer,
        RemotingError,
        ReplyMessageError,
        RequestExpiredError,
        RequestTableFullError,
        RequestTimeoutError,
        ResponseError,
        SendAttemptHook,
        SendCallback,
        SendFailedError,
        SendResult,
        SendStatus,
        SessionCredentials,
        SimpleConsumer,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
        TransactionState,
        create_reply_message,
    )

__all__ = [
    "BatchMessageHandler",
    "BrokerNotFoundError",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumerStateError",
    "InvalidMessageError",
    "LitePullConsumer",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageBatch",
    "MessageExt",
    "MessageHandler",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "NoNameServerError",
    "NoRouteError",
    "Producer",
    "ProducerStateError",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RemotingError",
    "ReplyMessageError",
    "RequestExpiredError",
    "RequestTableFullError",
    "RequestTimeoutError",
    "ResponseError",
    "SendAttemptHook",
    "SendCallback",
    "SendFailedError",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "SimpleConsumer",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "create_reply_message",
]


def __getattr__(name: str) -> Any:
    """The SDK's names, imported from :mod:`pocketmq.client` when first asked for; ``__version__`` too (reading the
    installed metadata costs every process tens of milliseconds at start)."""
    if name in __all__:
        value = getattr(importlib.import_module("pocketmq.client"), name)
        globals()[name] = value
        return value
    if name == "__version__":
        globals()[name] = value = _installed_version()
        return value
    raise AttributeError(f"module 'pocketmq' has no attribute {name!r}")


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pocketmq")
    except PackageNotFoundError:  # a source tree on sys.path without installed metadata
        return "0+unknown"
