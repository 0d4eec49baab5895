"""The free search given SC'21 Table 1's settings as 2021 software ran them, beside the plans
the paper published: does it pick what Megatron-LM measured to be fast, or 2021's ZeRO-3?

For every model of SC'21 Table 1 (``data/published_runs.json``, ``sc21-t1-*``), on its GPUs and
batch, with its precision, full recompute, no FlashAttention, no sequence parallelism or
context parallelism, the TP all-reduce not overlapped (Megatron-LM before commit cf7efd4f)
and DeepSpeed's ZeRO-3 of 2021 as SC'21 Table 2 ran it (each tensor gathered on its own into
per-rank views, the prefetch bucket of 5e7 parameters: the Table 2 rows' settings), the search
runs with ``framework: "any"`` (no framework of today runs such plans as predicted) and without
hybrid sharding (``dp_replicate`` 1: 2021's ZeRO-3 sharded over every rank). It prints
the winner, the best ZeRO-3 plan without pipelining, and the winner with today's flat ZeRO-3
gathers instead, against the published plan's measured step.

    python benchmarks/search_sc21_software.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published_accuracy import load_runs  # noqa: E402
from search_winners import plan_label  # noqa: E402

from planner.search import PlanRequest, plan  # noqa: E402

ZERO3_2021 = ("zero3_prefetch_layers", "zero3_gathers_per_layer", "zero3_per_rank_copies",
              "zero3_max_reuse_params")
# (2021's ZeRO-3 sharded over every data-parallel rank: hybrid sharding came later, with MiCS,
# arXiv 2205.00119 of 2022, and PyTorch FSDP's HYBRID_SHARD.)
SEARCH = {"top_k": 1, "framework": "any", "recompute": "full", "sequence_parallel": False,
          "cp": 1, "dp_replicate": 1}


def best(run: dict, training: dict, **only) -> dict | None:
    res = plan(PlanRequest.model_validate({"model": run["model"], "cluster": run["cluster"],
                                           "training": training,
                                           "search": {**SEARCH, **only}}))
    if not res.plans:
        return None
    p = res.plans[0]
    return {"plan": plan_label(p), "pp": p.pp, "zero_stage": p.zero_stage,
            "step_s": round(p.step_time_s, 2)}


def rows() -> list[dict]:
    runs = {r["id"]: r for r in load_runs()}
    zero3 = {k: runs["sc21-t2-gpt3-175b-zero3-768"]["training"][k] for k in ZERO3_2021}
    out = []
    for rid, run in runs.items():
        if not rid.startswith("sc21-t1-"):
            continue
        training = {**run["training"], **zero3, "async_tensor_model_parallel_allreduce": False}
        flat = {**run["training"], "async_tensor_model_parallel_allreduce": False}
        p = run["plan"]
        out.append({
            "run": rid, "gpus": run["cluster"]["num_nodes"] * 8,
            "published": f"dp{p['dp']} tp{p['tp']} pp{p['pp']}",
            "measured_s": run["measured"]["step_time_s"],
            "winner": best(run, training),
            "zero3_no_pipeline": best(run, training, zero_stage=3, pp=1),
            "winner_flat_zero3": best(run, flat)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    out = rows()

    def cell(x: dict | None) -> str:
        return f"{x['plan']} {x['step_s']:.1f} s" if x else "none fits"

    print(f"{'run':<22}{'gpus':>6}  {'published (measured)':<26}{'winner (2021 software)':<48}"
          f"{'best ZeRO-3, no pipeline':<48}{'winner, flat ZeRO-3 gathers'}")
    for r in out:
        published = f"{r['published']} {r['measured_s']:.1f} s"
        print(f"{r['run']:<22}{r['gpus']:>6}  {published:<26}"
              f"{cell(r['winner']):<48}{cell(r['zero3_no_pipeline']):<48}"
              f"{cell(r['winner_flat_zero3'])}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
