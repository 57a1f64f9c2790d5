"""PocketMQ's Python SDK: producer and consumers.

Three sub-packages, named for what they hold:

* :mod:`pocketmq.client.core` — what producers and consumers share: the client instance (connections, heartbeats),
  the routes and the one route fetcher, the member lifecycle, configuration, errors, message ids,
  compression;
* :mod:`pocketmq.client.producer` — :class:`Producer` (sync, async, oneway, batch and ordered sends), its
  configuration, auto-batching accumulator, latency fault tolerance and topic publish info;
* :mod:`pocketmq.client.consumer` — :class:`PushConsumer` (rebalance service, pull service, process queues, consume
  service, offset stores; or RocketMQ 5's POP mode), :class:`LitePullConsumer` (``poll`` over the same pull and
  rebalance services), :class:`PullConsumer`, and RocketMQ 5's :class:`SimpleConsumer`.

Request-reply: :meth:`Producer.request` sends a request and returns its reply, which a consumer builds with
:func:`create_reply_message` (:mod:`pocketmq.client.core.reply`) and sends with any producer's ``send``.

:mod:`client.blocking` holds the blocking facades (``client.blocking.Producer``, ``PushConsumer``, ``PullConsumer``,
``LitePullConsumer``) for code without an event loop.

The messages themselves: :mod:`pocketmq.client.core.message` (:class:`Message`, :class:`MessageQueue`,
:class:`SendResult`, batches), :mod:`pocketmq.client.core.message_ext` (:class:`MessageExt`, a received message, decoded
by :mod:`common.record`), :mod:`client.core.validators` (the broker's checks, run before sending); the consumer's
vocabulary in :mod:`pocketmq.client.consumer.types` (:class:`ConsumeResult`, :class:`MessageModel`,
:class:`ConsumeFromWhere`), :mod:`pocketmq.client.consumer.pull_result` (:class:`PullResult`, :class:`PullStatus`) and
:mod:`pocketmq.client.consumer.subscription`. What the SDK shares with the broker (property keys, topic rules,
``SubscriptionData``, the record codec) is in :mod:`pocketmq.common`.
"""

from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.consumer.pull import PullConsumer
from pocketmq.client.consumer.pull_result import PullResult, PullStatus
from pocketmq.client.consumer.push import BatchMessageHandler, MessageHandler, PushConsumer
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.simple import SimpleConsumer
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeResult, MessageModel
from pocketmq.client.core.errors import (
    BrokerNotFoundError,
    ConsumerStateError,
    InvalidMessageError,
    MQBrokerError,
    MQClientError,
    NoNameServerError,
    NoRouteError,
    ProducerStateError,
    ReplyMessageError,
    RequestExpiredError,
    RequestTableFullError,
    RequestTimeoutError,
    SendFailedError,
)
from pocketmq.client.core.message import Message, MessageBatch, MessageQueue, SendResult, SendStatus
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.reply import create_reply_message
from pocketmq.client.producer.config import SendAttemptHook
from pocketmq.client.producer.producer import Producer, SendCallback
from pocketmq.client.producer.send_loop import MessageQueueSelector
from pocketmq.client.producer.transaction import (
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
    TransactionState,
)
from pocketmq.remoting.acl import SessionCredentials
from pocketmq.remoting.errors import RemotingError, ResponseError

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
