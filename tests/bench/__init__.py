"""Tests of the benchmark harness's pure parts (no broker, no peer server)."""
