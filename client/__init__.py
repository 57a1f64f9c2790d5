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
from remoting.errors import RemotingError, ResponseError

__all__ = [
    "BrokerNotFoundError",
    "InvalidMessageError",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageBatch",
    "MessageQueue",
    "NoNameServerError",
    "NoRouteError",
    "ProducerStateError",
    "RemotingError",
    "ResponseError",
    "SendFailedError",
    "SendResult",
    "SendStatus",
]
