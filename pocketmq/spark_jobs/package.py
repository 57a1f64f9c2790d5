"""Zip the code Spark executors need (``common``, ``store`` and ``spark_jobs``) for ``--py-files`` / ``addPyFile``.

``python -m pocketmq.spark_jobs.package OUT.zip`` writes the zip and prints its path; ``spark-submit --py-files OUT.zip
spark_jobs/job.py ...`` then runs the job on any cluster whose workers have the same Python environment
(pyarrow, numpy) at the same path. Only ``common`` (the record codec), ``store`` and ``spark_jobs`` go in: the
floors guarantee the reader needs nothing else of ours.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("pocketmq/common", "pocketmq/store", "pocketmq/spark_jobs")
ROOT = Path(__file__).resolve().parents[2]
"""The directory holding the ``pocketmq`` package (the checkout, or site-packages)."""


def build_zip(out: str | Path | None = None) -> Path:
    """Write the zip (default: a new temporary file) and return its path."""
    if out is None:
        fd, name = tempfile.mkstemp(prefix="pocketmq-spark-", suffix=".zip")
        os.close(fd)
        out = name
    target = Path(out)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.write(ROOT / "pocketmq" / "__init__.py", "pocketmq/__init__.py")
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                zf.write(path, path.relative_to(ROOT).as_posix())
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m pocketmq.spark_jobs.package [OUT.zip]``."""
    args = sys.argv[1:] if argv is None else argv
    print(build_zip(args[0] if args else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
