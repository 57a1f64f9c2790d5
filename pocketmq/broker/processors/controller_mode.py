"""A broker's handlers of controller mode: NOTIFY_BROKER_ROLE_CHANGED (1008, from the controller leader),
GET_BROKER_EPOCH_CACHE (1007, from tools: the epoch file) and CONTROLLER_FENCE_MASTER (the controller's first step of
a planned switchover)."""

from __future__ import annotations

from pocketmq.broker.controller_api import GroupState
from pocketmq.broker.replicas_manager import ReplicasManager
from pocketmq.common.logs import get_logger
from pocketmq.ha.epoch_file import EpochFileCache
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.controller_headers import LONG_MAX, EpochEntry, epoch_cache_to_json
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.route import BodyDecodeError, encode_body

__all__ = ["ControllerModeProcessor"]

log = get_logger("pocketmq.broker.processors.controller_mode")


class ControllerModeProcessor:
    def __init__(self, replicas: ReplicasManager, epochs: EpochFileCache, *, cluster: str, broker_name: str) -> None:
        self.replicas = replicas
        self.epochs = epochs
        self.cluster = cluster
        self.broker_name = broker_name

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: self.notify_role_changed,
            RequestCode.GET_BROKER_EPOCH_CACHE: self.get_epoch_cache,
            RequestCode.CONTROLLER_FENCE_MASTER: self.fence_master,
        }

    async def notify_role_changed(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        try:
            state = GroupState.from_fields(dict(req.ext_fields or {}), req.body)
        except (InvalidHeaderError, BodyDecodeError, ValueError) as exc:
            log.warning("bad_role_notification", error=str(exc))
            return None if req.is_oneway else req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if self.replicas.registered:
            await self.replicas.on_state(state)
        return None if req.is_oneway else req.response(ResponseCode.SUCCESS)

    def get_epoch_cache(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        entries = self.epochs.entries
        ends = [e.start_offset for e in entries[1:]] + [LONG_MAX] if entries else []
        listed = [EpochEntry(e.epoch, e.start_offset, end) for e, end in zip(entries, ends, strict=True)]
        body = epoch_cache_to_json(self.cluster, self.broker_name, self.replicas.broker_id, listed,
                                   self.replicas.host.max_phy_offset())
        return req.response(ResponseCode.SUCCESS, body=encode_body(body, req.serialize_type))

    async def fence_master(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            epoch = int((req.ext_fields or {})["masterEpoch"])
        except (KeyError, ValueError):
            return req.response(ResponseCode.SYSTEM_ERROR, "masterEpoch is required")
        problem = await self.replicas.fence_for_switchover(epoch)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        return req.response(ResponseCode.SUCCESS, ext_fields={"maxOffset": str(self.replicas.host.max_phy_offset())})
