"""MoE token dispatch: the model's latency of one dispatch against the Megatron Core MoE report's
measurement on H100 (arXiv 2603.07685, section 4.2.2, Table 7: hidden 7168, sequence 4096, 256
experts; the table states neither top-k nor the routing, so DeepSeek-V3's top-8 with 8 groups,
top-4, is assumed), for Megatron's NCCL all-to-all dispatcher and for DeepEP (against the
report's HybridEP), at EP 8 to 64 on DGX H100 nodes.

    python benchmarks/moe_dispatch.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from planner.cost.efficiency import EfficiencyModel
from planner.cost.tables import CostTables
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

# Table 7, H100 dispatch latency (us): EP size -> (all-to-all, HybridEP).
TABLE7_H100_DISPATCH_US = {8: (1265, 661), 16: (5774, 1485), 32: (8059, 3064), 64: (9164, 4626)}


def dispatch_us(model: ModelSpec, ep: int, dispatcher: str) -> float:
    """The model's time of one dispatch of 4,096 tokens a rank over ``ep`` H100 ranks (eight
    a node), balanced routing."""
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=max(1, ep // 8))
    training = TrainingSpec(global_batch_size=64, seq_length=4096, moe_dispatcher=dispatcher,
                            moe_load_imbalance=1.0)
    tables = CostTables(model, cluster, training, EfficiencyModel())
    (use,) = tables.ep_uses(1, 1, 1, 0, 0, 8, ep, 1)
    return use.cost.time_s * 1e6


def rows() -> list[dict]:
    ds = ModelSpec.from_preset("deepseek-v3")
    free = ds.model_copy(update={"moe_router_num_groups": None, "moe_router_group_topk": None})
    out = []
    for ep, (a2a, hybrid) in TABLE7_H100_DISPATCH_US.items():
        out.append({"ep": ep, "alltoall_measured_us": a2a,
                    "alltoall_model_us": round(dispatch_us(ds, ep, "alltoall")),
                    "hybridep_measured_us": hybrid,
                    "deepep_model_us": round(dispatch_us(ds, ep, "deepep")),
                    "deepep_model_without_groups_us": round(dispatch_us(free, ep, "deepep"))})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    table = rows()
    print(f"{'EP':>4}{'all-to-all':>12}{'model':>8}{'err':>7}{'HybridEP':>10}{'DeepEP model':>14}"
          f"{'err':>7}{'no groups':>11}")
    for r in table:
        e1 = r["alltoall_model_us"] / r["alltoall_measured_us"] - 1
        e2 = r["deepep_model_us"] / r["hybridep_measured_us"] - 1
        print(f"{r['ep']:>4}{r['alltoall_measured_us']:>12}{r['alltoall_model_us']:>8}"
              f"{100 * e1:>+6.0f}%{r['hybridep_measured_us']:>10}{r['deepep_model_us']:>14}"
              f"{100 * e2:>+6.0f}%{r['deepep_model_without_groups_us']:>11}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
