"""Fixtures the filter tests share with the broker's read-side tests: a remoting client (the name server and
broker fixtures are the suite's, tests/conftest.py)."""

from tests.broker.test_consume import client

__all__ = ["client"]
