"""An independent check of admin bodies against RocketMQ 4.9's classes, written apart from the code under test.

:func:`parse` reads fastjson's dialect with the standard library only: a ``MessageQueue`` map key (an object
written unquoted) becomes the string ``"topic|brokerName|queueId"`` after checking it has exactly
MessageQueue's three fields; unquoted integer keys are quoted. :data:`FIELDS` lists each Java class's
serialised field names (fastjson writes every bean getter, sorted), and :func:`check` asserts an object has
exactly those.
"""

from __future__ import annotations

import json
import re
from typing import Any

_OBJECT_KEY = re.compile(r'(?<=[{,])(\{[^{}]*\})(?=:)')
_INT_KEY = re.compile(r'(?<=[{,])(-?\d+)(?=:)')

FIELDS: dict[str, set[str]] = {
    "MessageQueue": {"brokerName", "queueId", "topic"},
    "TopicOffset": {"lastUpdateTimestamp", "maxOffset", "minOffset"},
    "TopicStatsTable": {"offsetTable"},
    "OffsetWrapper": {"brokerOffset", "consumerOffset", "lastTimestamp"},
    "ConsumeStats": {"consumeTps", "offsetTable"},
    "ConsumeStatsList": {"brokerAddr", "consumeStatsList", "totalDiff"},
    "SubscriptionGroupConfig": {"brokerId", "consumeBroadcastEnable", "consumeEnable", "consumeFromMinEnable",
                                "groupName", "notifyConsumerIdsChangedEnable", "retryMaxTimes", "retryQueueNums",
                                "whichBrokerWhenConsumeSlowly"},
    "SubscriptionGroupWrapper": {"dataVersion", "subscriptionGroupTable"},
    "GroupList": {"groupList"},
    "QueryConsumeTimeSpanBody": {"consumeTimeSpanSet"},
    "QueueTimeSpan": {"consumeTimeStamp", "delayTime", "maxTimeStamp", "messageQueue", "minTimeStamp"},
    "BrokerStatsData": {"statsDay", "statsHour", "statsMinute"},
    "BrokerStatsItem": {"avgpt", "sum", "tps"},
    "Connection": {"clientAddr", "clientId", "language", "version"},
    "ConsumerConnection": {"connectionSet", "consumeFromWhere", "consumeType", "messageModel", "subscriptionTable"},
    "ProducerConnection": {"connectionSet"},
    "ConsumerRunningInfo": {"mqTable", "properties", "statusTable", "subscriptionSet"},
    "ProcessQueueInfo": {"cachedMsgCount", "cachedMsgMaxOffset", "cachedMsgMinOffset", "cachedMsgSizeInMiB",
                         "commitOffset", "droped", "lastConsumeTimestamp", "lastLockTimestamp", "lastPullTimestamp",
                         "locked", "transactionMsgCount", "transactionMsgMaxOffset", "transactionMsgMinOffset",
                         "tryUnlockTimes"},
    "ConsumeStatus": {"consumeFailedMsgs", "consumeFailedTPS", "consumeOKTPS", "consumeRT", "pullRT", "pullTPS"},
    "ConsumeMessageDirectlyResult": {"autoCommit", "consumeResult", "order", "spentTimeMills"},
    "ResetOffsetBody": {"offsetTable"},
    "GetConsumerStatusBody": {"consumerTable", "messageQueueTable"},
    "TopicList": {"brokerAddr", "topicList"},
    "TopicConfig": {"order", "perm", "readQueueNums", "topicFilterType", "topicName", "topicSysFlag",
                    "writeQueueNums"},
    "ClusterAclVersionInfo": {"aclConfigDataVersion", "allAclConfigDataVersion", "brokerAddr", "brokerName",
                              "clusterName"},
    "DataVersion": {"counter", "timestamp"},
}


def _queue_key(match: re.Match[str]) -> str:
    mq = json.loads(match.group(1))
    assert set(mq) == FIELDS["MessageQueue"], mq
    return json.dumps(f"{mq['topic']}|{mq['brokerName']}|{mq['queueId']}")


def parse(body: bytes | bytearray | memoryview | None) -> Any:
    text = bytes(body or b"").decode()
    return json.loads(_INT_KEY.sub(r'"\1"', _OBJECT_KEY.sub(_queue_key, text)))


def check(obj: Any, cls: str) -> dict[str, Any]:
    """``obj`` has exactly the fields fastjson writes for ``cls`` (nulls omitted: those may be missing)."""
    assert isinstance(obj, dict), f"{cls}: {obj!r}"
    assert set(obj) == FIELDS[cls], f"{cls}: {sorted(obj)} != {sorted(FIELDS[cls])}"
    return obj
