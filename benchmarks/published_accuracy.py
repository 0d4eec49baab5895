"""Predicted vs published TFLOP/s per GPU for Megatron-LM's weak-scaling runs (SC'21 Table 1).

Each row is estimated with the paper's own model shape, batch, sequence, (t, p, d) degrees and
software of the time: fp16 mixed precision, full activation recomputation, dropout, fused
softmax (no FlashAttention), gradient all-reduce after the backward pass (no overlap), tied
embeddings, plain 1F1B. The micro-batch size is not published; the benchmark lets the planner
pick the fastest one that fits in memory, as a user tuning the run would. The published figure
counts the recomputed forward pass, so it is compared with ``hardware_tflops_per_gpu``. One
efficiency model (the defaults) serves every row: no per-row factor.

    python benchmarks/published_accuracy.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from planner.cost import EfficiencyModel, estimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations

# A copy of ../shared/data/megatron_sc21_table1.json, kept in the repository so the benchmark
# and its test run on any clone.
DATA = Path(__file__).resolve().parent / "data" / "megatron_sc21_table1.json"


def load_rows(path: Path) -> list[dict]:
    return json.loads(path.read_text())["rows"]


def predict_row(row: dict, eff: EfficiencyModel) -> dict:
    model = ModelSpec(
        name=row["model"], num_layers=row["num_layers"], hidden_size=row["hidden_size"],
        num_attention_heads=row["num_attention_heads"], ffn_type="gelu",
        vocab_size=row["vocab_size"], tied_embeddings=True,
    )
    cluster = ClusterSpec.from_preset("dgx-a100", num_nodes=row["gpus"] // 8)
    training = TrainingSpec(
        global_batch_size=row["global_batch_size"], seq_length=row["seq_length"],
        precision="fp16", optimizer="adam", grad_dtype="fp32", flash_attention=False,
        dropout=True, overlap_grad_reduce=False,
    )
    best = None
    for mbs in (1, 2, 4, 8, 16):
        plan = ParallelPlan(dp=row["dp"], tp=row["tp"], pp=row["pp"], micro_batch_size=mbs,
                            recompute="full")
        if plan_violations(plan, model, cluster, training):
            continue
        est = estimate(model, cluster, training, plan, eff)
        if est.fits_in_memory and (best is None or est.step_time_s < best.step_time_s):
            best = est
    if best is None:
        raise RuntimeError(f"{row['model']}: no micro-batch size fits")
    published = row["tflops_per_gpu_published"]
    predicted = best.hardware_tflops_per_gpu
    return {
        "model": row["model"], "gpus": row["gpus"], "tp": row["tp"], "pp": row["pp"],
        "dp": row["dp"], "micro_batch_size": best.micro_batch_size,
        "published_tflops": published, "predicted_tflops": round(predicted, 2),
        "error_pct": round(100 * (predicted - published) / published, 2),
        "memory_gib": round(best.memory_per_gpu_gib, 1),
        "bubble_s": round(best.breakdown["pipeline_bubble"], 2),
        "step_time_s": round(best.step_time_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="megatron_sc21_table1.json")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    eff = EfficiencyModel()
    rows = [predict_row(r, eff) for r in load_rows(args.data)]
    header = (f"{'model':<12}{'gpus':>6}{'t':>3}{'p':>4}{'d':>4}{'mbs':>5}"
              f"{'published':>11}{'predicted':>11}{'error %':>9}{'mem GiB':>9}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<12}{r['gpus']:>6}{r['tp']:>3}{r['pp']:>4}{r['dp']:>4}"
              f"{r['micro_batch_size']:>5}{r['published_tflops']:>11.1f}"
              f"{r['predicted_tflops']:>11.1f}{r['error_pct']:>+9.2f}{r['memory_gib']:>9.1f}")
    abs_err = [abs(r["error_pct"]) for r in rows]
    summary = {"median_abs_error_pct": round(statistics.median(abs_err), 2),
               "mean_abs_error_pct": round(statistics.mean(abs_err), 2),
               "max_abs_error_pct": round(max(abs_err), 2)}
    print(f"\nmedian |error| {summary['median_abs_error_pct']:.2f}%   "
          f"mean {summary['mean_abs_error_pct']:.2f}%   max {summary['max_abs_error_pct']:.2f}%")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "summary": summary,
                                         "efficiency": eff.model_dump()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
