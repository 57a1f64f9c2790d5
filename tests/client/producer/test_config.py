"""ProducerConfig: built from the producer's keyword arguments, validated once, frozen."""

from __future__ import annotations

import dataclasses

import pytest

from pocketmq.client import InvalidMessageError, NoNameServerError, Producer
from pocketmq.client.producer.config import ProducerConfig
from pocketmq.remoting.codes import SerializeType


def test_keyword_arguments_become_the_config() -> None:
    producer = Producer("PG", namesrv_addr="a:1;b:2", send_msg_timeout=1.5, max_message_size=1000,
                        auto_batch_max_bytes=5000, serialize_type=SerializeType.JSON, default_topic_queue_nums=8)
    config = producer.config
    assert (config.group, config.send_msg_timeout, config.max_message_size) == ("PG", 1.5, 1000)
    assert config.auto_batch_max_bytes == 1000  # clamped to the largest message
    client = config.client
    assert client.namesrv_addrs == ("a:1", "b:2")
    assert (client.serialize_type, client.default_topic_queue_nums) == (SerializeType.JSON, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.send_msg_timeout = 9.0  # type: ignore[misc]


@pytest.mark.parametrize("kwargs", [
    {"send_msg_timeout": 0}, {"max_in_flight": 0}, {"retry_times_when_send_failed": -1},
    {"auto_batch_max_messages": 0}, {"compress_over": 0}, {"serialize_type": 7},
    {"poll_name_server_interval": 0}, {"latency_max": (1, 2), "not_available_duration": (1,)},
])
def test_invalid_settings_fail_at_construction(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Producer("PG", namesrv_addr="a:1", **kwargs)  # type: ignore[arg-type]


def test_group_and_name_servers_are_checked() -> None:
    with pytest.raises(InvalidMessageError):
        ProducerConfig(group="bad group!", namesrv_addr="a:1")
    with pytest.raises(NoNameServerError):
        ProducerConfig(group="PG", namesrv_addr=" ; ")


def test_unknown_keyword_is_an_error() -> None:
    with pytest.raises(TypeError):
        Producer("PG", namesrv_addr="a:1", no_such_option=1)  # type: ignore[call-arg]
