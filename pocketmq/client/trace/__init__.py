"""RocketMQ message traces in the Python SDK: the trace data format (:mod:`pocketmq.client.trace.data`), the bounded
asynchronous dispatcher that writes trace messages (:mod:`pocketmq.client.trace.dispatcher`), and the producer and push
consumer hooks that ``enable_trace=True`` installs (:mod:`pocketmq.client.trace.hooks`)."""

from pocketmq.client.trace.data import (
    CONTENT_SPLITOR,
    FIELD_SPLITOR,
    TRACE_TOPIC,
    TraceBean,
    TraceContext,
    TraceType,
    decode_trace_data,
    encode_context,
)
from pocketmq.client.trace.dispatcher import TraceDispatcher

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "TRACE_TOPIC",
    "TraceBean",
    "TraceContext",
    "TraceDispatcher",
    "TraceType",
    "decode_trace_data",
    "encode_context",
]
