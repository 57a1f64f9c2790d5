"""Tests of the model's ground floor (``common`` package)."""
