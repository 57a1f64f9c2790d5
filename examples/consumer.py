"""Receive messages until ``--count`` have arrived (or ``--timeout`` seconds pass):
``python examples/consumer.py [--namesrv 127.0.0.1:9876] [--topic Orders] [--count 10]``."""

import argparse
import asyncio

from pocketmq import ConsumeFromWhere, ConsumeResult, MessageExt, PushConsumer


async def main(namesrv: str, topic: str, count: int, timeout: float) -> None:
    received = 0
    enough = asyncio.Event()

    async def handle(msg: MessageExt) -> ConsumeResult:
        nonlocal received
        print(msg.topic, msg.tags, msg.keys, msg.body.decode(), flush=True)
        received += 1
        if received >= count:
            enough.set()
        return ConsumeResult.SUCCESS  # RECONSUME_LATER (or an exception): delivered again later

    consumer = PushConsumer("example-consumer", namesrv_addr=namesrv,
                            consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic, "created || paid")  # a tag expression; "*" takes every message
    consumer.register_handler(handle)
    async with consumer:  # started here, shut down (offsets committed) on the way out
        await asyncio.wait_for(enough.wait(), timeout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="name servers, ';'-separated")
    parser.add_argument("--topic", default="Orders")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    asyncio.run(main(args.namesrv, args.topic, args.count, args.timeout))
