"""Logging (:mod:`pocketmq.common.logs`): records through :mod:`logging` under ``pocketmq.*`` names, bound context,
cheap disabled levels, and the structured lines PocketMQ's processes print (docs/logging.md)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.common.logs import ROOT_LOGGER, Event, Logger, StderrHandler, configure_logging, get_logger

ROOT = Path(__file__).resolve().parents[2]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def collected() -> Iterator[Collect]:
    handler = Collect()
    logger = logging.getLogger("pocketmq.tests")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


@pytest.fixture
def root_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_records_carry_the_event_and_the_bound_fields(collected: Collect) -> None:
    log = get_logger("pocketmq.tests").bind(broker="b1")
    log.info("put_refused", reason="disk full", offset=7)
    (record,) = collected.records
    assert record.name == "pocketmq.tests" and record.levelno == logging.INFO
    assert isinstance(record.msg, Event) and record.msg.name == "put_refused"
    assert dict(record.msg.fields) == {"broker": "b1", "reason": "disk full", "offset": 7}
    assert record.getMessage() == "put_refused broker=b1 reason='disk full' offset=7"
    assert record.funcName == "test_records_carry_the_event_and_the_bound_fields"  # the caller, not logs.py


def test_a_disabled_level_makes_no_record(collected: Collect) -> None:
    log = get_logger("pocketmq.tests")
    log.debug("wire_trace", opaque=1)
    assert collected.records == [] and not log.is_enabled_for(logging.DEBUG) and log.is_enabled_for(logging.INFO)


def test_exception_attaches_the_exception(collected: Collect) -> None:
    log = get_logger("pocketmq.tests")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("handler_failed", code=10)
    error = ValueError("given")
    log.error("handler_failed", exc_info=error)
    first, second = collected.records
    assert first.levelno == logging.ERROR and first.exc_info is not None and first.exc_info[0] is ValueError
    assert second.exc_info is not None and second.exc_info[1] is error
    assert isinstance(first.msg, Event) and "exc_info" not in first.msg.fields


def test_logger_names_are_pocketmq_names() -> None:
    assert get_logger("pocketmq.broker.controller").name == "pocketmq.broker.controller"
    with pytest.raises(ValueError):
        get_logger("broker.controller")
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger(ROOT_LOGGER).handlers)


def test_the_processes_print_structured_json_lines(root_restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "INFO")
    configure_logging("json", "INFO")  # again: replaces, never doubles
    assert sum(isinstance(h, StderrHandler) for h in logging.getLogger().handlers) == 1
    get_logger("pocketmq.tests").bind(store="/s").info("store_shut_down", max_offset=12)
    get_logger("pocketmq.tests").debug("not_shown")
    logging.getLogger("asyncio").warning("Task %s was destroyed", "t1")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(x["event"], x["level"], x["logger"]) for x in lines] == [
        ("store_shut_down", "info", "pocketmq.tests"), ("Task t1 was destroyed", "warning", "asyncio")]
    assert lines[0]["store"] == "/s" and lines[0]["max_offset"] == 12
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lines[0]["timestamp"])


def test_console_lines_and_tracebacks(root_restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("console", "DEBUG")
    log: Logger = get_logger("pocketmq.tests")
    log.debug("queue_added", topic="T", queue_id=3)
    try:
        raise KeyError("k")
    except KeyError:
        log.exception("handler_failed")
    err = capsys.readouterr().err
    assert re.search(r"\[debug\s*\] queue_added\s+\[pocketmq\.tests\] queue_id=3 topic=T", err), err
    assert "handler_failed" in err and "KeyError: 'k'" in err
    with pytest.raises(ValueError):
        configure_logging("console", "LOUD")


def test_every_logger_name_in_the_code_is_documented() -> None:
    names = set()
    for path in (ROOT / "pocketmq").rglob("*.py"):
        names |= set(re.findall(r'get_logger\("([^"]+)"\)', path.read_text(encoding="utf-8")))
    documented = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")
    assert names, "no logger found: the pattern no longer matches the code"
    assert sorted(n for n in names if f"`{n}`" not in documented) == []
