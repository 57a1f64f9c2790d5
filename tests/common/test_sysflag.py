"""The record's and the pull request's sysFlag bits."""

from __future__ import annotations

from pocketmq.common.sysflag import MessageSysFlag, PullSysFlag, pull_sys_flag


def test_pull_sys_flag() -> None:
    assert pull_sys_flag(commit_offset=True, suspend=True, subscription=False) == 0x3
    assert pull_sys_flag(commit_offset=False, suspend=True, subscription=True) == 0x6
    assert pull_sys_flag(commit_offset=True, suspend=True, subscription=True, class_filter=True, lite_pull=True) == 0x1F
    assert PullSysFlag.LITE_PULL == 0x10
    assert type(pull_sys_flag(commit_offset=True, suspend=False, subscription=False)) is int


def test_message_sys_flag() -> None:
    assert MessageSysFlag.is_dispatched(0) and MessageSysFlag.is_dispatched(MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert not MessageSysFlag.is_dispatched(MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    assert not MessageSysFlag.is_dispatched(MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
    assert MessageSysFlag.transaction_type(0x3C) == 0xC
    assert MessageSysFlag.is_zlib_compressed(0x1) and MessageSysFlag.is_zlib_compressed(0x1 | 0x300)
    assert not MessageSysFlag.is_zlib_compressed(0x1 | 0x100)  # LZ4
    assert not MessageSysFlag.is_zlib_compressed(0x300)  # the type without the COMPRESSED bit
