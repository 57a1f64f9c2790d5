"""``rmq-console``: the web console, and ``rmq-console adduser`` to manage its users file.

    rmq-console -n 127.0.0.1:9876 --users-file console-users --port 8080
    rmq-console --with-namesrv --namesrv-port 9876 --users-file console-users   # one process: name server + console
    rmq-console adduser --users-file console-users alice --role admin          # asks for the password

Prints ``CONSOLE READY host:port`` on stderr once it serves. ACL keys come from the ``.properties`` file
(``accessKey``/``secretKey``) or ``POCKETMQ_ACCESS_KEY``/``POCKETMQ_SECRET_KEY``, never from a flag (a flag would
show the secret in the process list).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from pocketmq.common.config import ConfigError, load_config, load_properties
from pocketmq.console.config import ROLES, ConsoleConfig, describe
from pocketmq.console.server import ConsoleServer
from pocketmq.console.users import UsersFileError, add_user
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.remoting.process import add_server_arguments, run_main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-console", description="PocketMQ web console")
    p.add_argument("-n", "--namesrv-addr", help="name servers, ';'-separated (default $NAMESRV_ADDR or 127.0.0.1:9876)")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to bind; 0 picks a free one (default 8080)")
    p.add_argument("--base-path", help="serve the pages under this path, e.g. /console")
    p.add_argument("--users-file", help="name:role:hash lines (rmq-console adduser)")
    p.add_argument("--no-login", action="store_true", help="no login: every visitor is an admin (a laptop only)")
    p.add_argument("--trusted-proxies", help="comma-separated proxy addresses whose X-Forwarded-* are believed")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file of console keys")
    p.add_argument("--with-namesrv", action="store_true", help="also run a name server in this process")
    p.add_argument("--namesrv-port", type=int, default=9876, help="the embedded name server's port (0 picks one)")
    p.add_argument("--kv-config-path", help="the embedded name server's KV config file")
    add_server_arguments(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> ConsoleConfig:
    props = load_properties(args.config) if args.config else {}
    env_ak, env_sk = os.environ.get("POCKETMQ_ACCESS_KEY"), os.environ.get("POCKETMQ_SECRET_KEY")
    return load_config(
        ConsoleConfig, props,
        namesrv_addr=args.namesrv_addr or (None if "namesrvAddr" in props else os.environ.get("NAMESRV_ADDR")),
        listen_host=args.listen, listen_port=args.port, base_path=args.base_path, users_file=args.users_file,
        login_required=False if args.no_login else None, trusted_proxies=args.trusted_proxies,
        access_key=env_ak if env_ak and "accessKey" not in props else None,
        secret_key=env_sk if env_sk and "secretKey" not in props else None)


def namesrv_config(args: argparse.Namespace, config: ConsoleConfig) -> NamesrvConfig | None:
    if not args.with_namesrv:
        return None
    return load_config(NamesrvConfig, {}, listen_host=config.listen_host, listen_port=args.namesrv_port,
                       kv_config_path=args.kv_config_path)


def adduser_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rmq-console adduser", description="add a console user or change one")
    p.add_argument("--users-file", required=True)
    p.add_argument("name")
    p.add_argument("--role", choices=ROLES, default="viewer")
    p.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    args = p.parse_args(argv)
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if password != getpass.getpass("again: "):
            print("rmq-console adduser: the two passwords differ", file=sys.stderr)
            return 2
    try:
        new = add_user(args.users_file, args.name, args.role, password)
    except UsersFileError as exc:
        print(f"rmq-console adduser: {exc}", file=sys.stderr)
        return 2
    print(f"{'added' if new else 'updated'} {args.name} ({args.role}) in {args.users_file}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["adduser"]:
        return adduser_main(argv[1:])
    args = parse_args(argv)
    holder: dict[str, NamesrvConfig | None] = {}

    def build(parsed: argparse.Namespace) -> ConsoleConfig:
        config = build_config(parsed)
        holder["namesrv"] = namesrv_config(parsed, config)
        return config

    try:
        return run_main("rmq-console", args, build, lambda c: ConsoleServer(c, namesrv=holder.get("namesrv")),
                        ready_prefix="CONSOLE", format_config=describe)
    except ConfigError as exc:
        print(f"rmq-console: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
