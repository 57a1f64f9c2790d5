"""``rmq-admin`` controller-mode commands, with mqadmin's names (RocketMQ 5): ``getControllerMetaData`` (who leads the
controllers), ``getSyncStateSet`` (each group's master, epochs and in-sync replicas), ``getBrokerEpoch`` (each
broker's epoch file) and ``electMaster`` (a planned switchover: the old master stops taking writes and waits until
its in-sync replicas hold everything, then the chosen broker takes over; producers retry the refused sends on
another broker, so none fails and none is lost).

``-a`` names the controllers (``host:port;...``, default: the name servers, which carry them in the
``2m-2s-controller`` preset); requests that need the leader are sent where the answering controller points.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError, split_namesrv
from pocketmq.admin.output import Command, emit, key_values, table
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.controller_headers import ElectMasterRequestHeader, epoch_cache_from_json
from pocketmq.remoting.route import encode_body

__all__ = ["controller_metadata", "elect_master", "register", "sync_state_data"]


def _controllers(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    return split_namesrv(args.controller) if getattr(args, "controller", None) else list(admin.namesrv_addrs)


async def controller_metadata(admin: AdminClient, controllers: list[str]) -> dict[str, str]:
    """The first controller's answer to CONTROLLER_GET_METADATA_INFO (it names the leader)."""
    errors = []
    for address in controllers:
        try:
            response = await admin.call(address, RequestCode.CONTROLLER_GET_METADATA_INFO)
        except AdminError as exc:
            errors.append(str(exc))
            continue
        return {"controller": address, **(response.ext_fields or {})}
    raise AdminError("no controller answered: " + "; ".join(errors))


async def _leader_call(admin: AdminClient, controllers: list[str], code: int, fields: dict[str, str],
                       body: bytes | None = None, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    meta = await controller_metadata(admin, controllers)
    if meta.get("isLeader") == "true":  # reached by the address given, which works from here
        return await admin.call(meta["controller"], code, fields, body, ok=ok)
    leader = meta.get("controllerLeaderAddress")
    if not leader:
        raise AdminError(f"the controllers have no leader now (asked {meta['controller']})")
    try:
        return await admin.call(leader, code, fields, body, ok=ok)
    except AdminError as exc:
        if "answered code" in str(exc):
            raise
        unreachable = exc
    # The leader's own name may not resolve here (a container's name seen from the host): the addresses given
    # are the controllers too, and the leader among them says so.
    for address in controllers:
        if address != meta["controller"]:
            with contextlib.suppress(AdminError):
                if (await controller_metadata(admin, [address])).get("isLeader") == "true":
                    return await admin.call(address, code, fields, body, ok=ok)
    raise AdminError(f"the controller leader {leader} cannot be reached from here ({unreachable}), and none of "
                     f"{';'.join(controllers)} is the leader; give its address with -a")


async def sync_state_data(admin: AdminClient, controllers: list[str], names: list[str]) -> dict[str, Any]:
    """CONTROLLER_GET_SYNC_STATE_DATA: brokerName -> its replicas info (every group for an empty list)."""
    response = await _leader_call(admin, controllers, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {},
                                  encode_body(names))
    table_ = (admin.body(response) or {}).get("replicasInfoTable") or {}
    return table_ if isinstance(table_, dict) else {}


async def elect_master(admin: AdminClient, controllers: list[str], cluster: str, broker_name: str,
                       broker_id: int) -> dict[str, str]:
    """CONTROLLER_ELECT_MASTER designating ``broker_id`` (a planned switchover); the new master's header."""
    header = ElectMasterRequestHeader(cluster, broker_name, broker_id, designate_elect=True)
    response = await _leader_call(admin, controllers, RequestCode.CONTROLLER_ELECT_MASTER, header.to_fields(),
                                  ok=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST))
    return {"code": ResponseCode(response.code).name, **(response.ext_fields or {})}


