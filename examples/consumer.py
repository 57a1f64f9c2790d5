"""Receive messages until COUNT have come: python examples/consumer.py [NAMESRV [TOPIC [COUNT]]]"""
import asyncio
import sys

from pocketmq import ConsumeFromWhere, ConsumeResult, MessageExt, PushConsumer


async def main(namesrv: str, topic: str, count: int) -> None:
    received: list[str] = []
    enough = asyncio.Event()

    async def handle(msg: MessageExt) -> ConsumeResult:
        print(msg.topic, msg.tags, msg.keys, msg.body.decode(), flush=True)
        received.append(msg.msg_id)
        if len(received) >= count:
            enough.set()
        return ConsumeResult.SUCCESS  # RECONSUME_LATER (or an exception): delivered again later

    consumer = PushConsumer("example-consumer", namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic, "created || paid")  # a tag expression; "*" takes every message
    consumer.register_handler(handle)
    async with consumer:  # started here; shut down, offsets committed, on the way out
        await asyncio.wait_for(enough.wait(), timeout=60)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0] if args else "127.0.0.1:9876", args[1] if len(args) > 1 else "Orders",
                     int(args[2]) if len(args) > 2 else 10))
