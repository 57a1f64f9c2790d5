"""A SparkSession set up as this project needs it.

* Loopback for local masters: ``SPARK_LOCAL_IP``, ``spark.driver.host`` and ``spark.driver.bindAddress`` at
  127.0.0.1, so nothing listens on the machine's external interface; the UI is off unless asked for.
* Python workers run this interpreter (``PYSPARK_PYTHON``), which has pyarrow, and import the project from
  the same tree as the driver (``PYTHONPATH``; on a cluster the code is shipped as a zip with
  ``addPyFile``, see :mod:`pocketmq.spark_jobs.package`).
* Session time zone UTC, so "per minute" means the same minute everywhere.
* Under ``spark-submit`` the master and deploy settings come from ``spark-submit``.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from pocketmq.spark_jobs.source import register

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
LOOPBACK = "127.0.0.1"


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[N]``, ``local[*]`` (and no master at all, Spark's default)."""
    return master is None or master.startswith("local")


def local_cores(master: str | None) -> int:
    """Worker threads of a local master: ``local`` 1, ``local[N]`` N, ``local[*]`` every CPU."""
    inside = (master or "local[*]").partition("[")[2].partition("]")[0].partition(",")[0]
    if inside.isdigit():
        return max(1, int(inside))
    if inside == "*":
        return os.cpu_count() or 1
    return 1


def _prepend_path(name: str, entry: str) -> None:
    parts = [p for p in os.environ.get(name, "").split(os.pathsep) if p]
    if entry not in parts:
        os.environ[name] = os.pathsep.join([entry, *parts])


def build_session(
    master: str | None = "local[*]",
    *,
    app_name: str = "pocketmq-analytics",
    conf: Mapping[str, str] | None = None,
    ship_code: bool | None = None,
) -> SparkSession:
    """A session with the data source registered. ``master=None`` leaves the master to ``spark-submit``.

    ``ship_code`` (default: for non-local masters) zips ``store`` and ``spark_jobs`` and adds them to the
    context, so executors on other hosts import the same code as the driver.
    """
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit: the JVM is already up
    local = is_local_master(master) and not (submitted and master is None)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _prepend_path("PYTHONPATH", PROJECT_ROOT)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"],
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
    }
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        # 200 shuffle partitions (the default) means 200 tiny tasks per aggregation on one machine.
        shuffle = str(2 * local_cores(master))
        settings.update({"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK,
                         "spark.sql.shuffle.partitions": shuffle, "spark.default.parallelism": shuffle})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if ship_code if ship_code is not None else not local:
        _ship_code(spark)
    register(spark)
    return spark


def _ship_code(spark: SparkSession) -> None:
    """Zip ``store`` and ``spark_jobs`` from the source tree and add them to the context (removed at exit).

    Under ``spark-submit --py-files`` this module is imported from that zip, there is no source tree to
    package, and the executors already have the code: nothing to do."""
    from pocketmq.spark_jobs.package import PACKAGES, ROOT, build_zip

    if not all((ROOT / package).is_dir() for package in PACKAGES):
        return
    path = build_zip()
    atexit.register(path.unlink, missing_ok=True)
    spark.sparkContext.addPyFile(str(path))
