"""Response codes by name: where RocketMQ 5 gave a 4.x code a second meaning, errors name the one PocketMQ answers."""

from __future__ import annotations

from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import ResponseError


def test_pop_long_polling_codes_are_named_by_their_5x_meaning() -> None:
    assert ResponseCode(209).name == "POLLING_FULL" and ResponseCode(210).name == "POLLING_TIMEOUT"
    assert str(ResponseError(210, "NO_MESSAGE_IN_QUEUE", "127.0.0.1:10911")) == (
        "POLLING_TIMEOUT(210) from 127.0.0.1:10911: NO_MESSAGE_IN_QUEUE")
    # the 4.x names still resolve, to the same codes
    assert ResponseCode["UPDATE_AND_CREATE_ACL_CONFIG_FAILED"] is ResponseCode.POLLING_FULL
    assert ResponseCode["DELETE_ACL_CONFIG_FAILED"] is ResponseCode.POLLING_TIMEOUT
    assert ResponseCode(211).name == "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED"
