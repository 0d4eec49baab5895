"""Free-search winners over a grid of models and clusters, beside what published runs of the
same class used and reached: would anyone who trained at that scale believe the winner?

For GPT-3 175B (2,048-token sequences, 1,536 per step, SC'21's batch) and Llama 3 8B / 70B / 405B
(8,192-token sequences; 512, 512 and 2,048 per step), with the batch grown to at least one sequence
per 2 GPUs (GPT-3) or per 8 GPUs (Llama 3: 16M tokens at 16,384 GPUs, Meta's batch), bf16 on
DGX A100 and DGX H100 nodes, at 64, 1,024 and 16,384 GPUs, the search runs with default
settings (no restriction); the best plan, its MFU (model FLOPs, the published convention, over
the bf16 dense peak), the MFU it would run at if it measured as the median held-out published
run of its class on its GPU family did against the model ('band': the prediction over
``step_time_band``'s median) and the published reference
of its class (``REFERENCES``) are printed side by side, with the gap in MFU points, and the
step model's own prediction for that published run (MFU, and the measured step's error against
it): a winner far above its reference where the model is also optimistic on the reference is
the model's optimism, not a better plan.

MoE models (``MOE_CELLS``) are searched on the GPUs and with the batch, sequence and precision
of their best published H100 run, and its routing balance (the busiest EP rank's load, token
dropping: the benchmarks force-balance or drop, a property of the run, not of the plan);
every other setting is left at its default (the all-to-all dispatcher without EP overlap,
Megatron-LM's selective recompute of the attention core), and they are printed with the
result's settings hint (``planner.search.hints``): the best plan under DeepEP with the
all-to-alls overlapped, as those runs ran.

    python benchmarks/search_winners.py [--json winners.json]

Each dense row also carries the winner of the same search with TP communication overlap
(``training.tp_comm_overlap``: Megatron-LM's ``--tp-comm-overlap``, torchtitan's AsyncTP), which
NVIDIA's recipes run (``"tp_overlap"``, the table's 'tp overlap' column).

The JSON is the list of rows, dense first; MoE rows carry ``"class": "moe"``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner.search import PlanRequest, answer, plan  # noqa: E402

MODELS = {
    "gpt3-175b": {"seq_length": 2048, "global_batch_size": 1536},
    "llama3-8b": {"seq_length": 8192, "global_batch_size": 512},
    "llama3-70b": {"seq_length": 8192, "global_batch_size": 512},
    "llama3-405b": {"seq_length": 8192, "global_batch_size": 2048},
}
CLUSTERS = {"a100": "dgx-a100", "h100": "dgx-h100"}
GPUS = (64, 1024, 16384)

# The best published bf16/fp16 dense run of each class (model size, GPU), as MFU with the
# Megatron-LM/PaLM model-FLOPs convention (non-causal attention, no recompute): a run of the
# same model or of a larger one, never of a smaller one (small models reach MFUs large ones
# do not; the MFU caveat holds plans to the same rule).
DGXC_405B = ("DGX Cloud Benchmarking 25.02 (NeMo 24.12): Llama 3.1 405B on 576 H100 (tp8 pp9 "
             "cp2 vpp7, no recompute), 17.5 s a step, 54.85% MFU (the best published H100 bf16 "
             "run of a model of 70B or more in the planner's FLOPs convention, where the same "
             "release's Nemotron-4 340B, 55.38% as its README counts attention without GQA, "
             "is 47.3%; its Llama 3.1 70B on 64, the 70B winner's plan, 54.52%)")
REFERENCES = {
    ("gpt3-175b", "a100"): (0.556, "nemo-megatron-2022-07-175b-128",
                           "NeMo Megatron README (July 2022): 175B on 128 A100 (tp8 pp8, "
                           "micro-batch 2, selective recompute + SP), 55.6% MFU"),
    ("gpt3-175b", "h100"): (0.5485, "dgxc-2502-llama3.1-405b-h100-576-bf16", DGXC_405B),
    ("llama3-8b", "a100"): (0.706, "hagemann-13b-2k-64g-fa2rms-noac-m1t1p1-132178",
                           "Hagemann et al. 2023 (their released sweep data): Llama 13B on 64 "
                           "A100, dp64 with ZeRO-1, no recompute, FlashAttention-2 and a fused "
                           "RMSNorm, 70.6% MFU (PaLM convention; the best published A100 run "
                           "of a model of 8B parameters or more)"),
    ("llama3-8b", "h100"): (0.5999, "dgxc-2502-llama3.1-8b-h100-8-bf16",
                           "DGX Cloud Benchmarking 25.02 (NeMo 24.12): Llama 3.1 8B on 8 H100 "
                           "(cp2 dp4, no recompute), 12.78 s a step, 59.99% MFU (the best "
                           "published H100 bf16 run of a model of 8B or more)"),
    ("llama3-70b", "a100"): (0.517, "torchtitan-a100-70b-full",
                            "torchtitan docs: Llama 3 70B on 64 A100, FSDP + full recompute, "
                            "331 tokens/s/GPU, 51.7% MFU"),
    ("llama3-70b", "h100"): (0.5485, "dgxc-2502-llama3.1-405b-h100-576-bf16", DGXC_405B),
    ("llama3-405b", "a100"): (0.560, "korthikanti-530b-selective",
                             "Korthikanti et al.: 530B on 280 A100 (tp8 pp35 vpp3, selective "
                             "recompute + SP), 56.0% MFU"),
    ("llama3-405b", "h100"): (0.5485, "dgxc-2502-llama3.1-405b-h100-576-bf16", DGXC_405B),
}


# MoE: (model, GPUs) -> the best published H100 run of that model on those GPUs, whose
# training shape the search takes (benchmarks/data/published_runs.json ids).
MOE_CELLS = {
    ("mixtral-8x7b", 64): "mcore-v08-mixtral-8x7b-h100-64-bf16",
    ("mixtral-8x22b", 128): "pfold-mixtral-8x22b-h100-128-bf16-folding",
    ("qwen3-30b-a3b", 16): "mbridge-guide-qwen3-30b-a3b-h100-16-bf16",
    ("qwen3-235b-a22b", 256): "mcore-moe-2603-qwen3-235b-a22b-h100-256-bf16",
    ("deepseek-v3", 1024): "mcore-moe-2603-deepseek-v3-h100-1024-fp8blk",
}


def plan_label(p) -> str:
    """A plan's degrees and knobs in one line: dp, tp, pp, cp, vpp, micro-batch, recompute
    (with its block size), ZeRO stage (``/rN``: hybrid sharding over N replicas), sequence
    parallelism."""
    block = f"/{p.recompute_num_layers}" if p.recompute_num_layers else ""
    hybrid = f"/r{p.dp_replicate}" if getattr(p, "dp_replicate", 1) > 1 else ""
    return (f"dp{p.dp} tp{p.tp} pp{p.pp} cp{p.cp} vpp{p.vpp} mbs{p.micro_batch_size} "
            f"{p.recompute}{block} zero{p.zero_stage}{hybrid}"
            + (" sp" if p.sequence_parallel else ""))


def _published(run_id: str) -> dict:
    from published_accuracy import load_runs
    return next(r for r in load_runs() if r["id"] == run_id)


def model_on_reference(run_id: str) -> dict:
    """The step model on the published run itself (from the accuracy corpus): its predicted
    MFU and its error on that run, to tell a better plan from an optimistic model; and the
    run's measured MFU in the planner's convention."""
    from published_accuracy import predict_run
    run = _published(run_id)
    est, _ = predict_run(run)
    measured = run["measured"]["step_time_s"]
    return {"run": run_id, "predicted_mfu": round(est.mfu, 3),
            "measured_mfu": round(est.mfu * est.step_time_s / measured, 3),
            "error_pct": round(100 * (measured - est.step_time_s) / est.step_time_s, 1)}


def run_moe(model: str, gpus: int) -> dict:
    """A MoE cell: the free search's winner under the default dispatch and its settings hint,
    beside the published run of ``MOE_CELLS``."""
    ref = _published(MOE_CELLS[(model, gpus)])
    shape = {k: ref["training"][k] for k in ("global_batch_size", "seq_length", "precision",
                                              "fp8_recipe", "moe_load_imbalance",
                                              "moe_capacity_factor") if k in ref["training"]}
    req = PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"preset": "dgx-h100", "num_nodes": gpus // 8},
        # No time limit in effect: a loaded machine must not turn the answer into another.
        "training": shape, "search": {"top_k": 1, "time_limit_ms": 600_000}})
    t0 = time.perf_counter()
    res = answer(req)
    on_ref = model_on_reference(ref["id"])
    row = {"class": "moe", "model": model, "gpu": "h100", "gpus": gpus,
           "status": res.search.status, "training": shape,
           "search_ms": round((time.perf_counter() - t0) * 1e3),
           "reference_mfu": on_ref["measured_mfu"], "model_on_reference": on_ref,
           "reference": ref["citation"].split(",")[0] + f" ({ref['id']})"}
    if res.plans:
        p = res.plans[0]
        row.update({"plan": plan_label(p) + f" ep{p.ep}", "mfu": round(p.mfu, 3),
                    "step_time_s": round(p.step_time_s, 3), "caveats": p.caveats})
    for h in res.settings_hints:
        q = h.plan
        row["settings_hint"] = {
            "changes": h.changes, "mfu": round(h.mfu, 3),
            "step_time_s": round(h.step_time_s, 3), "faster_pct": round(h.faster_pct, 1),
            "plan": (f"dp{q['dp']} tp{q['tp']} pp{q['pp']} cp{q['cp']} vpp{q['vpp']} "
                     f"mbs{q['micro_batch_size']} {q['recompute']} zero{q['zero_stage']} "
                     f"ep{q['ep']}")}
    return row


def run(model: str, gpu: str, gpus: int, tp_overlap: bool = False) -> dict:
    shape = dict(MODELS[model])
    per = 2 if shape["seq_length"] == 2048 else 8
    shape["global_batch_size"] = max(shape["global_batch_size"], gpus // per)
    req = PlanRequest.model_validate({
        "model": {"preset": model},
        "cluster": {"preset": CLUSTERS[gpu], "num_nodes": gpus // 8},
        "training": {**shape, "precision": "bf16"},
        "search": {"top_k": 1},
    })
    t0 = time.perf_counter()
    res = plan(req)
    ms = (time.perf_counter() - t0) * 1e3
    ref_mfu, ref_id, ref_text = REFERENCES[(model, gpu)]
    row = {"model": model, "gpu": gpu, "gpus": gpus, "status": res.search.status,
           "model_on_reference": model_on_reference(ref_id),
           "global_batch_size": shape["global_batch_size"],
           "search_ms": round(ms), "reference_mfu": ref_mfu, "reference": ref_text}
    if res.plans:
        p = res.plans[0]
        row.update({
            "plan": plan_label(p),
            "mfu": round(p.mfu, 3), "step_time_s": round(p.step_time_s, 3),
            "memory_gib": round(p.memory_per_gpu_gib, 1), "frameworks": p.frameworks,
            "gap_points": round(100 * (p.mfu - ref_mfu), 1),
            # The MFU the winner would run at if it measured as the median held-out run of its
            # class on its GPU family did against the model (``step_time_band``).
            "band_median_mfu": round(p.mfu * p.step_time_s / p.step_time_band.median_s, 3),
            "band_gpu": p.step_time_band.gpu,
            "breakdown": {k: round(v, 3) for k, v in p.breakdown.items() if v > 0},
            "caveats": p.caveats,
        })
        # With ``tp_overlap``, the same search with TP communication overlap
        # (training.tp_comm_overlap), which NVIDIA's recipes run.
        over = plan(req.model_copy(update={"training": req.training.model_copy(
            update={"tp_comm_overlap": "te"})})) if tp_overlap else None
        if over is not None and over.plans:
            q = over.plans[0]
            row["tp_overlap"] = {"plan": plan_label(q), "mfu": round(q.mfu, 3),
                                 "step_time_s": round(q.step_time_s, 3)}
    else:
        row["reason"] = res.infeasible_reasons[0] if res.infeasible_reasons else ""
    return row


CAVEAT_LABELS = (("MFU", "MFU above published"),
                 ("fine-grained MoE", "fine-grained MoE"),
                 ("event simulation", "unequal chunks"))


def caveat_labels(caveats: list[str]) -> str:
    """Short labels of a winner's caveats for the table (the JSON has them in full)."""
    return "; ".join(label for key, label in CAVEAT_LABELS if any(key in c for c in caveats))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = [run(m, g, n, tp_overlap=True) for m in MODELS for g in CLUSTERS for n in GPUS]
    print(f"{'model':<12}{'gpu':<6}{'gpus':>7}  {'winner':<50}{'mfu':>6}{'band':>6}{'ref':>6}"
          f"{'gap':>6}{'model on ref':>14}{'tp overlap':>11}  caveat")
    for r in rows:
        ref = r["model_on_reference"]
        if "plan" in r:
            over = r.get("tp_overlap")
            print(f"{r['model']:<12}{r['gpu']:<6}{r['gpus']:>7}  {r['plan']:<50}"
                  f"{r['mfu']:>6.3f}{r['band_median_mfu']:>6.3f}{r['reference_mfu']:>6.3f}"
                  f"{r['gap_points']:>+6.1f}"
                  f"{ref['predicted_mfu']:>7.3f} {ref['error_pct']:>+5.1f}%"
                  f"{over['mfu'] if over else '-':>11}"
                  f"  {caveat_labels(r['caveats'])}")
        else:
            print(f"{r['model']:<12}{r['gpu']:<6}{r['gpus']:>7}  {r['status']:<46}")
    moe = [run_moe(m, n) for m, n in MOE_CELLS]
    print(f"\n{'MoE on H100':<18}{'gpus':>5}  {'default dispatch':<48}{'mfu':>6}  "
          f"{'DeepEP + EP overlap (settings hint)':<52}{'mfu':>6}{'ref':>6}{'model on ref':>14}")
    for r in moe:
        ref, hint = r["model_on_reference"], r.get("settings_hint")
        print(f"{r['model']:<18}{r['gpus']:>5}  {r.get('plan', r['status']):<48}"
              f"{r['mfu'] if 'mfu' in r else '-':>6}  "
              f"{hint['plan'] if hint else '(under 5% faster)':<52}"
              f"{hint['mfu'] if hint else '-':>6}{r['reference_mfu']:>6.3f}"
              f"{ref['predicted_mfu']:>7.3f} {ref['error_pct']:>+5.1f}%")
    if args.json:
        args.json.write_text(json.dumps(rows + moe, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
