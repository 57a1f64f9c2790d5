"""The producer: :class:`~pocketmq.client.producer.producer.Producer` and what it is made of.

* :mod:`pocketmq.client.producer.producer` — ``Producer``: lifecycle, the four ways to send, the send window;
* :mod:`pocketmq.client.producer.config` — ``ProducerConfig``, its keyword arguments and defaults;
* :mod:`pocketmq.client.producer.outgoing` — a message validated and encoded once, and the request of each attempt;
* :mod:`pocketmq.client.producer.headers` — the send request header templates;
* :mod:`pocketmq.client.producer.send_loop` — the attempts of one send: queue selection, retries, budgets;
* :mod:`pocketmq.client.producer.accumulator` — auto-batching of concurrent sends;
* :mod:`pocketmq.client.producer.fault` — latency fault tolerance (broker isolation) and the queue selection using it;
* :mod:`pocketmq.client.producer.topic_publish` — a topic's writable queues, from its route, and round-robin over them.
"""
