"""Tests of pocketmq.client.consumer: push and pull consumers against in-process clusters, and their pure parts."""
