"""The names of Cython's pure-Python mode that PocketMQ's typed modules use, as plain Python: what those modules
import instead of ``cython`` on an install without Cython (Cython is a build dependency, never a runtime one).

Each name behaves as Cython's own runtime shadow does for the uses here: C types are callables that convert
(``cast(int, x)`` is ``int(x)``; no C wrap-around, which the typed modules never rely on), ``declare`` returns its
value, and the decorators leave the function as it is. A module compiled by Cython never sees this module: the
compiler resolves ``import cython`` itself.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

compiled = False
"""Never compiled: a typed module asks ``cython.compiled`` to tell its two builds apart."""

_UNSET = object()


class CType:
    """A C type's name in plain Python: calling it converts, indexing it (``uchar[::1]``, a typed memoryview)
    gives the same type back."""

    def __init__(self, name: str, base: Callable[..., Any]) -> None:
        self.name = name
        self._base = base

    def __call__(self, *args: Any) -> Any:
        return self._base(*args)

    def __getitem__(self, _item: Any) -> CType:
        return self

    def __repr__(self) -> str:
        return f"<C type {self.name}>"


int = CType("int", builtins.int)  # Cython's own name
uint = CType("unsigned int", builtins.int)
longlong = CType("long long", builtins.int)
ulonglong = CType("unsigned long long", builtins.int)
uchar = CType("unsigned char", builtins.int)
Py_ssize_t = CType("Py_ssize_t", builtins.int)
bint = CType("bint", builtins.bool)
p_uchar = CType("unsigned char *", lambda value: value)


def cast(ctype: Any, value: Any) -> Any:
    """The value converted to ``ctype`` when that is a C type, else unchanged."""
    return ctype(value) if isinstance(ctype, CType) else value


def declare(ctype: Any = None, value: Any = _UNSET, **_fields: Any) -> Any:
    """A typed variable's value: ``value`` converted, or the type's zero, or ``None``."""
    if value is not _UNSET:
        return cast(ctype, value)
    return ctype() if isinstance(ctype, CType) and ctype is not p_uchar else None


def _keep(function: Any) -> Any:
    return function


cfunc = _keep
inline = _keep


def locals(**_types: Any) -> Callable[[Any], Any]:  # Cython's own name
    """Local variables' C types: nothing to do in plain Python."""
    return _keep


def returns(_ctype: Any) -> Callable[[Any], Any]:
    """A function's C return type: nothing to do in plain Python."""
    return _keep


def exceptval(*_value: Any, **_options: Any) -> Callable[[Any], Any]:
    """A C function's error value: nothing to do in plain Python."""
    return _keep
