"""Tests of the SDK: the model and the blocking facades here, the sub-packages beside it."""
