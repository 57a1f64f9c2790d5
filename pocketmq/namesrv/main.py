"""``rmq-namesrv``: run a name server until SIGTERM or SIGINT.

Prints exactly one readiness line on stderr once listening, ``NAMESRV READY <host>:<port>``, so that
scripts and tests can start it with ``--port 0`` and read the bound address.

With ``enableControllerInNamesrv=true`` the same file's controller keys (``controllerDLegerPeers``...) configure the
controller it carries (:mod:`pocketmq.controller`); a controller's port is fixed by its peer address, so such a name
server listens there.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass

from pocketmq.common.config import ConfigError, config_key, format_config, load_config, load_properties
from pocketmq.controller.config import ControllerConfig, controller_keys
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.process import add_server_arguments, run_main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-namesrv", description="PocketMQ name server")
    p.add_argument("--listen", metavar="HOST", help="address to bind (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="port to bind; 0 picks a free one (default 9876)")
    p.add_argument("-c", "--config", metavar="FILE", help="RocketMQ-style .properties file")
    p.add_argument("--kv-config-path", metavar="FILE", help="where KV config is persisted")
    p.add_argument("--controller-peers", metavar="ID-HOST:PORT;...", help="controllerDLegerPeers (with "
                   "enableControllerInNamesrv=true in the file)")
    p.add_argument("--controller-self-id", metavar="ID", help="controllerDLegerSelfId")
    p.add_argument("--controller-store-path", metavar="DIR", help="controllerStorePath")
    add_server_arguments(p)
    return p.parse_args(argv)


@dataclass(frozen=True, slots=True)
class NamesrvStartup:
    namesrv: NamesrvConfig
    controller: ControllerConfig | None = None


def _refuse_unknown_keys(props: dict[str, str], controller: frozenset[str]) -> None:
    """One file holds both key sets, so an unknown key's message lists both."""
    own = {config_key(f) for f in dataclasses.fields(NamesrvConfig)}
    unknown = sorted(set(props) - own - controller)
    if unknown:
        raise ConfigError(f"unknown config key {', '.join(map(repr, unknown))}; "
                          f"name server keys: {', '.join(sorted(own))}; "
                          f"controller keys (with enableControllerInNamesrv=true): {', '.join(sorted(controller))}")


def build_config(args: argparse.Namespace) -> NamesrvStartup:
    props = load_properties(args.config) if args.config else {}
    keys = controller_keys()
    _refuse_unknown_keys(props, keys)
    namesrv = load_config(
        NamesrvConfig, {k: v for k, v in props.items() if k not in keys}, listen_host=args.listen,
        listen_port=args.port, kv_config_path=args.kv_config_path, metrics_port=args.metrics_port,
    )
    controller_props = {k: v for k, v in props.items() if k in keys}
    if not namesrv.enable_controller_in_namesrv:
        flags = args.controller_peers or args.controller_self_id or args.controller_store_path
        if controller_props or flags:
            raise ConfigError(f"controller keys {sorted(controller_props) or '(--controller-*)'} need "
                              "enableControllerInNamesrv=true")
        return NamesrvStartup(namesrv)
    controller = load_config(ControllerConfig, controller_props, controller_d_leger_peers=args.controller_peers,
                             controller_d_leger_self_id=args.controller_self_id,
                             controller_store_path=args.controller_store_path)
    return NamesrvStartup(namesrv, controller)


def make(startup: NamesrvStartup) -> NamesrvController:
    return NamesrvController(startup.namesrv, controller=startup.controller)


def print_config(startup: NamesrvStartup) -> str:
    text = format_config(startup.namesrv)
    return text + format_config(startup.controller) if startup.controller is not None else text


def main(argv: list[str] | None = None) -> int:
    return run_main("rmq-namesrv", parse_args(argv), build_config, make, ready_prefix="NAMESRV",
                    format_config=print_config)


if __name__ == "__main__":
    sys.exit(main())
