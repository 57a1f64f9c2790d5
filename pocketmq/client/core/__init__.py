"""What producers and consumers share: the client instance and its routes.

* :mod:`pocketmq.client.core.instance` — ``MQClientInstance``: connections, routes, heartbeats, members;
* :mod:`pocketmq.client.core.route_table` — the routes held and the broker tables derived from them;
* :mod:`pocketmq.client.core.route_refresher` — the one route fetcher (single flight, sticky name server);
* :mod:`pocketmq.client.core.member` — the lifecycle every producer and consumer follows;
* :mod:`pocketmq.client.core.config` — the options every member takes, and the instance-sharing key;
* :mod:`pocketmq.client.core.errors` — the client's exceptions on top of :mod:`pocketmq.remoting.errors`;
* :mod:`pocketmq.client.core.uniq` — ``UNIQ_KEY`` message ids and client ids;
* :mod:`pocketmq.client.core.compression` — zlib bodies and the sysFlag bit.
"""
