"""Tests of the message store (``store`` package)."""
