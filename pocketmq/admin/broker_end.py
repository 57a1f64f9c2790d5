"""What a running broker says is safe to export from its commit log: ``GET_BROKER_RUNTIME_INFO``'s flushed offset
(``commitLogFlushedOffset``), or the smaller of it and the best slave acknowledgement (``haPush2SlaveMaxOffset``),
asked of the broker that owns the store being exported (:mod:`pocketmq.admin.export`)."""

from __future__ import annotations

import asyncio
import os

from pocketmq.spark_jobs.manifest import ExportError


async def _runtime_info(addr: str, timeout: float) -> dict[str, str]:
    from pocketmq.remoting.client import RemotingClient
    from pocketmq.remoting.codes import RequestCode, ResponseCode
    from pocketmq.remoting.command import RemotingCommand
    from pocketmq.remoting.errors import PocketMQError
    from pocketmq.remoting.route import KVTable, decode_body

    client = RemotingClient()
    try:
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout)
    except (PocketMQError, OSError, ValueError) as exc:
        raise ExportError(f"{addr}: cannot ask the broker for its flushed offset: {exc}") from None
    finally:
        await client.close()
    if resp.code != ResponseCode.SUCCESS:
        raise ExportError(f"{addr}: GET_BROKER_RUNTIME_INFO answered {resp.code} {resp.remark or ''}".strip())
    return KVTable.from_json_dict(decode_body(resp.body or b"", resp.serialize_type)).table


def broker_end_offset(addr: str, *, consistency: str = "flushed", timeout: float = 5.0,
                      store_dir: str | None = None) -> tuple[int, dict[str, str]]:
    """Ask a running broker how far its commit log is safe: the flushed offset, or (``replicated``) the
    smaller of it and the best slave acknowledgement. Returns the offset and the runtime table.

    With ``store_dir``, a broker that reports its store (PocketMQ's ``storePathRootDir``) must report that one:
    an offset of another broker's log says nothing about these files."""
    table = asyncio.run(_runtime_info(addr, timeout))
    reported = table.get("storePathRootDir")
    if store_dir is not None and reported is not None and not _same_directory(reported, store_dir):
        raise ExportError(f"{addr} runs on the store {reported}, not on {store_dir}")
    flushed = int(table.get("commitLogFlushedOffset", "-1"))
    if flushed < 0:
        raise ExportError(f"{addr}: the broker did not report commitLogFlushedOffset")
    if consistency == "flushed":
        return flushed, table
    acked = int(table.get("haPush2SlaveMaxOffset", "-1"))
    if acked < 0:
        raise ExportError(f"{addr}: no slave acknowledgement reported (is it a master with a slave attached?)")
    return min(flushed, acked), table


def _same_directory(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
