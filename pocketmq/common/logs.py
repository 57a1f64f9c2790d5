"""Structured logging shared by every PocketMQ process: set-up (structlog, JSON or console) and the one
logger-naming rule (:func:`get_logger`)."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console"]


class StderrLogger:
    """Writes each rendered line to whatever ``sys.stderr`` is when it is written, not the stream that was
    current at set-up: an embedding program or a test harness may swap (and close) streams after logging was
    configured, and a logger bound to a closed stream turns every later log call into an exception."""

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _stderr_logger(*_args: object) -> StderrLogger:
    return StderrLogger()


def configure_logging(fmt: LogFormat = "console", level: str = "INFO") -> None:
    """Route structlog to stderr with ISO timestamps; ``json`` for machines, ``console`` for people."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )


LOGGER_PREFIX = "pocketmq."


def get_logger(component: str) -> structlog.typing.FilteringBoundLogger:
    """The logger of one component, named ``pocketmq.<package>[.<part>]`` in every package.

    Events are snake_case words (``broker_registered``, ``slave_attached``) with the context bound as
    keyword fields (``broker=…, offset=…``), never formatted into the event text.
    """
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(LOGGER_PREFIX + component)
    return logger
