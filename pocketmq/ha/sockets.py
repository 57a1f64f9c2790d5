"""Socket helpers both ends of a replication link use (the master's :class:`pocketmq.ha.connection.HAConnection` and
the slave's :class:`pocketmq.ha.client.HAClient`): naming the peer of a transport and turning Nagle off."""

from __future__ import annotations

import asyncio
import contextlib
import socket


def peer_name(transport: asyncio.BaseTransport) -> str:
    """``host:port`` of the other end of a socket transport."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Disable Nagle: acknowledgements are 8 bytes and a SYNC_MASTER put waits for each one; transfers are
    written whole, so coalescing them gains nothing."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
