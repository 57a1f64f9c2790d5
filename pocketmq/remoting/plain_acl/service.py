"""``PlainAclService``: the ACL file, found and loaded at start and reloaded when it changes.

Which file (:func:`find_acl_file`): ``plainAclFile`` when it is set; else, as RocketMQ does,
``$ROCKETMQ_HOME/conf/plain_acl.yml``, then ``./conf/plain_acl.yml`` (the broker's working directory). The start
logs the file in force and where it came from (``acl_loaded``). When none exists the broker refuses to start and
names every path it looked at: RocketMQ would create an empty file there and deny every request, which looks like
a broken cluster rather than a missing file.

The file's modification time and size are checked every ``reload_interval`` seconds by a
:func:`~pocketmq.common.service.periodic` service (the stat and the read run in a thread); a change is parsed and, when
valid, swapped into the validator at once. A file that fails to parse is logged and the previous configuration
stays in force; a file missing at start refuses the start (``aclEnable=true`` with nothing to enforce would
otherwise deny every request without saying why).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService, periodic
from pocketmq.remoting.plain_acl.config import AclConfigError, PlainAclConfig, load_plain_acl
from pocketmq.remoting.plain_acl.validator import PlainAccessValidator

log = get_logger("pocketmq.remoting.plain_acl")

RELOAD_INTERVAL = 1.0
ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
DEFAULT_ACL_FILE = Path("conf", "plain_acl.yml")
"""Where RocketMQ's broker reads the ACL, under ``$ROCKETMQ_HOME`` (and here, then, under the working directory)."""


def find_acl_file(configured: str, environ: Mapping[str, str] = os.environ,
                  cwd: Path | None = None) -> tuple[Path, str]:
    """The ACL file in force and where it came from (``plainAclFile``, ``$ROCKETMQ_HOME`` or ``working
    directory``); raises AclConfigError naming the paths tried when there is none."""
    if configured:
        path = Path(configured)
        if not path.is_file():
            raise AclConfigError(f"aclEnable=true but the ACL file {path} (plainAclFile) does not exist")
        return path, "plainAclFile"
    candidates = []
    home = environ.get(ROCKETMQ_HOME_ENV, "")
    if home:
        candidates.append((Path(home) / DEFAULT_ACL_FILE, f"${ROCKETMQ_HOME_ENV}"))
    candidates.append(((cwd or Path.cwd()) / DEFAULT_ACL_FILE, "working directory"))
    for path, source in candidates:
        if path.is_file():
            return path, source
    tried = ", ".join(str(path) for path, _ in candidates)
    unset = "" if home else f" (${ROCKETMQ_HOME_ENV} is not set)"
    raise AclConfigError(f"aclEnable=true but no ACL file: plainAclFile is not set and none of {tried} exists"
                         f"{unset}; write one (pocketmq/conf/plain_acl.example.yml is an example) or set "
                         "plainAclFile")


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

    def __init__(self, configured: str | Path, reload_interval: float = RELOAD_INTERVAL) -> None:
        self.configured = str(configured)
        self.path = Path(configured)
        """The file in force: ``plainAclFile``, or what :func:`find_acl_file` found at :meth:`load`."""
        self.source = "plainAclFile"
        self.validator = PlainAccessValidator(PlainAclConfig())
        self._stamp: tuple[int, int] | None = None
        self.reloads = 0
        self.reloader: PeriodicService = periodic("acl-reload", reload_interval, self.reload_if_changed)

    async def load(self) -> None:
        """Find the file and load it; raises AclConfigError when there is none or it is invalid."""
        self.path, self.source = await asyncio.to_thread(find_acl_file, self.configured)
        stamp = await asyncio.to_thread(_stamp, self.path)
        if stamp is None:
            raise AclConfigError(f"aclEnable=true but the ACL file {self.path} does not exist")
        self.validator.config = await asyncio.to_thread(_read, self.path)
        self._stamp = stamp
        log.info("acl_loaded", file=str(self.path.resolve()), source=self.source,
                 accounts=len(self.validator.config.accounts),
                 whitelisted=len(self.validator.config.global_white_remote_addresses))

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
