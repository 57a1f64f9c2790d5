"""Tests of client.core: the instance, routes, errors, ids, compression."""
