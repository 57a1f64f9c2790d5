"""The two ``sysFlag`` bit sets (RocketMQ's ``MessageSysFlag`` and ``PullSysFlag``).

A stored record's SYSFLAG::

    0x1   COMPRESSED           body deflated; bits 8-10 name the algorithm (0, 3 zlib; 1 LZ4; 2 ZSTD; 4.9.4+)
    0x2   MULTI_TAGS
    0xC   TRANSACTION_MASK     0x0 not a transaction, 0x4 prepared, 0x8 commit, 0xC rollback
    0x10  BORNHOST_V6          the born host field is 16 + 4 bytes
    0x20  STOREHOST_V6         the store host field is 16 + 4 bytes
    0x40  NEED_UNWRAP
    0x80  INNER_BATCH

A PULL_MESSAGE request's ``sysFlag``: 0x1 COMMIT_OFFSET (the request carries the group's
offset to commit), 0x2 SUSPEND (long polling), 0x4 SUBSCRIPTION (the request carries its expression instead
of relying on the heartbeat's), 0x8 CLASS_FILTER, 0x10 LITE_PULL.

Both are plain ``int`` constants, not ``enum.IntFlag``: they are tested on every record and every pull, and an
``int & IntFlag`` builds an enum member each time.
"""

from __future__ import annotations


class MessageSysFlag:
    """Bits of a record's SYSFLAG."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4_TYPE = 0x1 << 8
    COMPRESSION_ZSTD_TYPE = 0x2 << 8
    COMPRESSION_ZLIB_TYPE = 0x3 << 8
    COMPRESSION_TYPE_COMPARATOR = 0x7 << 8

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        """The transaction bits (2-3) of ``sys_flag``."""
        return sys_flag & MessageSysFlag.TRANSACTION_MASK

    @staticmethod
    def is_dispatched(sys_flag: int) -> bool:
        """Prepared and rolled-back transaction halves get no queue offset and no consume-queue entry."""
        txn = sys_flag & MessageSysFlag.TRANSACTION_MASK
        return txn in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)

    @staticmethod
    def is_zlib_compressed(sys_flag: int) -> bool:
        """COMPRESSED with zlib: compression type 0 (every 4.x producer before 4.9.4) or ZLIB."""
        kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR
        return bool(sys_flag & MessageSysFlag.COMPRESSED) and kind in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE)


class PullSysFlag:
    """Bits of a PULL_MESSAGE request's ``sysFlag``."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


def pull_sys_flag(
    *, commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False, lite_pull: bool = False
) -> int:
    """A pull request's sysFlag (Java's ``PullSysFlag.buildSysFlag``). A push consumer sends
    ``COMMIT_OFFSET | SUSPEND`` (and ``SUBSCRIPTION`` only when it passes its expression instead of relying on
    the one its heartbeat registered)."""
    flag = 0
    if commit_offset:
        flag |= PullSysFlag.COMMIT_OFFSET
    if suspend:
        flag |= PullSysFlag.SUSPEND
    if subscription:
        flag |= PullSysFlag.SUBSCRIPTION
    if class_filter:
        flag |= PullSysFlag.CLASS_FILTER
    if lite_pull:
        flag |= PullSysFlag.LITE_PULL
    return flag
