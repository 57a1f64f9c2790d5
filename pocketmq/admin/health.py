"""``python -m pocketmq.admin.health [--broker] HOST:PORT``: a health check that asks the server a question.

A port that accepts connections says little (a broker binds before it has recovered its store); this check
sends one request and waits for its answer: ``GET_BROKER_CLUSTER_INFO`` to a name server,
``GET_BROKER_RUNTIME_INFO`` to a broker (``--broker``). Exit status 0 when the answer is ``SUCCESS`` within
``--timeout`` seconds, 1 otherwise with the reason on stderr: what container engines (Docker's
``HEALTHCHECK``, Compose's ``healthcheck``) and Kubernetes' exec probes expect.

It runs every few seconds in every container, so it uses a blocking socket and the sans-I/O frame codec:
no event loop, no SDK, nothing imported beyond the wire format.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import ProtocolError
from pocketmq.remoting.frame import FrameDecoder, encode_frame

#: An answer larger than this is not what either question returns: stop reading rather than buffer it.
MAX_ANSWER = 1024 * 1024


class Unhealthy(Exception):
    """The server did not answer the question with SUCCESS."""


def ask(address: str, code: int, timeout: float) -> RemotingCommand:
    """Send one request with ``code`` to ``address`` (``host:port``) and return its response; :class:`Unhealthy`
    when none comes within ``timeout`` seconds."""
    host, _, port = address.rpartition(":")
    request = RemotingCommand.request(code)
    deadline = time.monotonic() + timeout
    decoder = FrameDecoder(MAX_ANSWER)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout) as sock:
            sock.sendall(encode_frame(request))
            while True:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = sock.recv(65536)
                if not chunk:
                    raise Unhealthy(f"{address} closed the connection without answering")
                for command in decoder.feed(chunk):
                    if command.opaque == request.opaque:
                        return command
    except (OSError, ValueError, ProtocolError) as exc:
        raise Unhealthy(f"{address}: {exc}") from None


def check(address: str, broker: bool, timeout: float) -> None:
    """:class:`Unhealthy` unless the server at ``address`` answers its question with SUCCESS."""
    code = RequestCode.GET_BROKER_RUNTIME_INFO if broker else RequestCode.GET_BROKER_CLUSTER_INFO
    response = ask(address, code, timeout)
    if response.code != ResponseCode.SUCCESS:
        raise Unhealthy(f"{address} answered {code.name} with code {response.code}: {response.remark}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pocketmq.admin.health", description=__doc__.splitlines()[0])
    p.add_argument("address", metavar="HOST:PORT", help="the server's address")
    p.add_argument("--broker", action="store_true", help="the server is a broker (default: a name server)")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer (default 3)")
    args = p.parse_args(argv)
    try:
        check(args.address, args.broker, args.timeout)
    except Unhealthy as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
