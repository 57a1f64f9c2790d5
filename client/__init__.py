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

The model the SDK speaks: :mod:`client.message` (:class:`Message`, :class:`MessageQueue`,
:class:`SendResult`, the properties string and the batch body), :mod:`client.validators` (the broker's
checks, run before sending), :mod:`client.pull_decode` (:class:`MessageExt`), :mod:`client.subscription`,
:mod:`client.consume_pull` (:class:`PullResult`, :class:`PullStatus`) and :mod:`client.consume_types`
(:class:`ConsumeResult`, :class:`MessageModel`, :class:`ConsumeFromWhere`).
"""

from client.consume_pull import PullResult, PullStatus
from client.consume_types import ConsumeFromWhere, ConsumeResult, MessageModel
from client.consumer.pull import PullConsumer
from client.consumer.push import BatchMessageHandler, MessageHandler, PushConsumer
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
from client.message import Message, MessageBatch, MessageQueue, SendResult, SendStatus
from client.producer.config import SendAttemptHook
from client.producer.producer import Producer, SendCallback
from client.producer.send_loop import MessageQueueSelector
from client.pull_decode import MessageExt
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
]
