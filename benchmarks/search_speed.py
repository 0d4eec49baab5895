"""Search and estimate latency.

For llama3-70b and llama3-405b on 8, 64, 1,024 and 16,384 H100 GPUs (DGX H100 nodes, sequences
of 8,192 tokens, 1,024 sequences per step; 2,048 at 16,384 GPUs), prints the space size, how
many plans fit, the latency of ``plan`` with default settings (uneven stages and block
recompute on) and with both off, and the latency of one ``estimate`` of the best plan. The
first ``plan`` call of each case runs with cold cost tables and is reported apart; the repeats
reuse the tables, as a long-running service does for requests on the same model, cluster and
training. Enumeration is the search's exact engine: that its answer is the optimum is checked
against brute force in ``tests/test_search.py``, not here.

Fragmented allocations: 64 DGX H100 nodes with 2-8 GPUs free each (a fixed draw), every
uniform slice searched (``planner.search.allocation``). Pools: 32 DGX H100 and 32 DGX A100
nodes, each pool alone and pipelines over both (``planner.search.pools``).

What a settings hint costs (``planner.search.hints``). ``plan`` against ``answer`` (what the
CLI and the service run: the search, then, for a MoE request without DeepEP or EP overlap, or
a request whose best plan exposes 5% of its step in TP collectives without TP communication
overlap, the search again with them) for Mixtral 8x7B, Qwen3-30B-A3B, Qwen3-235B-A22B and
DeepSeek-V3 on DGX H100 nodes, bf16, 4,096-token sequences, default settings, and for the dense
``DENSE_HINT_CASES``; and the first ``answer`` of each, which builds its plan spaces and cost
tables (a process that has answered requests on the same GPU keeps some of what they
computed: the GEMM times of ``KernelModel.gemm``).

    python benchmarks/search_speed.py [--reps 15] [--json results.json] [--interleaved]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from planner.cost import estimate
from planner.search import PlanRequest, answer, plan
from planner.specs import ParallelPlan

CASES = [(model, gpus) for gpus in (8, 64, 1024, 16384) for model in ("llama3-70b", "llama3-405b")]


def request(model: str, gpus: int, **search) -> PlanRequest:
    return PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"preset": "dgx-h100", "num_nodes": max(1, gpus // 8)},
        "training": {"global_batch_size": 2048 if gpus >= 16384 else 1024, "seq_length": 8192},
        "search": {"top_k": 5, **search},
    })


def timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t) * 1e3, out


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


def run_case(model: str, gpus: int, reps: int, **search) -> dict:
    default = request(model, gpus, **search)
    plain = request(model, gpus, rebalance_stages=False, partial_recompute=False)
    cold_ms, res = timed(plan, default)
    full, simple, est = [], [], []
    best = res.plans[0] if res.plans else None
    fixed = None
    if best is not None:
        fixed = ParallelPlan.of(best.model_dump())
    for _ in range(reps):
        full.append(timed(plan, default)[0])
        simple.append(timed(plan, plain)[0])
        if fixed is not None:
            est.append(timed(estimate, default.model, default.cluster, default.training,
                             fixed, default.efficiency)[0])
    return {
        "model": model, "gpus": gpus, "space_size": res.search.space_size,
        "memory_feasible": res.search.memory_feasible, "status": res.search.status,
        "cold_ms": round(cold_ms, 1),
        "plan_p50_ms": round(pct(full, 50), 1), "plan_p95_ms": round(pct(full, 95), 1),
        "plan_plain_p50_ms": round(pct(simple, 50), 1),
        "estimate_p50_ms": round(pct(est, 50), 2), "estimate_p95_ms": round(pct(est, 95), 2),
        "best": None if best is None else {
            "dp": best.dp, "tp": best.tp, "pp": best.pp, "cp": best.cp, "vpp": best.vpp,
            "recompute": best.recompute, "recompute_num_layers": best.recompute_num_layers,
            "step_time_s": round(best.step_time_s, 4),
            "mfu": round(best.mfu, 3)},
    }


def fragmented(model: str, nodes: int, seed: int = 0) -> PlanRequest:
    """A scheduler's offer: ``nodes`` DGX H100 nodes with 2-8 GPUs free each (a fixed draw)."""
    rng = np.random.default_rng(seed)
    free = [int(x) for x in rng.choice([8, 8, 8, 6, 4, 2], size=nodes)]
    return PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"preset": "dgx-h100", "free_gpus_per_node": free},
        "training": {"global_batch_size": 1024, "seq_length": 8192},
        "search": {"top_k": 5}})


