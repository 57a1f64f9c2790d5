"""``rmq-console``: a web console for a PocketMQ (or RocketMQ 4.x) cluster, served from this process's event loop.

A tool on top of everything else, like :mod:`pocketmq.admin`, whose :class:`~pocketmq.admin.api.AdminClient` it
uses for every request to name servers and brokers. aiohttp serves server-rendered Jinja2 pages with a little
vendored JavaScript (htmx, uPlot) shipped as package data. See ``docs/console.md`` (use) and
``docs/design/console.md`` (why it is built this way).
"""
