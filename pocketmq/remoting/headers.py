"""Typed request and response headers.

Every custom header is a frozen, slotted dataclass deriving from :class:`CommandHeader`. Its fields
map to ``extFields`` keys: the camelCase form of the attribute name, or ``wire("x")`` for the short
names of ``SEND_MESSAGE_V2``. A field without a default is required, as Java's ``@CFNotNull``: a request
that lacks it is refused with a clear :class:`~pocketmq.remoting.errors.InvalidHeaderError`. Values are coerced
from the strings (or, from some clients, numbers and booleans already coerced to strings by the codec)
on the way in, and written as strings on the way out.

The per-class field table is computed once, so decoding a header is one dict lookup and one conversion
per field.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Self

from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import InvalidHeaderError


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A header field whose ``extFields`` key is ``name`` instead of the camelCase attribute name."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"wire": name})
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _parse_bool(raw: str) -> bool:
    return raw.strip().lower() == "true"


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Spec(typing.NamedTuple):
    attr: str
    key: str
    parse: Callable[[str], Any]
    required: bool


def _parser_for(hint: Any) -> Callable[[str], Any]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        return _parse_bool
    if hint is int:
        return int
    if hint is str:
        return str
    raise TypeError(f"unsupported header field type {hint!r}")


_EMPTY: dict[str, str] = {}


class _Missing(Exception):
    """A required field is absent: the compiled decoder gives up and the checked path reports it."""


def _compile_decoder(cls: type, specs: tuple[_Spec, ...]) -> Callable[[dict[str, str]], Any]:
    """Generate ``decode(fields)`` for one header class: one ``get`` and one conversion per field, no loop.

    Optional fields keep their dataclass default when absent (passed by keyword only when present is not
    needed: every field is passed, absent ones as their default)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    namespace: dict[str, Any] = {"cls": cls, "_Missing": _Missing, "_parse_bool": _parse_bool}
    lines = ["def decode(fields):", "    get = fields.get"]
    args = []
    for i, spec in enumerate(specs):
        var = f"v{i}"
        conv = {int: f"int({var})", _parse_bool: f"_parse_bool({var})", str: var}[spec.parse]
        lines.append(f"    {var} = get({spec.key!r})")
        if spec.required:
            lines.append(f"    if {var} is None: raise _Missing")
            args.append(conv)
        else:
            namespace[f"d{i}"] = defaults[spec.attr]
            args.append(f"d{i} if {var} is None else {conv}")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), namespace)
    return namespace["decode"]  # type: ignore[no-any-return]


