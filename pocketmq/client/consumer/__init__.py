"""The consumers: :class:`~client.consumer.push.PushConsumer` and :class:`~pocketmq.client.consumer.pull.PullConsumer`,
and what they are made of.

* :mod:`pocketmq.client.consumer.push` — ``PushConsumer``: lifecycle, subscriptions, handlers, retries;
* :mod:`pocketmq.client.consumer.pull` — ``PullConsumer``: the application pulls queues and commits offsets;
* :mod:`pocketmq.client.consumer.config` — ``ConsumerConfig`` and ``PullConsumerConfig``, their keyword arguments;
* :mod:`pocketmq.client.consumer.rebalance` — the rebalance service: which queues a push consumer reads, orderly locks;
* :mod:`pocketmq.client.consumer.allocate` — the allocation strategies (average, by circle), as pure functions;
* :mod:`pocketmq.client.consumer.pull_service` — the pull service: a long-polling loop per assigned queue;
* :mod:`pocketmq.client.consumer.process_queue` — pulled-but-unacknowledged messages of one queue, flow control;
* :mod:`pocketmq.client.consumer.consume_service` — how handlers run: concurrently, or orderly per queue;
* :mod:`pocketmq.client.consumer.offset_store` — offsets held, the local offsets file, and their commits;
* :mod:`pocketmq.client.consumer.broker_api` — a consumer's requests to brokers, and which member of a group to ask.
"""
