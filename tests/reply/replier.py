"""A replier in a process of its own, for the request-reply tests: a push consumer of ``topic`` that answers every
request with ``re:<body>|q<queue id>|<pid>`` through a producer of its own, until SIGTERM.

Usage: ``python -m tests.reply.replier NAMESRV TOPIC GROUP``; prints ``REPLIER READY <client id>`` on stderr once
consuming.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from pocketmq.client import MessageExt, Producer, PushConsumer, create_reply_message

READY = "REPLIER READY"


async def main(namesrv: str, topic: str, group: str) -> None:
    instance = f"replier-{os.getpid()}"
    producer = Producer(f"{group}-PG", namesrv_addr=namesrv, instance_name=instance)

    async def handle(msg: MessageExt) -> None:
        body = b"re:%s|q%d|%d" % (msg.body, msg.queue_id, os.getpid())
        await producer.send(create_reply_message(msg, body))

    consumer = PushConsumer(group, namesrv_addr=namesrv, instance_name=instance, rebalance_interval=1.0,
                            poll_name_server_interval=1.0)
    consumer.subscribe(topic, "*")
    consumer.register_handler(handle)
    await producer.start()
    await consumer.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"{READY} {producer.instance.client_id}", file=sys.stderr, flush=True)
    await stop.wait()
    await consumer.shutdown()
    await producer.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
