"""``rmq-admin`` controller commands when the leader's own address does not work from the admin's host (compose:
the controllers name each other by container name, the host reaches them by published ports): the request goes
to the given address whose controller says it is the leader. The controllers here are stand-ins answering the
three requests involved; the real layout is checked by hand against ``docker compose --profile controller``
(docs/docker.md)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.commands_controller import sync_state_data
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand

GIVEN = ["127.0.0.1:9886", "127.0.0.1:9887", "127.0.0.1:9888"]
LEADER_NAME = "ctl-namesrv-2:9888"  # what the controllers call their leader
TABLE = b'{"replicasInfoTable": {"broker-a": {"masterBrokerId": 1}}}'


class Controllers:
    """Three controllers behind the given addresses; the third leads; ``LEADER_NAME`` cannot be reached."""

    def __init__(self, leader: str | None = GIVEN[2]) -> None:
        self.leader = leader
        self.calls: list[tuple[str, int]] = []

    async def call(self, addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None,
                   *, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        self.calls.append((addr, code))
        if addr not in GIVEN:
            raise AdminError(f"{addr}: RemotingConnectError: cannot connect to {addr}: Name or service not known")
        request = RemotingCommand.request(code, {})
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return request.response(ResponseCode.SUCCESS, ext_fields={
                "controllerLeaderAddress": LEADER_NAME, "isLeader": "true" if addr == self.leader else "false"})
        if addr != self.leader:
            raise AdminError(f"{addr} answered code {ResponseCode.CONTROLLER_NOT_LEADER} to request {code}: no")
        return request.response(ResponseCode.SUCCESS, body=TABLE)

    @staticmethod
    def body(resp: RemotingCommand) -> Any:
        return AdminClient.body(resp)


def test_the_leader_is_found_among_the_given_addresses() -> None:
    controllers = Controllers()
    table = asyncio.run(sync_state_data(cast(AdminClient, controllers), GIVEN, []))
    assert table == {"broker-a": {"masterBrokerId": 1}}
    assert (LEADER_NAME, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA) in controllers.calls  # tried first
    assert controllers.calls[-1] == (GIVEN[2], RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)


def test_a_leader_asked_directly_is_used_by_the_address_given() -> None:
    controllers = Controllers(leader=GIVEN[0])
    asyncio.run(sync_state_data(cast(AdminClient, controllers), GIVEN, []))
    assert controllers.calls == [(GIVEN[0], RequestCode.CONTROLLER_GET_METADATA_INFO),
                                 (GIVEN[0], RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)]


def test_no_reachable_leader_says_what_to_do() -> None:
    controllers = Controllers(leader=None)
    with pytest.raises(AdminError, match="give its address with -a"):
        asyncio.run(sync_state_data(cast(AdminClient, controllers), GIVEN, []))
