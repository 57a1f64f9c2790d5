"""PocketMQ benchmarks (``rmq-bench``); never run by the tests."""
