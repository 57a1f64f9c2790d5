"""One small SparkSession for every Spark test of the run (starting one costs 10-20 s).

``local[2]``, two shuffle partitions, 1 GiB driver, UI off, workers running this interpreter, bound to
127.0.0.1 (:func:`pocketmq.spark_jobs.session.build_session`), scratch and warehouse directories under pytest's
temporary directory. Tests that need no Spark (export, manifest, record batches, the report) do not use the
fixture and start no JVM."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Never skipped: ``make test`` installs pyspark (the ``spark`` extra) and a Java runtime, so a missing
    one is a broken setup that must fail loudly rather than turn the analytics tests silently off."""
    from pocketmq.spark_jobs.session import build_session

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers with this environment's pyarrow, never another
    scratch: Path = tmp_path_factory.mktemp("spark")
    session = build_session("local[2]", app_name="pocketmq-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        "spark.local.dir": str(scratch / "local"),
        "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        "spark.ui.showConsoleProgress": "false",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
