"""``rmq-bench``: PocketMQ's benchmarks, one sub-command per workload (never run by the tests)."""

from __future__ import annotations

import argparse
import importlib
import sys

#: sub-command -> module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
WORKLOADS = {
    "store": ("pocketmq.bench.store_bench", "message store appends: ASYNC/SYNC flush, single and batch"),
    "consume": ("pocketmq.bench.consume_bench", "push-consumer backlog TPS and end-to-end latency under a steady load"),
    "ha": ("pocketmq.bench.ha_bench", "SYNC_MASTER beside ASYNC_MASTER with a slave: TPS, latency, replication lag"),
    "filter": ("pocketmq.bench.filter_bench", "SQL92 filter cost per message: a backlog pulled with and without one"),
    "acl": ("pocketmq.bench.acl_bench", "ACL signing cost per request: SDK signature, broker check, sequential sends"),
    "produce": ("pocketmq.bench.produce_bench",
                "producer throughput and latency through the SDK: sync/async/oneway/batch"),
    "tx": ("pocketmq.bench.tx_bench", "transactional sends beside plain ones, and the latency a commit adds"),
    "spark": ("pocketmq.bench.spark_bench",
              "Spark commit-log reader rows/s beside a plain Python scan, and the job end to end"),
    "failover": ("pocketmq.bench.failover_bench",
                 "controller mode: SIGKILL/SIGSTOP of a master to the first SEND_OK on the new one, over many rounds"),
    "pop-timer": ("pocketmq.bench.pop_timer_bench",
                  "RocketMQ 5: POP receive+ack beside the push consumer (W4), timer lateness, RSS of pending timers"),
    "grpc": ("pocketmq.bench.grpc_bench",
             "the gRPC proxy driven by the official RocketMQ 5 client: lone-send latency beside remoting, CPU/msg"),
    "console": ("pocketmq.bench.console_bench",
                "the console's list pages with thousands of topics and groups, and its dashboard in chromium"),
    "compare": ("pocketmq.bench.compare.cli",
                "PocketMQ beside NATS JetStream, Redis Streams and RabbitMQ; writes docs/perf/compare-results.md"),
    "reply": ("pocketmq.bench.reply_bench", "request-reply round trip through a live consumer beside W3's lone send"),
    "lite-pull": ("pocketmq.bench.lite_pull_bench", "LitePullConsumer.poll reading a backlog beside the push W4"),
    "scale": ("pocketmq.bench.scale_bench",
              "thousands of topics, groups, queues and clients: growth curves of latency, memory, files, CPU"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmq-bench", description="PocketMQ benchmarks")
    sub = parser.add_subparsers(dest="workload", required=True)
    modules = {}
    for name, (module_name, help_text) in WORKLOADS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    return int(modules[args.workload].run(args))


if __name__ == "__main__":
    sys.exit(main())
