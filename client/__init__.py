"""PocketMQ's Python producer SDK.

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
* :mod:`client.instance` — the client instance producers share: route cache, name-server selection, heartbeats;
* :mod:`client.headers` — the send, heartbeat and unregister request headers;
* :mod:`client.sync` — a blocking facade (``client.sync.Producer``) for code without an event loop.
"""

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
from remoting.errors import RemotingError, ResponseError

__all__ = [
    "BrokerNotFoundError",
    "InvalidMessageError",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageBatch",
    "MessageQueue",
    "MessageQueueSelector",
    "NoNameServerError",
    "NoRouteError",
    "Producer",
    "ProducerStateError",
    "RemotingError",
    "ResponseError",
    "SendAttemptHook",
    "SendCallback",
    "SendFailedError",
    "SendResult",
    "SendStatus",
]