def pooled(model: str, h100_nodes: int, a100_nodes: int) -> PlanRequest:
    """A heterogeneous cluster: a pool of DGX H100 nodes and one of DGX A100 nodes."""
    return PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"pools": [{"preset": "dgx-h100", "num_nodes": h100_nodes},
                              {"preset": "dgx-a100", "num_nodes": a100_nodes}]},
        "training": {"global_batch_size": 1024, "seq_length": 8192},
        "search": {"top_k": 5, "time_limit_ms": 60_000}})


def run_request(req: PlanRequest, reps: int) -> dict:
    """Cold and warm latency of one request, and its best plan's shape."""
    cold_ms, res = timed(plan, req)
    warm = [timed(plan, req)[0] for _ in range(reps)]
    best = res.plans[0] if res.plans else None
    stages = None
    if best is not None and best.stages:
        stages = best.stage_runs()
    free = req.cluster.free_nodes
    return {"model": req.model.name, "nodes": req.cluster.num_nodes,
            "gpus": sum(len(n.gpus) for n in free) if free else req.cluster.num_gpus,
            "space_size": res.search.space_size,
            "status": res.search.status, "gap_pct": res.search.gap_pct,
            "cold_ms": round(cold_ms, 1), "plan_p50_ms": round(pct(warm, 50), 1),
            "plan_p95_ms": round(pct(warm, 95), 1),
            "best": None if best is None else {
                "dp": best.dp, "tp": best.tp, "pp": best.pp, "cp": best.cp,
                "gpus_per_node": best.placement.nproc_per_node,
                "nodes": best.placement.nnodes, "mfu": round(best.mfu, 3),
                "layers_per_stage": best.layers_per_stage, "stages": stages}}


MOE_CASES = [("mixtral-8x7b", 32, 256), ("qwen3-30b-a3b", 16, 1024), ("qwen3-235b-a22b", 256, 2048),
             ("deepseek-v3", 1024, 8192)]


# Dense requests whose answer may carry the TP communication overlap hint: the search cases'
# Llama 3 70B (whose best plans expose 7-8% of their step in TP collectives at 64 and 1,024
# GPUs, 2% at 16,384) and GPT-3 175B on 64 H100 (the winners table's).
DENSE_HINT_CASES = [("llama3-70b", 64, 1024, 8192), ("llama3-70b", 1024, 1024, 8192),
                    ("llama3-70b", 16384, 2048, 8192), ("gpt3-175b", 64, 1536, 2048)]


