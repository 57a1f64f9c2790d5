"""``pocketmq.remoting.fastjson``: MessageQueue-keyed maps, byte for byte, and refusals of bad input."""

from __future__ import annotations

import pytest

from pocketmq.remoting import fastjson
from pocketmq.remoting.fastjson import FastJsonDecodeError, MQKey

# What a RocketMQ 4.9 broker answers to GET_TOPIC_STATS_INFO (apache/rocketmq#3389), trimmed to one queue.
JAVA_TOPIC_STATS = (b'{"offsetTable":{{"brokerName":"rocketmq-broker-a","queueId":2,"topic":"test"}:'
                    b'{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}')


def test_writes_fastjson_object_keys_sorted_and_unquoted() -> None:
    body = {"offsetTable": {MQKey("test", "rocketmq-broker-a", 2): {"lastUpdateTimestamp": 0, "maxOffset": 0,
                                                                      "minOffset": 0}}}
    assert fastjson.dumps(body) == JAVA_TOPIC_STATS


def test_reads_what_java_writes() -> None:
    table = fastjson.loads(JAVA_TOPIC_STATS)["offsetTable"]
    assert table == {MQKey("test", "rocketmq-broker-a", 2): {"lastUpdateTimestamp": 0, "maxOffset": 0,
                                                             "minOffset": 0}}


def test_round_trip_with_int_keys_nulls_and_strings_that_look_like_keys() -> None:
    body = {"a": {1: "x", -2: None}, "s": 'q"{"topic":"t"}:,', "l": [1.5, True, None, {MQKey("t", "b", 0): 7}]}
    text = fastjson.dumps(body)
    assert text == b'{"a":{1:"x"},"s":"q\\"{\\"topic\\":\\"t\\"}:,","l":[1.5,true,null,' \
                   b'{{"brokerName":"b","queueId":0,"topic":"t"}:7}]}'
    assert fastjson.loads(text) == {"a": {1: "x"}, "s": 'q"{"topic":"t"}:,',
                                   "l": [1.5, True, None, {MQKey("t", "b", 0): 7}]}


@pytest.mark.parametrize("bad", [
    b'{"offsetTable":{{"brokerName":"b","queueId":"x","topic":"t"}:1}}',  # queueId not a number
    b'{"offsetTable":{{"brokerName":"b","topic":"t"}:1}}',  # no queueId
    b'{{"a":1}:2}',  # an object key that is no MessageQueue
    b'{"a":1', b'{"a" 1}', b'[1,2', b'{"a":1} x', b'{1.5:2}', b'{"a":tru}', b'"unterminated', b'\xff',
])
def test_refuses_bad_input(bad: bytes) -> None:
    with pytest.raises(FastJsonDecodeError):
        fastjson.loads(bad)


def test_refuses_nesting_past_the_limit_in_the_dialect() -> None:
    deep = fastjson.MAX_DEPTH + 2
    with pytest.raises(FastJsonDecodeError, match="nesting too deep"):
        fastjson.loads(b"{1:" + b"[" * deep + b"]" * deep + b"}")
    assert fastjson.loads(b"{1:" + b"[" * 10 + b"]" * 10 + b"}") == {1: [[[[[[[[[[]]]]]]]]]]}
