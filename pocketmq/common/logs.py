"""Logging for every part of PocketMQ: records go through the standard :mod:`logging` module under
``pocketmq.<package>[.<part>]`` logger names; PocketMQ's own processes render them as structured lines.

Two users, one path:

* **An application that embeds the SDK** gets library etiquette: importing or using PocketMQ configures
  nothing (a :class:`logging.NullHandler` on the ``pocketmq`` logger keeps Python's last-resort handler from
  printing), and records appear only where the application's own logging configuration sends them
  (``logging.basicConfig(level=logging.INFO)`` shows them on stderr as
  ``INFO:pocketmq.client.instance:client_instance_started client_id=...``).
* **PocketMQ's processes** (``rmq-namesrv``, ``rmq-broker``, the tools) call :func:`configure_logging`, which
  installs one handler that renders each record as structlog's console or JSON line on stderr, as before.

A logger (:class:`Logger`) keeps bound context (``log.bind(broker=...)``) and takes the event as a snake_case
word with its fields as keywords; the record's ``msg`` is an :class:`Event` that carries both, so a formatter
can render the fields apart (JSON) while a plain one prints ``event key=value ...``. A call below the
logger's effective level returns after one ``isEnabledFor`` (a cached dict look-up); a hot path that would
build many fields guards the call with :meth:`Logger.is_enabled_for`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

LogFormat = Literal["json", "console"]

ROOT_LOGGER = "pocketmq"
"""Every logger of PocketMQ is this one or a child of it."""

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger(ROOT_LOGGER).handlers):
    logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


class Event:
    """A record's message: the event word and its fields. ``str()`` gives ``event key=value ...``."""

    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: Mapping[str, Any]) -> None:
        self.name = name
        self.fields = fields

    def __str__(self) -> str:
        if not self.fields:
            return self.name
        return " ".join([self.name, *(f"{key}={_show(value)}" for key, value in self.fields.items())])

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {dict(self.fields)!r})"


def _show(value: Any) -> str:
    """A field's value in ``key=value`` text: strings quoted only when a reader could not tell where they end."""
    if isinstance(value, str) and value and not any(c.isspace() or c in "='\"" for c in value):
        return value
    return repr(value)


class Logger:
    """A structured logger over a :class:`logging.Logger`: bound context plus the standard levels."""

    __slots__ = ("_context", "_logger")

    def __init__(self, logger: logging.Logger, context: Mapping[str, Any] | None = None) -> None:
        self._logger = logger
        self._context: Mapping[str, Any] = context or {}

    @property
    def name(self) -> str:
        """The standard logger's name (``pocketmq.broker.controller``)."""
        return self._logger.name

    def bind(self, **fields: Any) -> Logger:
        """The same logger with ``fields`` added to every record it writes."""
        return Logger(self._logger, {**self._context, **fields})

    def is_enabled_for(self, level: int) -> bool:
        """True when a record at ``level`` would be handled: the guard for a hot path's log call."""
        return self._logger.isEnabledFor(level)

    def debug(self, event: str, **fields: Any) -> None:
        if self._logger.isEnabledFor(logging.DEBUG):
            self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        if self._logger.isEnabledFor(logging.INFO):
            self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        if self._logger.isEnabledFor(logging.WARNING):
            self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        if self._logger.isEnabledFor(logging.ERROR):
            self._emit(logging.ERROR, event, fields)

    def critical(self, event: str, **fields: Any) -> None:
        if self._logger.isEnabledFor(logging.CRITICAL):
            self._emit(logging.CRITICAL, event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """An error with the exception being handled (or ``exc_info=exc``) attached."""
        if self._logger.isEnabledFor(logging.ERROR):
            fields.setdefault("exc_info", True)
            self._emit(logging.ERROR, event, fields)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        exc_info = fields.pop("exc_info", None)
        if self._context:
            fields = {**self._context, **fields}
        # stacklevel 3: the record names the caller of debug()/info()/..., not this module.
        self._logger.log(level, Event(event, fields), exc_info=exc_info, stacklevel=3)


def get_logger(name: str) -> Logger:
    """The logger called ``name``: ``pocketmq.<package>[.<part>]`` (docs/logging.md lists them).

    Events are snake_case words (``broker_registered``, ``slave_attached``) with the context bound as
    keyword fields (``broker=…, offset=…``), never formatted into the event text.
    """
    if name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
        raise ValueError(f"PocketMQ's loggers are named {ROOT_LOGGER}.<part>, not {name!r}")
    return Logger(logging.getLogger(name))


# ------------------------------------------------------------------------------------------- processes


class StructuredFormatter(logging.Formatter):
    """Renders a record as structlog renders an event: fields, ``event``, ``level``, ``logger``, an ISO UTC
    ``timestamp`` and the ``exception`` text; records of other libraries become an event of their message."""

    def __init__(self, fmt: LogFormat) -> None:
        super().__init__()
        self._render: Any = (structlog.processors.JSONRenderer() if fmt == "json"
                             else structlog.dev.ConsoleRenderer(colors=False))

    def format(self, record: logging.LogRecord) -> str:
        message = record.msg
        if isinstance(message, Event):
            event: dict[str, Any] = dict(message.fields)
            event["event"] = message.name
        else:
            event = {"event": record.getMessage()}
        level = record.levelname.lower()
        event["level"] = level
        event["logger"] = record.name
        event["timestamp"] = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        rendered: str = self._render(None, level, event)
        return rendered


class StderrHandler(logging.Handler):
    """Writes each line to whatever ``sys.stderr`` is when it is written, not the stream that was current at
    set-up: an embedding program or a test harness may swap (and close) streams after logging was configured.
    One ``write`` per line, so a line is never split by another thread's output."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            stream = sys.stderr
            stream.write(line)
            stream.flush()
        except Exception:
            self.handleError(record)


def configure_logging(fmt: LogFormat = "console", level: str = "INFO") -> None:
    """For PocketMQ's own processes only (never called by the SDK): every record at ``level`` and above, ours
    and other libraries', rendered on stderr as ``json`` (for machines) or ``console`` (for people) lines.
    Calling it again replaces the previous set-up."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = StderrHandler()
    handler.setFormatter(StructuredFormatter(fmt))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
