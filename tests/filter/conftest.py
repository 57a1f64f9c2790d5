"""Fixtures the filter tests share with the broker's read-side tests: a name server and a remoting client."""

from tests.broker.test_consume import client, namesrv

__all__ = ["client", "namesrv"]
