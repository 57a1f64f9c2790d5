"""``rmq-broker``: run one broker until SIGTERM/SIGINT.

Prints one readiness line on stderr once serving and registered: ``BROKER READY <host:port>``.
"""

from __future__ import annotations

import argparse
import sys

from pocketmq.broker.config import BrokerConfig, BrokerRole, FlushDiskType, format_broker_config, load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.common.config import load_properties
from pocketmq.remoting.process import add_server_arguments, run_main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-broker", description="PocketMQ broker")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style broker .properties file")
    p.add_argument("--role", choices=[r.name for r in BrokerRole], help="brokerRole")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR;ADDR", help="name servers, ';'-separated")
    p.add_argument("--listen-port", type=int, help="listenPort (0 picks a free port)")
    p.add_argument("--listen-host", help="address to bind (default 0.0.0.0)")
    p.add_argument("--broker-ip", help="brokerIP1: the address registered with name servers (a host name is "
                                       "resolved at start)")
    p.add_argument("--broker-ip2", help="brokerIP2: the address slaves replicate from (default: brokerIP1)")
    p.add_argument("--broker-name", help="brokerName")
    p.add_argument("--broker-id", type=int, help="brokerId (0 = master)")
    p.add_argument("--store-dir", help="storePathRootDir")
    p.add_argument("--flush-disk-type", choices=[f.name for f in FlushDiskType], help="flushDiskType")
    add_server_arguments(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    props = load_properties(args.config) if args.config else {}
    return load_broker_config(
        props,
        broker_role=BrokerRole[args.role] if args.role else None,
        namesrv_addr=args.namesrv_addr,
        listen_port=args.listen_port,
        listen_host=args.listen_host,
        broker_ip1=args.broker_ip,
        broker_ip2=args.broker_ip2,
        broker_name=args.broker_name,
        broker_id=args.broker_id,
        store_path_root_dir=args.store_dir,
        flush_disk_type=FlushDiskType[args.flush_disk_type] if args.flush_disk_type else None,
        metrics_port=args.metrics_port,
    )


def main(argv: list[str] | None = None) -> int:
    return run_main("rmq-broker", parse_args(argv), build_config, BrokerController, ready_prefix="BROKER",
                    format_config=format_broker_config)


if __name__ == "__main__":
    sys.exit(main())
