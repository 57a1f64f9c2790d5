"""Typed headers of RocketMQ 5's POP requests (``POP_MESSAGE``, ``ACK_MESSAGE``, ``CHANGE_MESSAGE_INVISIBLETIME``,
``NOTIFICATION``, ``POLLING_INFO``) under the ``extFields`` keys the Java classes of ``org.apache.rocketmq.remoting.
protocol.header`` give them (``PopMessageRequestHeader`` and friends). ``BATCH_ACK_MESSAGE`` has no header: its body
is :func:`pocketmq.common.pop.decode_batch_ack_body`'s.

Java's ``@CFNotNull`` fields are required here too, except ``bornTime``: RocketMQ's broker fills it with its own
clock when a client leaves it out (or sends 0), so it defaults to 0 (meaning "now"). Fields a 5.x client adds to
every RPC header (``bname``, ``lo``, ``ns``, ``nsd``, ``oway``) are ignored.
"""

from __future__ import annotations

import dataclasses

from pocketmq.remoting.headers import CommandHeader


@dataclasses.dataclass(frozen=True, slots=True)
class PopMessageRequestHeader(CommandHeader):
    """POP_MESSAGE (200050): ``queueId`` -1 pops from any queue; ``initMode`` 0 starts a new group at the queue's
    first message, 1 at its last; ``expType``/``exp`` are a TAG or SQL92 subscription; ``order`` is a FIFO pop."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    init_mode: int
    born_time: int = 0
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PopMessageResponseHeader(CommandHeader):
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AckMessageRequestHeader(CommandHeader):
    """ACK_MESSAGE (200051): ``topic``/``queueId``/``offset`` name the message as stored (the POP retry topic for a
    revived one), ``extraInfo`` is its receipt handle."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message of ACK_MESSAGE, invisible for ``invisibleTime`` ms from
    now (0: visible again at once)."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: int
    invisible_time: int
    revive_qid: int


@dataclasses.dataclass(frozen=True, slots=True)
class NotificationRequestHeader(CommandHeader):
    """NOTIFICATION (200054): long-poll until the group has something to pop in ``topic`` (queue -1: any)."""

    consumer_group: str
    topic: str
    queue_id: int
    poll_time: int
    born_time: int = 0
    order: bool | None = None
    attempt_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NotificationResponseHeader(CommandHeader):
    has_msg: bool
    polling_full: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PollingInfoRequestHeader(CommandHeader):
    """POLLING_INFO (200055): how many pops of the group are parked on the queue."""

    consumer_group: str
    topic: str
    queue_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int
