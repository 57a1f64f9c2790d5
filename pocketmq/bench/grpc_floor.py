"""What ``grpc.aio`` itself costs per call: a server with the proxy's options on uvloop whose SendMessage parses the
request and answers a fixed OK, doing nothing else. ``rmq-bench grpc`` drives it with the same bare client and
load as the proxy; the CPU it uses per call is the floor under any proxy built on ``grpc.aio``.

    python -m pocketmq.bench.grpc_floor    prints ``FLOOR READY 127.0.0.1:<port>`` on stderr, serves until killed
"""

from __future__ import annotations

import sys
from typing import Any

import grpc
import uvloop
from grpc import aio

from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.server import SERVER_OPTIONS
from pocketmq.proxy.service import SERVICE_NAME


async def _serve() -> None:
    answer = spb.SendMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"),
                                     entries=[spb.SendResultEntry(status=pb.Status(code=pb.Code.OK, message="OK"),
                                                                  message_id="FLOOR", offset=1)])

    async def send(request: spb.SendMessageRequest, context: Any) -> spb.SendMessageResponse:
        return answer

    handler = grpc.method_handlers_generic_handler(SERVICE_NAME, {"SendMessage": grpc.unary_unary_rpc_method_handler(
        send, request_deserializer=spb.SendMessageRequest.FromString,
        response_serializer=spb.SendMessageResponse.SerializeToString)})
    server = aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sys.stderr.write(f"FLOOR READY 127.0.0.1:{port}\n")
    sys.stderr.flush()
    await server.wait_for_termination()


if __name__ == "__main__":
    uvloop.run(_serve())
