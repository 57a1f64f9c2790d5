"""Running ``rmq-chaos`` from a test: a subprocess with the given arguments, its summary and wall time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.procs import ROOT


def run_chaos(args: list[str], out: Path, base: Path, wall_limit: float) -> tuple[dict[str, Any], float]:
    """``python -m pocketmq.chaos <args> --out out --base-dir base``; asserts it passed. (result.json, seconds)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pocketmq.chaos", *args, "--out", str(out), "--base-dir", str(base)],
                          cwd=ROOT, capture_output=True, text=True, timeout=wall_limit + 45, check=False)
    wall = time.monotonic() - started
    print(done.stdout)
    print(done.stderr[-3000:])
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return json.loads((out / "result.json").read_text()), wall
