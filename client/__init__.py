"""PocketMQ's Python SDK: producer and consumers.

Pure building blocks (no sockets), each usable and tested on its own:

* :mod:`client.message` — :class:`Message`, :class:`MessageQueue`, :class:`SendResult`, :class:`SendStatus`,
  the properties string and the batch body;
* :mod:`client.validators` — the broker's topic, group, body and properties checks, run before sending;
* :mod:`client.compression` — zlib bodies and the sysFlag bit;
* :mod:`client.uniq` — ``UNIQ_KEY`` message ids and client ids;
* :mod:`client.topic_publish` — writable queues of a topic from its route, round-robin selection;
* :mod:`client.fault` — latency fault tolerance (broker isolation) and the queue selection using it;
* :mod:`client.errors` — the client's exceptions on top of :mod:`remoting.errors`.

Networked parts:

* :mod:`client.producer` — :class:`Producer`, the asyncio producer (sync, async, oneway, batch, ordered sends);
* :mod:`client.push_consumer` — :class:`PushConsumer`: rebalance, long-polling pulls, handlers, offsets,
  retries, orderly mode (with :mod:`client.consume_service`);
* :mod:`client.pull_consumer` — :class:`PullConsumer`: the application pulls queues and commits offsets;
* :mod:`client.consumer_api` — the consumers' broker requests and broker selection (slaves included);
* :mod:`client.instance` — the client instance producers and consumers share: route cache, name-server
  selection, heartbeats, NOTIFY_CONSUMER_IDS_CHANGED;
* :mod:`client.headers` — the send, heartbeat and unregister request headers;
* :mod:`client.sync` — blocking facades (``client.sync.Producer``, ``PushConsumer``, ``PullConsumer``) for
  code without an event loop.

Pure consumer building blocks: :mod:`client.pull_decode` (:class:`MessageExt`), :mod:`client.subscription`,
:mod:`client.rebalance`, :mod:`client.process_queue`, :mod:`client.offset_store`, :mod:`client.consume_pull`
(:class:`PullResult`, :class:`PullStatus`), :mod:`client.consume_types` (:class:`ConsumeResult`,
:class:`MessageModel`, :class:`ConsumeFromWhere`).
"""

from client.consume_pull import PullResult, PullStatus
from client.consume_types import ConsumeFromWhere, ConsumeResult, MessageModel
from client.consumer_api import ConsumerStateError
from client.errors import (
    BrokerNotFoundError,
    InvalidMessageError,
    MQBrokerError,
    MQClientError,
    NoNameServerError,
    NoRouteError,
    ProducerStateError,
    SendFailedError,
)
from client.message import Message, MessageBatch, MessageQueue, SendResult, SendStatus
from client.producer import MessageQueueSelector, Producer, SendAttemptHook, SendCallback
from client.pull_consumer import PullConsumer
from client.pull_decode import MessageExt
from client.push_consumer import BatchMessageHandler, MessageHandler, PushConsumer
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
