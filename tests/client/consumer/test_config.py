"""ConsumerConfig and PullConsumerConfig: built from the consumers' keyword arguments, validated once."""

from __future__ import annotations

import pytest

from pocketmq.client import MessageModel, PullConsumer, PushConsumer
from pocketmq.client.consumer.config import ConsumerConfig


def test_push_consumer_settings() -> None:
    consumer = PushConsumer("G", namesrv_addr="a:1", instance_name="cfg", message_model=MessageModel.BROADCASTING)
    config = consumer.config
    assert config.max_reconsume_times == 16  # -1 means RocketMQ's default
    assert not config.clustering and not consumer.clustering
    assert ConsumerConfig(group="G", namesrv_addr="a:1", max_reconsume_times=3).max_reconsume_times == 3


@pytest.mark.parametrize("kwargs", [
    {"pull_timeout": 10.0, "long_polling_timeout": 15.0}, {"consume_thread_max": 0}, {"pull_interval": -1},
    {"max_reconsume_times": -2}, {"rebalance_interval": 0},
])
def test_invalid_push_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PushConsumer("G", namesrv_addr="a:1", **kwargs)  # type: ignore[arg-type]


def test_pull_consumer_settings() -> None:
    assert PullConsumer("G", namesrv_addr="a:1").config.pull_timeout == 10.0
    with pytest.raises(ValueError):
        PullConsumer("G", namesrv_addr="a:1", pull_timeout=0)
