"""Operator tools (the top floor, beside ``broker``): what ``rmq-admin`` runs.

* :mod:`pocketmq.admin.export` — ``rmq-admin export``: a consistent copy of a broker's commit log with a manifest
  (:func:`pocketmq.admin.export.export_commit_log`, CLI :func:`pocketmq.admin.export.export_main`), and
  ``rmq-admin verify-export`` (:func:`pocketmq.admin.export.verify_main`).

``admin`` may import ``store``, ``remoting`` and ``client``, and ``spark_jobs.manifest`` (the export format,
which needs no Spark); nothing below imports ``admin``.
"""
