"""Operator tools (the top floor, beside ``broker``): what ``rmq-admin`` runs.

* :mod:`admin.export` — ``rmq-admin export``: a consistent copy of a broker's commit log with a manifest
  (:func:`admin.export.export_commit_log`, CLI :func:`admin.export.export_main`), and
  ``rmq-admin verify-export`` (:func:`admin.export.verify_main`).

``admin`` may import ``store``, ``remoting`` and ``client``, and ``spark_jobs.manifest`` (the export format,
which needs no Spark); nothing below imports ``admin``.
"""
