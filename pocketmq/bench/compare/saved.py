"""A comparison's raw figures as JSON (``--json``), and back (``--render-only``), so the report can be
written again without measuring again.

The document: ``meta`` (date, machine, clients, plan, pinned, command, load averages), ``workloads``,
``statuses``, ``records`` (one per measured run) and ``limits``. Fields a document lacks take the defaults
of a full run.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from pocketmq.bench.compare.limits import Limits
from pocketmq.bench.compare.report import Meta
from pocketmq.bench.compare.results import RunRecord, TargetStatus
from pocketmq.bench.compare.workload import Plan, Tuning, Workload


def dump(meta: Meta, workloads: list[Workload], statuses: list[TargetStatus], records: list[RunRecord],
         limits: Limits | None) -> dict[str, Any]:
    return {
        "meta": {**asdict(meta), "plan": asdict(meta.plan)},
        "workloads": [str(w) for w in workloads],
        "statuses": [asdict(s) for s in statuses],
        "records": [{**asdict(r), "workload": str(r.workload)} for r in records],
        "limits": limits.as_dict() if limits else None,
    }


def _meta(raw: dict[str, Any], loadavg: dict[str, Any]) -> Meta:
    plan_fields = {f.name for f in fields(Plan)}
    given = {k: v for k, v in raw.get("plan", {}).items() if k in plan_fields}
    tuning_fields = {f.name for f in fields(Tuning)}
    given["tuning"] = Tuning(**{k: v for k, v in (given.get("tuning") or {}).items() if k in tuning_fields})
    plan = Plan(**given)
    return Meta(date=raw.get("date", "unknown"), machine=raw.get("machine", "unknown"),
                clients=raw.get("clients", "unknown"), plan=plan, pinned=bool(raw.get("pinned", True)),
                loadavg={k: tuple(v) for k, v in raw.get("loadavg", loadavg).items()},
                command=raw.get("command", "rmq-bench compare"))


def _limits(raw: dict[str, Any] | None) -> Limits | None:
    if not raw:
        return None
    return Limits(raw["echo_idle_us"], raw["echo_busy_us"], float(raw["tcp_bytes_per_s"]),
                  {int(k): float(v) for k, v in raw["mmap_appends_per_s"].items()})


def load(document: dict[str, Any]) -> tuple[Meta, list[Workload], list[TargetStatus], list[RunRecord],
                                            Limits | None]:
    meta = _meta(document.get("meta", {}), document.get("loadavg", {}))
    records = [RunRecord(**{**r, "workload": Workload(r["workload"])}) for r in document.get("records", [])]
    statuses = [TargetStatus(**s) for s in document.get("statuses", [])]
    workloads = [Workload(w) for w in document.get("workloads", [])] or sorted({r.workload for r in records},
                                                                              key=list(Workload).index)
    return meta, workloads, statuses, records, _limits(document.get("limits"))
