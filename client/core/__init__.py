"""What producers and consumers share: the client instance and its routes.

* :mod:`client.core.instance` — ``MQClientInstance``: connections, routes, heartbeats, members;
* :mod:`client.core.route_table` — the routes held and the broker tables derived from them;
* :mod:`client.core.route_refresher` — the one route fetcher (single flight, sticky name server);
* :mod:`client.core.member` — the lifecycle every producer and consumer follows;
* :mod:`client.core.config` — the options every member takes, and the instance-sharing key;
* :mod:`client.core.errors` — the client's exceptions on top of :mod:`remoting.errors`;
* :mod:`client.core.uniq` — ``UNIQ_KEY`` message ids and client ids;
* :mod:`client.core.compression` — zlib bodies and the sysFlag bit.
"""
