"""Search latency: the CP-SAT planner vs exhaustive enumeration of the same space.

For llama3-70b and llama3-405b on 8, 64, 1,024 and 16,384 H100 GPUs (DGX H100 nodes, sequences
of 8,192 tokens, 1,024 sequences per step; 2,048 at 16,384 GPUs), prints the space size, the
solver's p50/p95 latency with default settings (uneven stages on) and with even stages, the
same for exhaustive enumeration (every plan of the space costed, the k best taken by sorting),
their ratio, and whether both found the same optimum. The first call of each case runs with
cold cost tables and is reported apart; the repeats reuse the tables, as a long-running service
does for requests on the same model, cluster and training.

    python benchmarks/search_speed.py [--reps 15] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from planner.cost.batch import compose
from planner.cost.tables import cost_tables
from planner.search import PlanRequest, plan
from planner.search.space import build_space

CASES = [(model, gpus) for gpus in (8, 64, 1024, 16384) for model in ("llama3-70b", "llama3-405b")]


def request(model: str, gpus: int, **search) -> PlanRequest:
    return PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"preset": "dgx-h100", "num_nodes": max(1, gpus // 8)},
        "training": {"global_batch_size": 2048 if gpus >= 16384 else 1024, "seq_length": 8192},
        "search": {"top_k": 5, **search},
    })


def enumerate_top(req: PlanRequest) -> list[tuple]:
    """Exhaustive enumeration: cost every plan of the space, keep those that fit, sort."""
    space = build_space(req.model, req.cluster, req.training, req.search)
    if not space.size:
        return []
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency)
    bc = compose(space.plans, tables)
    cap = req.cluster.gpu.memory_bytes * (1 - req.search.memory_headroom)
    p = space.plans
    idx = np.flatnonzero(bc.memory_bytes <= cap)
    order = np.lexsort((p.sp[idx], p.zero[idx], p.rec[idx], p.mbs[idx], p.vpp[idx], p.cp[idx],
                        p.pp[idx], p.tp[idx], p.dp[idx], np.rint(bc.memory_bytes[idx]),
                        np.rint(bc.step_time_s[idx] * 1e6)))
    top = idx[order[: req.search.top_k]]
    return [(int(p.dp[i]), int(p.tp[i]), int(p.pp[i]), int(p.cp[i]), int(p.vpp[i]),
             int(p.mbs[i]), int(p.rec[i]), int(p.zero[i]), int(p.sp[i])) for i in top]


def key(p) -> tuple:
    return (p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch_size,
            ("none", "selective", "full").index(p.recompute), p.zero_stage,
            int(p.sequence_parallel))


def timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t) * 1e3, out


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q))


def run_case(model: str, gpus: int, reps: int) -> dict:
    default, even = request(model, gpus), request(model, gpus, rebalance_stages=False)
    cold_ms, res = timed(plan, default)
    solver, solver_even, enum = [], [], []
    for _ in range(reps):
        solver.append(timed(plan, default)[0])
        t, res_even = timed(plan, even)
        solver_even.append(t)
        t, top = timed(enumerate_top, even)
        enum.append(t)
    same = [key(p) for p in res_even.plans] == top
    return {
        "model": model, "gpus": gpus, "space_size": res.search.space_size,
        "memory_feasible": res.search.memory_feasible, "status": res.search.status,
        "cold_ms": round(cold_ms, 1),
        "solver_p50_ms": round(pct(solver, 50), 1), "solver_p95_ms": round(pct(solver, 95), 1),
        "solver_even_p50_ms": round(pct(solver_even, 50), 1),
        "solver_even_p95_ms": round(pct(solver_even, 95), 1),
        "enum_p50_ms": round(pct(enum, 50), 1), "enum_p95_ms": round(pct(enum, 95), 1),
        "ratio_p50": round(pct(solver_even, 50) / pct(enum, 50), 2),
        "same_top_k_as_enumeration": same,
        "best": None if not res.plans else {
            "dp": res.plans[0].dp, "tp": res.plans[0].tp, "pp": res.plans[0].pp,
            "cp": res.plans[0].cp, "mfu": round(res.plans[0].mfu, 3)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = [run_case(m, g, args.reps) for m, g in CASES]
    head = (f"{'model':<12}{'GPUs':>6}{'space':>8}{'fit':>7}  {'status':<10}{'cold':>7}"
            f"{'p50':>7}{'p95':>7}{'even p50':>9}{'enum p50':>9}{'enum p95':>9}{'ratio':>7}"
            f"  same")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['model']:<12}{r['gpus']:>6}{r['space_size']:>8}{r['memory_feasible']:>7}  "
              f"{r['status']:<10}{r['cold_ms']:>7.0f}{r['solver_p50_ms']:>7.0f}"
              f"{r['solver_p95_ms']:>7.0f}{r['solver_even_p50_ms']:>9.0f}{r['enum_p50_ms']:>9.0f}"
              f"{r['enum_p95_ms']:>9.0f}{r['ratio_p50']:>7.2f}  "
              f"{'yes' if r['same_top_k_as_enumeration'] else 'NO'}")
    print("\nms; p50/p95 over", args.reps, "repeats with warm cost tables; 'cold' is the first call;"
          " ratio = solver (even stages) p50 / enumeration p50")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "reps": args.reps}, indent=1))
    return 0 if all(r["same_top_k_as_enumeration"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
