"""The console's users file: one ``name:role:hash`` line per user, ``#`` comments.

``hash`` is ``scrypt$N$r$p$salt$key`` (salt and key in unpadded URL-safe base64): :func:`hashlib.scrypt`
with N=2**14, r=8, p=1 (16 MiB, ~50 ms on a server core: cheap for one login, costly for a guesser), a
16-byte random salt and a 32-byte key. Verification recomputes the key with the stored parameters and compares
in constant time. ``rmq-console adduser`` writes the file (mode 0600); the console only reads it, at start and
again when its modification time changes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from pocketmq.console.config import ROLES

SCRYPT_N = 1 << 14
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
KEY_BYTES = 32
#: scrypt's working memory is 128·N·r bytes; allow a stored hash up to 8x the default, refuse more.
MAX_SCRYPT_MEMORY = 8 * 128 * SCRYPT_N * SCRYPT_R
MAX_PASSWORD_LENGTH = 1024
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")


class UsersFileError(ValueError):
    """The users file or a user entry is malformed."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: str
    password_hash: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """A new ``scrypt$…`` hash of ``password`` (a fresh random salt unless one is given)."""
    if not password or len(password) > MAX_PASSWORD_LENGTH:
        raise UsersFileError(f"a password is 1 to {MAX_PASSWORD_LENGTH} characters")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    key = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=KEY_BYTES,
                         maxmem=MAX_SCRYPT_MEMORY + (1 << 20))
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored``; False (never an exception) for a malformed hash."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt" or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        return False
    if n < 2 or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16 or 128 * n * r > MAX_SCRYPT_MEMORY:
        return False
    if not key or len(key) > 128:
        return False
    try:
        got = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=len(key),
                             maxmem=MAX_SCRYPT_MEMORY + (1 << 20))
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got, key)


def check_name(name: str) -> None:
    if not name or len(name) > 64 or not set(name) <= _NAME_CHARS:
        raise UsersFileError(f"user name {name!r}: 1 to 64 of letters, digits and _.-@")


def parse_users(text: str) -> dict[str, User]:
    """``name:role:hash`` lines; :class:`UsersFileError` naming the line for a bad one."""
    users: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep1, rest = line.partition(":")
        role, sep2, password_hash = rest.partition(":")
        if not (sep1 and sep2):
            raise UsersFileError(f"line {number}: want name:role:hash")
        try:
            check_name(name)
        except UsersFileError as exc:
            raise UsersFileError(f"line {number}: {exc}") from None
        if role not in ROLES:
            raise UsersFileError(f"line {number}: role {role!r} is not one of {', '.join(ROLES)}")
        if not password_hash.startswith("scrypt$"):
            raise UsersFileError(f"line {number}: the password is not an scrypt hash (use rmq-console adduser)")
        users[name] = User(name, role, password_hash)
    return users


class UsersFile:
    """The users of one file, re-read when the file changes (checked at most once per login)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._mtime: int | None = None
        self._users: dict[str, User] = {}

    def load(self) -> dict[str, User]:
        """Blocking (run it in a thread): the users, re-read if the file changed."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError as exc:
            raise UsersFileError(f"cannot read users file {self.path}: {exc.strerror}") from None
        if mtime != self._mtime:
            self._users = parse_users(self.path.read_text(encoding="utf-8"))
            self._mtime = mtime
        return self._users

    def authenticate(self, name: str, password: str) -> User | None:
        """Blocking (scrypt): the user when the password is right. An unknown name costs the same time as a
        wrong password, so a guesser cannot tell the two apart by timing."""
        user = self.load().get(name)
        if user is None:
            verify_password(password, _dummy_hash())
            return None
        return user if verify_password(password, user.password_hash) else None


@functools.cache
def _dummy_hash() -> str:
    return hash_password("not a password", salt=b"\0" * SALT_BYTES)


def add_user(path: str | Path, name: str, role: str, password: str) -> bool:
    """Add ``name`` or replace its role and password; True when it was new. The file is written whole to a
    temporary file and renamed, with mode 0600."""
    check_name(name)
    if role not in ROLES:
        raise UsersFileError(f"role {role!r} is not one of {', '.join(ROLES)}")
    target = Path(path)
    lines = target.read_text(encoding="utf-8").splitlines() if target.exists() else [
        "# PocketMQ console users: name:role:scrypt hash (rmq-console adduser)"]
    parse_users("\n".join(lines))  # refuse to rewrite a file that is already broken
    entry = f"{name}:{role}:{hash_password(password)}"
    new = True
    for i, line in enumerate(lines):
        if line.strip().partition(":")[0] == name and not line.strip().startswith("#"):
            lines[i], new = entry, False
    if new:
        lines.append(entry)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(tmp, target)
    return new