class CommandHeader:
    """Base of typed headers; subclasses are ``@dataclass(frozen=True, slots=True)``."""

    __slots__ = ()
    _specs: ClassVar[tuple[_Spec, ...]]

    @classmethod
    def _field_specs(cls) -> tuple[_Spec, ...]:
        specs = cls.__dict__.get("_specs_cache")
        if specs is None:
            hints = typing.get_type_hints(cls)
            specs = tuple(
                _Spec(
                    f.name,
                    f.metadata.get("wire", _camel(f.name)),
                    _parser_for(hints[f.name]),
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            type.__setattr__(cls, "_specs_cache", specs)
        return specs  # type: ignore[no-any-return,unused-ignore]

    @classmethod
    def from_fields(cls, fields: dict[str, str] | None) -> Self:
        """Decode from ``extFields``; missing required fields and bad numbers raise InvalidHeaderError.

        Runs a straight-line decoder compiled once per class (the send and pull paths decode a header
        per message); on any problem it falls back to the checked loop, which names the bad field.
        """
        decoder = cls.__dict__.get("_decoder_cache")
        if decoder is None:
            decoder = _compile_decoder(cls, cls._field_specs())
            type.__setattr__(cls, "_decoder_cache", decoder)
        try:
            return decoder(fields or _EMPTY)  # type: ignore[no-any-return]
        except (ValueError, TypeError, AttributeError, _Missing):
            return cls._from_fields_checked(fields or _EMPTY)

    @classmethod
    def _from_fields_checked(cls, fields: dict[str, str]) -> Self:
        kwargs: dict[str, Any] = {}
        for spec in cls._field_specs():
            raw = fields.get(spec.key)
            if raw is None:
                if spec.required:
                    raise InvalidHeaderError(f"the custom field <{spec.key}> is null")
                continue
            try:
                kwargs[spec.attr] = spec.parse(raw)
            except ValueError:
                raise InvalidHeaderError(f"the custom field <{spec.key}> has a bad value {raw!r}") from None
        return cls(**kwargs)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        return cls.from_fields(cmd.ext_fields)

    def to_fields(self) -> dict[str, str]:
        """Encode to ``extFields``: every value a string, ``None`` fields left out."""
        out: dict[str, str] = {}
        for spec in self._field_specs():
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.key] = _format(value)
        return out


# -- name server ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0
    #: PocketMQ extension (controller mode): the broker's master epoch; the name servers list as brokerId 0 only
    #: the master of the highest epoch they have seen (4.x brokers leave it out)
    master_epoch: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str


@dataclasses.dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


# -- send ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) and SEND_BATCH_MESSAGE's long form: RocketMQ's full field names."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): the same fields under one-letter keys.

    Attribute names match :class:`SendMessageRequestHeader`, so a processor handles both alike.
    """

    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: int = wire("d")
    queue_id: int = wire("e")
    sys_flag: int = wire("f")
    born_timestamp: int = wire("g")
    flag: int = wire("h")
    properties: str | None = wire("i", None)
    reconsume_times: int | None = wire("j", None)
    unit_mode: bool | None = wire("k", None)
    max_reconsume_times: int | None = wire("l", None)
    batch: bool | None = wire("m", None)
    broker_name: str | None = wire("n", None)

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            self.producer_group, self.topic, self.default_topic, self.default_topic_queue_nums, self.queue_id,
            self.sys_flag, self.born_timestamp, self.flag, self.properties, self.reconsume_times, self.unit_mode,
            self.batch, self.max_reconsume_times,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(CommandHeader):
    """The ext fields of a send response (codes 0, 10, 11, 12)."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", None)
    trace_on: str | None = wire("TRACE_ON", None)
    #: A timer message's recall handle (:mod:`pocketmq.common.recall`).
    recall_handle: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader(CommandHeader):
    """RECALL_MESSAGE (370)."""

    producer_group: str
    topic: str
    recall_handle: str
    broker_name: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RecallMessageResponseHeader(CommandHeader):
    msg_id: str


# -- admin and client management -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool = False
    #: RocketMQ 5: ``+message.type=FIFO``-style changes of the topic's attributes.
    attributes: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@dataclasses.dataclass(frozen=True, slots=True)
class TopicQueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetResponseHeader(CommandHeader):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class EarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(CommandHeader):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12); ``_UNIQUE_KEY_QUERY=true`` rides beside it in ``extFields`` (see
    :data:`UNIQUE_KEY_QUERY`)."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""RocketMQ's ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the key is a client unique id (the broker uses its own maxNum)."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclasses.dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


# -- consume -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY_CONSUMER_IDS_CHANGED (40), GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str
    topic: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


# -- transactions ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37): ``commit_or_rollback`` is a sys-flag transaction type (0 unknown, 8 commit,
    12 rollback); the offsets name the half message (queue offset in the half topic, commit-log offset)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39), broker to producer; the body is the half message, encoded as stored but
    with its real topic and queue (``topic``, the real topic, is 5.x's addition; 4.x clients ignore it)."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    topic: str | None = None


# -- request-reply ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker to the requesting client: the reply's send header as the
    replier sent it (SEND_REPLY_MESSAGE's long names), plus where it came from (``bornHost``, the replier's
    ``ip:port``), the broker's ``storeHost`` and ``storeTimestamp`` (epoch ms). The body is the reply's body."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
