"""pocketmq.broker.status: the one table from store statuses to response codes, for puts and for pulls."""

from __future__ import annotations

import pytest

from pocketmq.broker.status import get_status_to_response, put_status_to_response
from pocketmq.remoting.codes import ResponseCode
from pocketmq.store.results import GetMessageResult, GetMessageStatus, PutMessageStatus

S = GetMessageStatus
R = ResponseCode


def test_every_put_status_has_a_code_and_stored_ones_are_the_four_rocketmq_codes() -> None:
    stored = {put_status_to_response(s)[0] for s in PutMessageStatus if s.is_stored}
    assert stored == {R.SUCCESS, R.FLUSH_DISK_TIMEOUT, R.FLUSH_SLAVE_TIMEOUT, R.SLAVE_NOT_AVAILABLE}
    assert put_status_to_response(PutMessageStatus.PUT_OK) == (R.SUCCESS, None)
    # the bound on waiting puts: nothing stored, and not a code the SDK retries at once
    assert put_status_to_response(PutMessageStatus.OS_PAGECACHE_BUSY)[0] == R.SYSTEM_BUSY


@pytest.mark.parametrize(("status", "requested", "is_master", "expected"), [
    (S.FOUND, 3, True, (R.SUCCESS, 7)),
    (S.NO_MATCHED_MESSAGE, 3, True, (R.PULL_RETRY_IMMEDIATELY, 7)),
    (S.MESSAGE_WAS_REMOVING, 3, False, (R.PULL_RETRY_IMMEDIATELY, 7)),
    (S.OFFSET_OVERFLOW_ONE, 3, True, (R.PULL_NOT_FOUND, 7)),
    (S.OFFSET_FOUND_NULL, 3, False, (R.PULL_NOT_FOUND, 7)),
    (S.NO_MESSAGE_IN_QUEUE, 0, False, (R.PULL_NOT_FOUND, 7)),
    (S.NO_MESSAGE_IN_QUEUE, 3, True, (R.PULL_OFFSET_MOVED, 7)),
    (S.NO_MATCHED_LOGIC_QUEUE, 3, True, (R.PULL_OFFSET_MOVED, 7)),
    (S.OFFSET_TOO_SMALL, 3, True, (R.PULL_OFFSET_MOVED, 7)),
    (S.OFFSET_OVERFLOW_BADLY, 3, True, (R.PULL_OFFSET_MOVED, 7)),
    # a slave does not move a consumer's offset: retry where it asked
    (S.OFFSET_TOO_SMALL, 3, False, (R.PULL_RETRY_IMMEDIATELY, 3)),
    (S.NO_MESSAGE_IN_QUEUE, 3, False, (R.PULL_RETRY_IMMEDIATELY, 3)),
])
def test_get_status_to_pull_code(status: GetMessageStatus, requested: int, is_master: bool,
                                 expected: tuple[int, int]) -> None:
    assert get_status_to_response(GetMessageResult(status, 7, 0, 10), requested, is_master) == expected
