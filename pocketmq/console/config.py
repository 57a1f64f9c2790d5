"""The console's configuration: a frozen dataclass loaded from a RocketMQ-style ``.properties`` file
(``rmq-console -c FILE``; keys are the camelCase field names) with command-line flags on top.

The ACL secret key is never printed: :func:`describe` masks it, and the field is left out of ``repr``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pocketmq.common.config import format_config

ROLES = ("viewer", "admin")
"""A viewer reads every page; an admin may also change things (create topics, reset offsets, resend)."""


def normalise_base_path(path: str) -> str:
    """``console`` / ``/console/`` → ``/console``; ``/`` and ``""`` → ``""`` (served at the root)."""
    parts = [p for p in path.strip().split("/") if p]
    for part in parts:
        if part in (".", "..") or not all(c.isalnum() or c in "-_.~" for c in part):
            raise ValueError(f"consoleBasePath {path!r}: only letters, digits and -_.~ between slashes")
    return "/" + "/".join(parts) if parts else ""


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    #: Name servers, ``;``-separated.
    namesrv_addr: str = "127.0.0.1:9876"
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    #: Where the pages live on this server (``/console``); a reverse proxy may add its own prefix on top
    #: (``X-Forwarded-Prefix``).
    base_path: str = ""
    #: ``name:role:scrypt$…`` lines (``rmq-console adduser``); required while login is on.
    users_file: str = ""
    #: Off only for a console on a developer's machine: everyone is then an admin.
    login_required: bool = True
    #: A session unused this long is over (the next request goes to the login page).
    session_timeout_seconds: int = 1800
    #: A session is over this long after login, used or not.
    session_max_age_seconds: int = 12 * 3600
    #: Sessions held at once; the least recently used is dropped past it.
    max_sessions: int = 10_000
    #: Peers whose ``X-Forwarded-For/-Proto/-Host/-Prefix`` are believed (comma-separated IPs).
    trusted_proxies: str = "127.0.0.1,::1"
    #: ACL keys the console signs its requests with (aclEnable=true on the brokers).
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    #: Timeout of one request to a name server or broker.
    request_timeout_ms: int = 5000
    #: Cluster-wide lists (topics, groups, brokers) are refreshed in the background when older than this.
    snapshot_ttl_ms: int = 5000
    #: Rows per page of the topic and group lists.
    page_size: int = 50
    #: Most records one message-list request reads before it answers "partial" with a cursor to go on.
    message_scan_limit: int = 2000
    #: Most messages a key query asks each broker for (the broker caps it at its maxMsgsNumBatch too).
    key_query_max: int = 64
    #: Longest body shown in a page; the rest is cut (the download link gives it whole).
    body_view_limit: int = 64 * 1024
    #: Most rows one DLQ CSV export writes.
    csv_export_limit: int = 10_000

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} out of range")
        object.__setattr__(self, "base_path", normalise_base_path(self.base_path))
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError("accessKey and secretKey go together")
        for name in ("session_timeout_seconds", "session_max_age_seconds", "max_sessions", "request_timeout_ms",
                     "page_size", "message_scan_limit", "key_query_max", "body_view_limit", "csv_export_limit"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.page_size > 1000 or self.key_query_max > 2000 or self.message_scan_limit > 100_000:
            raise ValueError("pageSize ≤ 1000, keyQueryMax ≤ 2000, messageScanLimit ≤ 100000")

    @property
    def trusted(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.trusted_proxies.split(",") if p.strip())


def describe(config: ConsoleConfig) -> str:
    """The effective configuration as ``.properties`` text, the secret key masked."""
    masked = dataclasses.replace(config, secret_key="******" if config.secret_key else "")
    return format_config(masked)
