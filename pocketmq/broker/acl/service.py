"""``PlainAclService``: the ACL file, loaded at start and reloaded when it changes.

The file's modification time and size are checked every ``reload_interval`` seconds by a
:func:`~pocketmq.common.service.periodic` service (the stat and the read run in a thread); a change is parsed and, when
valid, swapped into the validator at once. A file that fails to parse is logged and the previous configuration
stays in force; a file missing at start refuses the start (``aclEnable=true`` with nothing to enforce would
otherwise deny every request without saying why).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pocketmq.broker.acl.config import AclConfigError, PlainAclConfig, load_plain_acl
from pocketmq.broker.acl.validator import PlainAccessValidator
from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService, periodic

log = get_logger("pocketmq.broker.acl")

RELOAD_INTERVAL = 1.0


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _read(path: Path) -> PlainAclConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AclConfigError(f"cannot read {path}: {os.strerror(exc.errno or 0) or exc}") from None
    return load_plain_acl(text)


class PlainAclService:
    """Owns the validator and the reload loop; :attr:`reloader` is the service to start with the broker's."""

    def __init__(self, path: str | Path, reload_interval: float = RELOAD_INTERVAL) -> None:
        self.path = Path(path)
        self.validator = PlainAccessValidator(PlainAclConfig())
        self._stamp: tuple[int, int] | None = None
        self.reloads = 0
        self.reloader: PeriodicService = periodic("broker-acl-reload", reload_interval, self.reload_if_changed)

    async def load(self) -> None:
        """First load; raises AclConfigError when the file is missing or invalid."""
        stamp = await asyncio.to_thread(_stamp, self.path)
        if stamp is None:
            raise AclConfigError(f"aclEnable=true but the ACL file {self.path} does not exist")
        self.validator.config = await asyncio.to_thread(_read, self.path)
        self._stamp = stamp
        log.info("acl_loaded", file=str(self.path), accounts=len(self.validator.config.accounts))

    async def reload_if_changed(self) -> bool:
        """Reload when the file's mtime or size changed; True when a new configuration is in force."""
        stamp = await asyncio.to_thread(_stamp, self.path)
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            config = await asyncio.to_thread(_read, self.path)
        except AclConfigError as exc:
            log.error("acl_reload_failed", file=str(self.path), error=str(exc))
            return False
        self.validator.config = config
        self.reloads += 1
        log.info("acl_reloaded", file=str(self.path), accounts=len(config.accounts))
        return True
