"""A short chaos run (about a minute, fixed seed) against a real 2m-2s-sync cluster, as ``rmq-chaos`` runs it.

Seed 2 with kill and stop faults draws, in this order: SIGKILL + restart of broker-b's master, SIGSTOP of
broker-a's slave (its SYNC_MASTER then answers FLUSH_SLAVE_TIMEOUT) and SIGKILL + restart of a name server.
The preset promises that nothing acknowledged is lost while faults do not overlap, to the push group and to the
POP group (both its kinds of consumer read); the run must also find no inconsistent offsets, and the faults must
really have been injected. Everything (processes, stores) is
the harness's to clean up; the test checks the stores are gone.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.chaos_support import run_chaos

#: The run's expected length; the harness is killed 45 s past it (a bound, not a speed check).
WALL_LIMIT = 75.0


def test_a_one_minute_chaos_run_loses_nothing_and_finds_no_inconsistency(tmp_path: Path) -> None:
    out, base = tmp_path / "out", tmp_path / "cluster"
    summary, _wall = run_chaos(["--preset", "2m-2s-sync", "--seed", "2", "--faults", "kill,stop", "--warmup", "3",
                               "--duration", "36", "--gap-min", "3", "--gap-max", "6", "--fault-min", "3",
                               "--fault-max", "6", "--tail", "5", "--drain", "20", "--dump-history"], out, base,
                              WALL_LIMIT)
    results = summary["results"]
    assert results["loss"]["lost"] == 0
    assert results["consistency"]["inconsistent"] == 0
    assert results["faults"]["kill"]["injected"] >= 2 and results["faults"]["stop"]["injected"] >= 1
    assert {f["target"] for f in summary["history"]["faults"]} >= {"broker-b", "broker-a-s"}
    assert results["loss"]["acknowledged"] > 1000 and summary["drained"]
    assert results["delivery"]["readable_never_delivered"] == 0
    assert not summary["history"]["unread"]
    # the POP group (a SimpleConsumer loop and a push consumer in POP mode) received every acknowledged send
    assert results["pop"]["enabled"] and results["pop"]["lost"] == 0
    pop_readers = {json.loads(line)["pop_delivery"]["consumer"] for line in (out / "history.jsonl").open()
                   if line.startswith('{"pop_delivery"')}
    assert pop_readers == {"pop0", "pop1"}
    assert (out / "timeline.svg").read_text().startswith("<svg")
    assert not base.exists() or not any(base.iterdir()), "the harness left its stores behind"