async def broker_epochs(admin: AdminClient, broker_addr: str) -> dict[str, Any]:
    response = await admin.call(broker_addr, RequestCode.GET_BROKER_EPOCH_CACHE)
    data = admin.body(response)
    entries, max_offset = epoch_cache_from_json(data)
    return {"brokerAddr": broker_addr, "clusterName": data.get("clusterName"), "brokerName": data.get("brokerName"),
            "brokerId": data.get("brokerId"), "maxOffset": max_offset,
            "epochs": [e.to_json_dict() for e in entries]}


# ================================================================================================== commands


async def cmd_get_controller_metadata(admin: AdminClient, args: argparse.Namespace) -> None:
    meta = await controller_metadata(admin, _controllers(admin, args))
    emit(args, meta, key_values(meta))


async def cmd_get_sync_state_set(admin: AdminClient, args: argparse.Namespace) -> None:
    names = [args.broker_name] if args.broker_name else []
    data = await sync_state_data(admin, _controllers(admin, args), names)
    rows = []
    for name, info in sorted(data.items()):
        for kind in ("inSyncReplicas", "notInSyncReplicas"):
            for replica in info.get(kind) or []:
                rows.append([name, info.get("masterBrokerId"), info.get("masterEpoch"), info.get("syncStateSetEpoch"),
                             replica.get("brokerId"), replica.get("brokerAddress"), kind == "inSyncReplicas",
                             replica.get("alive")])
    emit(args, data, table(["#Broker", "#MasterId", "#MasterEpoch", "#SyncStateSetEpoch", "#ReplicaId", "#Addr",
                            "#InSync", "#Alive"], rows))


async def cmd_get_broker_epoch(admin: AdminClient, args: argparse.Namespace) -> None:
    if args.broker:
        addrs = [args.broker]
    else:
        addrs = [b.addr for b in await admin.brokers(args.cluster)
                 if args.broker_name is None or b.broker_name == args.broker_name]
    data = [await broker_epochs(admin, a) for a in addrs]
    lines = []
    for d in data:
        lines.append(f"#brokerName {d['brokerName']}  #brokerId {d['brokerId']}  #brokerAddr {d['brokerAddr']}  "
                     f"#maxOffset {d['maxOffset']}")
        lines += [f"  #epoch {e['epoch']}  #startOffset {e['startOffset']}  #endOffset {e['endOffset']}"
                  for e in d["epochs"]]
    emit(args, data, "\n".join(lines))


async def cmd_elect_master(admin: AdminClient, args: argparse.Namespace) -> None:
    result = await elect_master(admin, _controllers(admin, args), args.cluster, args.broker_name, args.broker_id)
    emit(args, result, key_values(result))


def register(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    def controller_flag(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-a", "--controller", help="controllers, ';'-separated (default: the name servers)")

    s = sub.add_parser("getControllerMetaData", parents=[common], help="the controllers' group and leader")
    controller_flag(s)
    s = sub.add_parser("getSyncStateSet", parents=[common], help="per group: master, epochs, in-sync replicas")
    controller_flag(s)
    s.add_argument("-b", "--broker-name", help="one broker group (default: every group)")
    s = sub.add_parser("getBrokerEpoch", parents=[common], help="each broker's epoch file")
    where = s.add_mutually_exclusive_group()
    where.add_argument("-b", "--broker-name", help="every broker of this group")
    where.add_argument("--broker", help="one broker address")
    s.add_argument("-c", "--cluster")
    s = sub.add_parser("electMaster", parents=[common], help="a planned switchover to one broker of a group")
    controller_flag(s)
    s.add_argument("-c", "--cluster", default="DefaultCluster")
    s.add_argument("-bn", "--broker-name", required=True)
    s.add_argument("-b", "--broker-id", type=int, required=True, help="the replica to make master")
    return {"getControllerMetaData": cmd_get_controller_metadata, "getSyncStateSet": cmd_get_sync_state_set,
            "getBrokerEpoch": cmd_get_broker_epoch, "electMaster": cmd_elect_master}
