"""Tests of client.producer: the producer against scripted brokers and real clusters, and its pure parts."""
