"""Request, response, language and serialize-type codes of the RocketMQ 4.x remoting protocol.

Values are wire values; names follow RocketMQ's so that a reader can go
from the Java sources to ours.
"""

from __future__ import annotations

from enum import IntEnum


class SerializeType(IntEnum):
    """Header encoding, carried in the top byte of the frame's ``headerLenAndType`` word."""

    JSON = 0
    ROCKETMQ = 1
    #: Our own type for the Python SDK: a msgpack array header, cheaper to encode than JSON. RocketMQ only
    #: uses 0 and 1, so a value far from them (ASCII "M") keeps clear of any future upstream type.
    MSGPACK = 0x4D


class LanguageCode(IntEnum):
    """The sender's language (JSON carries the name, binary headers the number)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class ResponseCode(IntEnum):
    """Response codes (RemotingSysResponseCode + ResponseCode)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    #: 5.x reuses 209 and 210 for POP long polling: too many parked pops / a pop that found nothing in time. Named
    #: first, so that an error and a log name the answer every empty pop gets, not 4.x's ACL-admin failures.
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    #: RocketMQ 5's answer to a request it will not carry out as asked (a recall with a bad handle or time).
    ILLEGAL_OPERATION = 604
    # --- RocketMQ 5 POP ---
    #: A request field out of range (a POP's ``maxMsgNums`` above 32, a queue id, an invisible time).
    INVALID_PARAMETER = 29
    # --- end RocketMQ 5 POP ---
    # --- controller (RocketMQ 5) ---
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    # --- end controller ---


class RequestCode(IntEnum):
    """Request codes (RocketMQ 4.9.4's complete list)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    VIEW_BROKER_STATS_DATA = 315
    GET_BROKER_CONSUME_STATS = 317
    SEND_BATCH_MESSAGE = 320
    QUERY_DATA_VERSION = 322
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    #: Broker to requesting client: a reply (header ReplyMessageRequestHeader, body the reply's body).
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    GET_TOPIC_CONFIG = 351
    #: PocketMQ-private (far from RocketMQ's codes): a master that restarted after a power loss asks its slave
    #: for the commit-log tail it lost (``broker.tail_recovery``); header ``offset``, ``maxBytes``; answer:
    #: the raw bytes from ``offset`` within one file, ext ``maxOffset`` and ``minOffset``. Only a slave serves it.
    GET_COMMIT_LOG_TAIL = 9001
    # --- RocketMQ 5 POP (apache/rocketmq 5.x RequestCode) ---
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    BATCH_ACK_MESSAGE = 200151
    # --- end RocketMQ 5 POP ---
    #: RocketMQ 5.3's recall of a timer message (header RecallMessageRequestHeader; answer ``msgId``).
    RECALL_MESSAGE = 370
    # --- RocketMQ 5 proxy (reads one consumer group's settings) ---
    GET_SUBSCRIPTIONGROUP_CONFIG = 352
    # --- end RocketMQ 5 proxy ---
    #: RocketMQ 5's batch topic creation: empty header, body ``{"topicConfigList":[TopicConfig JSON, ...]}``.
    UPDATE_AND_CREATE_TOPIC_LIST = 18
    #: RocketMQ 5's timer-wheel backlog (``TimerMetricsSerializeWrapper``: ``timingCount`` per topic); the console
    #: reads it and shows "n/a" while a broker answers REQUEST_CODE_NOT_SUPPORTED.
    GET_TIMER_METRICS = 61
    #: PocketMQ-private: POP messages handed out and not yet acknowledged. Header ``consumerGroup``, optional
    #: ``topic``; answer body JSON ``{"inflightTable": [{"topic", "queueId", "inflight"}], "total": n}``. A broker
    #: without POP answers REQUEST_CODE_NOT_SUPPORTED, which the console shows as "n/a".
    GET_POP_INFLIGHT_STATS = 9010
    # --- controller (RocketMQ 5's codes; 904 and 1001-1013) ---
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    #: PocketMQ-private: one Raft message between controllers (oneway; msgpack body, pocketmq.controller.raft).
    CONTROLLER_RAFT_MESSAGE = 9101
    #: PocketMQ-private: a master asks a slave of its SyncStateSet to copy its metadata now (oneway, no header):
    #: a topic or group created on the master is on every in-sync slave before the creation is answered.
    SYNC_BROKER_METADATA_NOW = 9102
    #: PocketMQ-private: a planned switchover; the controller asks the master of ``masterEpoch`` to stop taking
    #: writes and to answer once every member of its SyncStateSet holds all it wrote (a retriable refusal, never a
    #: lost or failed send, for the producers meanwhile).
    CONTROLLER_FENCE_MASTER = 9103
    # --- end controller ---


#: The version number we put in headers: RocketMQ 4.9.4's ``MQVersion`` ordinal (V4_9_4).
ROCKETMQ_VERSION = 401

#: Flag bits of the header's ``flag`` word.
FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2