def run_answer(model: str, gpus: int, gbs: int, reps: int, seq: int = 4096) -> dict:
    """Warm latency of ``plan`` and of ``answer`` for one request (bf16 on DGX H100 nodes,
    ``gbs`` sequences of ``seq`` tokens), and its hints."""
    req = PlanRequest.model_validate({
        "model": {"preset": model}, "cluster": {"preset": "dgx-h100", "num_nodes": gpus // 8},
        "training": {"global_batch_size": gbs, "seq_length": seq, "precision": "bf16"},
        "search": {"top_k": 5, "time_limit_ms": 60_000}})
    cold_ms, res = timed(answer, req)                     # cold tables, both trainings
    plans = [timed(plan, req)[0] for _ in range(reps)]
    answers = [timed(answer, req)[0] for _ in range(reps)]
    return {"model": model, "gpus": gpus, "answer_cold_ms": round(cold_ms, 1),
            "plan_p50_ms": round(pct(plans, 50), 1), "answer_p50_ms": round(pct(answers, 50), 1),
            "hint_faster_pct": [round(h.faster_pct, 1) for h in res.settings_hints],
            "hints": [sorted(h.changes) for h in res.settings_hints]}


def print_requests(title: str, gpus: str, rows: list[dict], best) -> None:
    """One table of ``run_request`` rows; ``best`` describes a row's best plan."""
    print(f"\n{title:<12}{'nodes':>6}{gpus:>6}{'space':>8}  {'status':<11}{'gap %':>6}"
          f"{'cold':>7}{'p50':>7}{'p95':>7}  best")
    for r in rows:
        print(f"{r['model']:<12}{r['nodes']:>6}{r['gpus']:>6}{r['space_size']:>8}  "
              f"{r['status']:<11}{r['gap_pct'] or 0:>6.2f}{r['cold_ms']:>7.0f}"
              f"{r['plan_p50_ms']:>7.0f}{r['plan_p95_ms']:>7.0f}  {best(r['best'] or {})}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--interleaved", action="store_true",
                    help="uneven stages for interleaved plans too (search.rebalance_interleaved)")
    args = ap.parse_args(argv)
    extra = {"rebalance_interleaved": True} if args.interleaved else {}
    rows = [run_case(m, g, args.reps, **extra) for m, g in CASES]
    head = (f"{'model':<12}{'GPUs':>6}{'space':>8}{'fit':>7}  {'status':<11}{'cold':>7}"
            f"{'p50':>7}{'p95':>7}{'plain p50':>10}{'estimate p50':>13}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['model']:<12}{r['gpus']:>6}{r['space_size']:>8}{r['memory_feasible']:>7}  "
              f"{r['status']:<11}{r['cold_ms']:>7.0f}{r['plan_p50_ms']:>7.0f}"
              f"{r['plan_p95_ms']:>7.0f}{r['plan_plain_p50_ms']:>10.0f}"
              f"{r['estimate_p50_ms']:>13.2f}")
    print(f"\nms; p50/p95 over {args.reps} repeats with warm cost tables; 'cold' is the first "
          "call; 'plain' turns uneven stages and block recompute off")
    reps = max(3, args.reps // 3)
    frag = [run_request(fragmented(m, 64), reps) for m in ("llama3-70b", "llama3-405b")]
    print_requests("fragmented", "free", frag,
                   lambda b: f"{b.get('nodes')} x {b.get('gpus_per_node')} GPUs")
    pools = [run_request(pooled(m, 32, 32), reps) for m in ("llama3-70b", "llama3-405b")]
    print_requests("pools", "GPUs", pools,
                   lambda b: f"dp{b.get('dp')} tp{b.get('tp')} pp{b.get('pp')} "
                             f"cp{b.get('cp')}: {b.get('stages')}")
    moe = [run_answer(m, g, b, reps) for m, g, b in MOE_CASES]
    dense = [run_answer(m, g, b, reps, seq) for m, g, b, seq in DENSE_HINT_CASES]
    for title, answered in (("MoE", moe), ("dense", dense)):
        print(f"\n{title:<16}{'GPUs':>6}{'answer cold':>13}{'plan p50':>10}{'answer p50':>12}"
              "  hint")
        for r in answered:
            hint = ", ".join(f"{'+'.join(c)} {x}% faster"
                             for c, x in zip(r["hints"], r["hint_faster_pct"], strict=True))
            print(f"{r['model']:<16}{r['gpus']:>6}{r['answer_cold_ms']:>13.0f}"
                  f"{r['plan_p50_ms']:>10.0f}{r['answer_p50_ms']:>12.0f}  {hint or '-'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "fragmented": frag, "pools": pools,
                                         "moe": moe, "dense_answers": dense,
                                         "reps": args.reps}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
