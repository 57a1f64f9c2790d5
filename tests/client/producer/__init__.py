"""Tests of pocketmq.client.producer: the producer against scripted brokers and real clusters, and its pure parts."""
