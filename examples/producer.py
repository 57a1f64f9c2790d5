"""Send a few messages: ``python examples/producer.py [--namesrv 127.0.0.1:9876] [--topic Orders] [--count 10]``."""

import argparse
import asyncio

from pocketmq import Message, Producer


async def main(namesrv: str, topic: str, count: int) -> None:
    async with Producer("example-producer", namesrv_addr=namesrv) as producer:
        for i in range(count):
            message = Message(topic, f"order {i}".encode(), tags="created", keys=f"order-{i}")
            result = await producer.send(message)
            print(result.status.name, result.msg_id, result.message_queue.broker_name, result.queue_offset)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="name servers, ';'-separated")
    parser.add_argument("--topic", default="Orders")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.namesrv, args.topic, args.count))
