"""``rmq-bench compare``: PocketMQ side by side with NATS JetStream, Redis Streams and RabbitMQ.

Modules: :mod:`workload` (W1-W5, bounded load loops), :mod:`target` (what a broker provides),
:mod:`peers` (the peer servers as local processes), :mod:`nats_load`, :mod:`redis_load`, :mod:`rabbit_load`
and :mod:`pocketmq` (the workloads through each client), :mod:`limits` (the machine's limits),
:mod:`results` (medians, ratios, targets), :mod:`report` (``docs/perf/compare-results.md``), :mod:`runner` (the
order of runs and the server measurements), :mod:`cli` (``add_arguments`` / ``run``).
"""
