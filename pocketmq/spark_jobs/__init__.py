"""PocketMQ's analytics over exported commit logs (docs/analytics.md).

* :mod:`pocketmq.spark_jobs.manifest` — the export format (``manifest.json`` + ``commitlog/``), loading and
  verification; stdlib and the model (``common``) only, so ``admin`` can write exports without Spark installed.
* :mod:`pocketmq.spark_jobs.records` — one file range of a commit log to Arrow record batches, through the model's
  record decoder (:func:`pocketmq.common.record.decode_record`); pyarrow, no Spark.
* :mod:`pocketmq.spark_jobs.source` — the Spark Python data source ``pocketmq-commitlog`` (partitions by file and
  record-aligned byte range) and :func:`~pocketmq.spark_jobs.source.read_exports`.
* :mod:`pocketmq.spark_jobs.analytics` — the analyses as pure DataFrame functions.
* :mod:`spark_jobs.report` — the HTML report and ``summary.json``; :mod:`pocketmq.spark_jobs.charts` — its SVG charts.
* :mod:`pocketmq.spark_jobs.job` — ``rmq-analytics``, runnable with ``spark-submit`` as well.

Dependencies point down only: ``store`` (record layout and decoder), pyspark, pyarrow, numpy and the
standard library (the ``spark`` extra). Nothing here imports pyspark at package import time.
"""
