"""Tests of the pure parts of the producer SDK."""
