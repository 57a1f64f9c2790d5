"""The JSON bodies of a consumer's broker requests: consumer list and queue locks (reference §2.4)."""

from __future__ import annotations

import json

import pytest

from pocketmq.client.consumer.broker_api import (
    RebalanceBodyError,
    decode_consumer_id_list,
    decode_lock_batch_response,
    encode_lock_batch_request,
)
from pocketmq.client.core.message import MessageQueue


def test_consumer_id_list() -> None:
    assert decode_consumer_id_list(b'{"consumerIdList":["10.0.0.1@1","10.0.0.2@2"]}') == ["10.0.0.1@1", "10.0.0.2@2"]
    assert decode_consumer_id_list(b"{}") == []
    for bad in (None, b"", b"[1]", b"not json", b'{"consumerIdList":"x"}'):
        with pytest.raises(RebalanceBodyError):
            decode_consumer_id_list(bad)


def test_lock_batch_request_body() -> None:
    body = encode_lock_batch_request("G", "10.0.0.1@7", [MessageQueue("T", "b", 1), MessageQueue("T", "a", 0)])
    assert json.loads(body) == {
        "consumerGroup": "G",
        "clientId": "10.0.0.1@7",
        "mqSet": [{"brokerName": "a", "queueId": 0, "topic": "T"}, {"brokerName": "b", "queueId": 1, "topic": "T"}],
    }


def test_lock_batch_response_body() -> None:
    body = b'{"lockOKMQSet":[{"brokerName":"a","queueId":"0","topic":"T"},{"brokerName":"a","queueId":1,"topic":"T"}]}'
    assert decode_lock_batch_response(body) == {MessageQueue("T", "a", 0), MessageQueue("T", "a", 1)}
    assert decode_lock_batch_response(b"{}") == set()
    for bad in (b'{"lockOKMQSet":[1]}', b'{"lockOKMQSet":[{"topic":"T"}]}', b'{"lockOKMQSet":{}}', b"x"):
        with pytest.raises(RebalanceBodyError):
            decode_lock_batch_response(bad)
