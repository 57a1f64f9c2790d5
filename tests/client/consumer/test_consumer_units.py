"""Consumer rules without a broker: where a new queue starts, the handler adapter, the retry message, and
which broker member a pull goes to."""

from __future__ import annotations

import pytest

from pocketmq.client.consumer.push import _handler_call, build_retry_message
from pocketmq.client.consumer.rebalance import compute_pull_from_where
from pocketmq.client.consumer.subscription import build_subscription
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeResult
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from tests.client.core.support import instance_with, route

MQ = MessageQueue("T", "broker-a", 0)
RETRY_MQ = MessageQueue("%RETRY%G", "broker-a", 0)


async def _max(mq: MessageQueue) -> int:
    return 100


async def _search(mq: MessageQueue, ts: int) -> int:
    assert ts == 1234
    return 42


@pytest.mark.parametrize(
    ("mq", "last", "where", "expected"),
    [
        (MQ, 7, ConsumeFromWhere.LAST_OFFSET, 7),  # a committed offset always wins
        (MQ, 7, ConsumeFromWhere.FIRST_OFFSET, 7),
        (MQ, 7, ConsumeFromWhere.TIMESTAMP, 7),
        (MQ, 0, ConsumeFromWhere.LAST_OFFSET, 0),
        (MQ, -1, ConsumeFromWhere.LAST_OFFSET, 100),  # max offset
        (RETRY_MQ, -1, ConsumeFromWhere.LAST_OFFSET, 0),  # retry topics from the start
        (MQ, -1, ConsumeFromWhere.FIRST_OFFSET, 0),
        (MQ, -1, ConsumeFromWhere.TIMESTAMP, 42),  # searched by timestamp
        (RETRY_MQ, -1, ConsumeFromWhere.TIMESTAMP, 100),  # retry topics at their max offset
    ],
)
async def test_compute_pull_from_where(mq: MessageQueue, last: int, where: ConsumeFromWhere, expected: int) -> None:
    assert await compute_pull_from_where(mq, last, where, timestamp_ms=1234, max_offset=_max,
                                         search_offset=_search) == expected


async def test_handler_call_maps_results_and_exceptions() -> None:
    msg = MessageExt.of("T", b"x")

    async def ok(m: MessageExt) -> None:
        return None

    async def later(m: MessageExt) -> ConsumeResult:
        return ConsumeResult.RECONSUME_LATER

    async def boom(m: MessageExt) -> ConsumeResult:
        raise RuntimeError("boom")

    async def wrong(m: MessageExt) -> str:
        return "yes"

    async def batch(ms: list[MessageExt]) -> ConsumeResult:
        assert ms == [msg, msg]
        return ConsumeResult.SUCCESS

    from pocketmq.common.logs import get_logger

    logger = get_logger("pocketmq.tests")
    assert await _handler_call(ok, True, logger)([msg]) is ConsumeResult.SUCCESS
    assert await _handler_call(later, True, logger)([msg]) is ConsumeResult.RECONSUME_LATER
    assert await _handler_call(boom, True, logger)([msg]) is ConsumeResult.RECONSUME_LATER
    assert await _handler_call(wrong, True, logger)([msg]) is ConsumeResult.RECONSUME_LATER  # type: ignore[arg-type]
    assert await _handler_call(batch, False, logger)([msg, msg]) is ConsumeResult.SUCCESS


def test_retry_message_for_the_fallback_path() -> None:
    msg = MessageExt.of("T", b"body", reconsume_times=1, flag=9,
                        properties={"TAGS": "t", "UNIQ_KEY": "U1", "MIN_OFFSET": "0", "MAX_OFFSET": "5"})
    retry = build_retry_message(msg, group="G", max_reconsume_times=3, to_dlq=False)
    assert retry.topic == "%RETRY%G" and retry.body == b"body" and retry.flag == 9
    props = retry.properties
    assert props["RETRY_TOPIC"] == "T" and props["ORIGIN_MESSAGE_ID"] == "U1" and props["UNIQ_KEY"] == "U1"
    assert props["RECONSUME_TIME"] == "2" and props["MAX_RECONSUME_TIMES"] == "3"
    assert props["DELAY"] == "4"  # 3 + reconsume times
    assert "MIN_OFFSET" not in props and "MAX_OFFSET" not in props
    dlq = build_retry_message(msg, group="G", max_reconsume_times=3, to_dlq=True)
    assert dlq.properties["RECONSUME_TIME"] == "3"  # at the maximum: the broker moves it to the DLQ


class _PullServer:
    """A broker member that answers every pull with PULL_NOT_FOUND and a scripted ``suggestWhichBrokerId``,
    recording the sysFlag of each pull."""

    def __init__(self, suggest: int) -> None:
        from pocketmq.remoting.server import RemotingServer, ServerConfig

        self.suggest = suggest
        self.flags: list[int] = []
        self.server = RemotingServer(ServerConfig(), name=f"pull-{suggest}")
        self.server.register(RequestCode.PULL_MESSAGE, self._pull)

    def _pull(self, request: RemotingCommand, conn: object) -> RemotingCommand:
        self.flags.append(int((request.ext_fields or {})["sysFlag"]))
        offset = (request.ext_fields or {})["queueOffset"]
        return request.response(19, None, {"suggestWhichBrokerId": str(self.suggest), "nextBeginOffset": offset,
                                           "minOffset": "0", "maxOffset": offset})


async def test_pulls_follow_the_suggested_member_and_fall_back_when_it_is_gone() -> None:
    from pocketmq.client.consumer.broker_api import ConsumerAPI
    from pocketmq.client.consumer.pull_result import PullStatus
    from pocketmq.common.sysflag import pull_sys_flag
    from pocketmq.remoting.codes import SerializeType

    master, slave = _PullServer(suggest=1), _PullServer(suggest=0)
    await master.server.start()
    await slave.server.start()
    instance = instance_with(route({0: master.server.addr, 1: slave.server.addr}))
    instance.start()
    api = ConsumerAPI(instance, "G", serialize_type=SerializeType.MSGPACK, timeout=2.0)
    sub = build_subscription("T", "*")
    flag = pull_sys_flag(commit_offset=True, suspend=False, subscription=False)

    async def pull() -> PullStatus:
        result = await api.pull(MQ, sub, 3, 32, sys_flag=flag, commit_offset=3, suspend_timeout_ms=0, timeout=2.0,
                                post_subscription=False)
        return result.status

    try:
        assert await pull() is PullStatus.NO_NEW_MSG  # master (id 0 until told otherwise); it suggests 1
        assert await pull() is PullStatus.NO_NEW_MSG  # slave; it suggests 0
        assert await pull() is PullStatus.NO_NEW_MSG  # master again
        assert len(master.flags) == 2 and len(slave.flags) == 1
        assert all(f & 0x1 for f in master.flags)  # COMMIT_OFFSET to the master
        assert not slave.flags[0] & 0x1  # never to a slave
        await master.server.stop(grace=0.1)
        assert await pull() is PullStatus.NO_NEW_MSG  # the master refused: the slave answered in the same call
        assert len(slave.flags) == 2 and not slave.flags[1] & 0x1
    finally:
        await slave.server.stop(grace=0.1)
        await instance.shutdown()
