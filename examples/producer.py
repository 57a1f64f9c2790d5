"""Send a few messages: python examples/producer.py [NAMESRV [TOPIC [COUNT]]]"""
import asyncio
import sys

from pocketmq import Message, Producer


async def main(namesrv: str, topic: str, count: int) -> None:
    async with Producer("example-producer", namesrv_addr=namesrv) as producer:
        for i in range(count):
            message = Message(topic, f"order {i}".encode(), tags="created", keys=f"order-{i}")
            result = await producer.send(message)  # retried on another broker if one fails
            print(result.status.name, result.msg_id, result.message_queue.broker_name, result.queue_offset)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0] if args else "127.0.0.1:9876", args[1] if len(args) > 1 else "Orders",
                     int(args[2]) if len(args) > 2 else 10))
