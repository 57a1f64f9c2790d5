"""How ``rmq-admin`` prints (a left-aligned text table, or JSON with ``--json``), the flags its command modules
(``admin/commands_*.py``) share, and the command type they register with :mod:`pocketmq.admin.cli`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pocketmq.admin.api import AdminClient

Command = Callable[["AdminClient", argparse.Namespace], Awaitable[None]]
"""One ``rmq-admin`` command: prints its result, raises AdminError when a request fails."""


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A left-aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """``data`` as JSON with ``--json``, else ``text``."""
    print(json.dumps(data, indent=2, sort_keys=True, default=str) if args.json else text)


def key_values(data: dict[str, Any]) -> str:
    """``key : value`` lines, keys aligned."""
    width = max((len(k) for k in data), default=0)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in data.items())


def bool_arg(text: str) -> bool:
    """mqadmin's ``true``/``false`` option values."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return value == "true"


def where_flags(parser: argparse.ArgumentParser) -> None:
    """mqadmin's ``-b`` broker address or ``-c`` cluster (default: every master)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-b", "--broker", help="one broker address")
    where.add_argument("-c", "--cluster", help="every master of this cluster (default: every master)")
