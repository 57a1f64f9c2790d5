"""PocketMQ's Python SDK: producer and consumers.

Three sub-packages, named for what they hold:

* :mod:`client.core` — what producers and consumers share: the client instance (connections, heartbeats),
  the routes and the one route fetcher, the member lifecycle, configuration, errors, message ids,
  compression;
* :mod:`client.producer` — :class:`Producer` (sync, async, oneway, batch and ordered sends), its
  configuration, auto-batching accumulator, latency fault tolerance and topic publish info;
* :mod:`client.consumer` — :class:`PushConsumer` (rebalance service, pull service, process queues, consume
  service, offset stores) and :class:`PullConsumer`.

:mod:`client.sync` holds the blocking facades (``client.sync.Producer``, ``PushConsumer``, ``PullConsumer``)
for code without an event loop.

The messages themselves: :mod:`client.core.message` (:class:`Message`, :class:`MessageQueue`,
:class:`SendResult`, batches), :mod:`client.core.message_ext` (:class:`MessageExt`, a received message, decoded
by :mod:`common.record`), :mod:`client.core.validators` (the broker's checks, run before sending); the consumer's
vocabulary in :mod:`client.consumer.types` (:class:`ConsumeResult`, :class:`MessageModel`,
:class:`ConsumeFromWhere`), :mod:`client.consumer.pull_result` (:class:`PullResult`, :class:`PullStatus`) and
:mod:`client.consumer.subscription`. What the SDK shares with the broker (property keys, topic rules,
``SubscriptionData``, the record codec) is in :mod:`common`.
"""

import common.compiled  # noqa: F401  (first: the switch between compiled and plain modules, common.compiled)
from client.consumer.pull import PullConsumer
from client.consumer.pull_result import PullResult, PullStatus
from client.consumer.push import BatchMessageHandler, MessageHandler, PushConsumer
from client.consumer.selector import MessageSelector
from client.consumer.types import ConsumeFromWhere, ConsumeResult, MessageModel
from client.core.errors import (
    BrokerNotFoundError,
    ConsumerStateError,
    InvalidMessageError,
    MQBrokerError,
    MQClientError,
    NoNameServerError,
    NoRouteError,
    ProducerStateError,
    SendFailedError,
)
from client.core.message import Message, MessageBatch, MessageQueue, SendResult, SendStatus
from client.core.message_ext import MessageExt
from client.producer.config import SendAttemptHook
from client.producer.producer import Producer, SendCallback
from client.producer.send_loop import MessageQueueSelector
from remoting.acl import SessionCredentials
from remoting.errors import RemotingError, ResponseError

__all__ = [
    "BatchMessageHandler",
    "BrokerNotFoundError",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumerStateError",
    "InvalidMessageError",
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
    "ResponseError",
    "SendAttemptHook",
    "SendCallback",
    "SendFailedError",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
]
