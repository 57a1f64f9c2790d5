"""Tests of pocketmq.client.core: the instance, routes, errors, ids, compression."""
