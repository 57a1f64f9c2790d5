"""A short chaos run against a real 2m-2s-controller cluster (three name servers carrying the controllers), as
``rmq-chaos`` runs it: SIGKILL of a group's current master and of the controller leader. Nothing acknowledged may be
lost, no two masters may acknowledge in one epoch, and each killed master's group must take writes on another
replica."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.chaos_support import run_chaos

#: The run's expected length; the harness is killed 45 s past it (a bound, not a speed check).
WALL_LIMIT = 150.0


def test_a_short_controller_chaos_run_fails_over_and_loses_nothing(tmp_path: Path) -> None:
    out, base = tmp_path / "out", tmp_path / "cluster"
    summary, _wall = run_chaos(["--preset", "2m-2s-controller", "--seed", "3", "--faults",
                               "kill-master,kill-controller-leader", "--warmup", "3", "--duration", "40",
                               "--gap-min", "3", "--gap-max", "5", "--fault-min", "3", "--fault-max", "5",
                               "--tail", "5", "--drain", "20"], out, base, WALL_LIMIT)
    results = summary["results"]
    assert results["loss"]["lost"] == 0 and results["loss"]["acknowledged"] > 1000
    assert results["consistency"]["inconsistent"] == 0
    assert results["epochs"]["two_masters"] == 0 and results["epochs"]["past_epoch_end"] == 0
    assert results["epochs"]["checked"] == results["loss"]["acknowledged"]
    assert results["faults"]["kill-master"]["injected"] >= 1
    failover = results["failover"]
    # every killed master's group took writes on another replica (how fast is rmq-bench failover's to measure)
    assert failover["no_new_master"] == 0
    assert failover["by_kind"]["kill-master"]["count"] >= 1
    assert not base.exists() or not any(base.iterdir()), "the harness left its stores behind"
