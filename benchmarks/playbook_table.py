"""The Hugging Face Ultra-Scale Playbook's benchmark grid as a published table
(``data/tables/ultrascale_playbook_1node.json``) that ``published_accuracy.py --data`` replays.

Source: the playbook's interactive benchmark figure (``assets/data/benchmarks/
benchmarks_interactive.html`` of the book's public repository; one point a run, its hover text
printing the nodes, micro-batch size, gradient accumulation, global batch, DP, PP, TP, ZeRO
stage, MFU, tokens per second per GPU and for the job, and memory), runs of nanotron on
1-64 nodes of 8 H100 at sequence 4,096 and a global batch of about 1M tokens. The models are
those of nanotron's ``scripts/scaling_benchmarks.py`` (``SHAPES``: multi-head attention, a
131,072-token vocabulary, embeddings tied below an MLP width of 10,000), which the figure's
parameter counts (1.34, 3.57, 8.86 and 80 billion) confirm.

Only the single-node runs become the table: across nodes the playbook's cluster ran over AWS
EFA (the book: "communicating between nodes (EFA)"), whose collectives the book measured far
below an InfiniBand DGX's (all-gather bus bandwidth of 256 MB falling from 185 GB/s on 2 nodes
to 11 on 64, its ``pp_comm_bandwidth`` figure), a network no preset describes. A run the
figure marks as crashed or out of memory (no throughput) is not a measurement and is left out.

Usage: python benchmarks/playbook_table.py benchmarks_interactive.html [--nodes N] > table.json
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from pathlib import Path

from published_accuracy import predict_run

from planner.cost.caveats import layer_ms as estimate_layer_ms

# scripts/scaling_benchmarks.py model_configs: (layers, hidden, heads, MLP width).
SHAPES = {"1B": (16, 2048, 32, 8192), "3B": (28, 3072, 32, 8192),
          "8B": (32, 4096, 32, 14336), "80B": (80, 8192, 64, 28672)}
VOCAB = 131072
SEQ = 4096
# The figure's four panels, left to right.
PANELS = {"x": "1B", "x2": "3B", "x3": "8B", "x4": "80B"}

SOURCE = ("Hugging Face, The Ultra-Scale Playbook (nanotron), interactive benchmark figure "
          "assets/data/benchmarks/benchmarks_interactive.html (public mirror "
          "vinjn/nanotron-ultrascale-playbook at 924e4d0); model shapes from nanotron "
          "scripts/scaling_benchmarks.py (huggingface/nanotron e24d248), software of nanotron's "
          "bench2 branch the benchmarks ran (67c5ebb, 2024-12-27)")
CONVENTIONS = ("tokens per second of the whole job as published (nanotron's log of the third "
               "iteration alone, trainer.py log_throughput under NANOTRON_BENCHMARK=1)")
TRAINING = {
    "precision": "bf16", "flash_attention": True, "attention_kernel": "flash2",
    "dropout": False, "norm_fusion": True, "vocab_parallel_loss": True,
    # accumulate_grad_in_fp32: every micro-batch's bf16 gradients added into fp32 buffers by
    # the gradient accumulator, the reduction in fp32.
    "grad_dtype": "fp32", "microbatch_grad_copy": True,
    # ZeRO-1's all-gather of the updated bf16 weights is one blocking call (optim/zero.py).
    "overlap_param_gather": False,
}


def nanotron_split(model: str, pp: int) -> list[int]:
    """Transformer layers on each pipeline stage as nanotron's ``build_model`` places them
    (src/nanotron/models/base.py at 67c5ebb): the pipeline blocks in order (embedding, the
    layers, final norm, LM head, fp32 cast, loss) weighted by ``get_block_compute_costs``
    (models/llama.py: a layer 4 a d h + 3 f h, the head V h, the rest 0), each block on the
    current stage, the next stage taken once the running cost passes that stage's share
    (r + 1) / pp of the total. The last stage can end up with the LM head and the loss alone
    (0 layers), which the planner states (Megatron-LM's layout '...|L'); where the head lands
    a stage before the loss, two stages hold no layer, which it cannot: such rows are refused
    when replayed."""
    layers, h, heads, f = SHAPES[model]
    layer = 4 * heads * (h // heads) * h + 3 * f * h
    costs = [0] + [layer] * layers + [0, VOCAB * h, 0, 0]
    total = sum(costs)
    stage, out = 0, [0] * pp
    for i, running in enumerate(accumulate(costs)):
        if 1 <= i <= layers:
            out[stage] += 1
        if running > total * (stage + 1) / pp:
            stage += 1
    return out


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("%", "").replace("GB", "").strip())


def points(html: str) -> list[dict]:
    """Every point of the figure's four panels: its hover text's fields and its model.
    Raises ValueError when the text holds no Plotly figure."""
    at = html.find("Plotly.newPlot(")
    start = html.find("[", at) if at >= 0 else -1
    if start < 0:
        raise ValueError("no Plotly figure (Plotly.newPlot) in the file")
    try:
        traces, _ = json.JSONDecoder().raw_decode(html[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the figure's traces are not JSON: {exc}") from exc
    seen, out = set(), []
    for trace in traces:
        model = PANELS.get(trace.get("xaxis"))
        if model is None or not isinstance(trace.get("text"), list):
            continue
        for text in trace["text"]:       # each point is drawn twice (marker and outline)
            fields = dict(re.findall(r"([A-Za-z/ ]+?):\s*([^<]+)", text.replace("\t", " ")))
            key = (model, tuple(sorted(fields.items())))
            if key not in seen:
                seen.add(key)
                out.append({"model": model, **{k.strip(): v.strip() for k, v in fields.items()}})
    return out


def model_fields(model: str) -> dict:
    """The planner's model fields of one of the benchmark's models ('1B', '3B', '8B', '80B')."""
    layers, h, heads, f = SHAPES[model]
    return {"name": f"nanotron benchmark {model}", "num_layers": layers, "hidden_size": h,
            "num_attention_heads": heads, "num_kv_heads": heads, "ffn_hidden_size": f,
            "ffn_type": "swiglu", "vocab_size": VOCAB, "tied_embeddings": f < 10_000}


def row(point: dict) -> dict:
    """A table row of one point (a run that completed)."""
    model = point["model"]
    dp, tp, pp = (int(point[k]) for k in ("DP", "TP", "PP"))
    zero, mbs, nodes = int(point["ZeRO"]), int(point["MBS"]), int(point["Nodes"])
    plan: dict = {"vpp": 1}
    if pp > 1:
        plan["layers_per_stage"] = nanotron_split(model, pp)
    return {
        "id": f"usp-{model.lower()}-n{nodes}-dp{dp}-tp{tp}-pp{pp}-mbs{mbs}-"
              f"acc{point['GradAcc']}-z{zero}",
        "sweep": f"usp-{model.lower()}-{nodes}-node", **model_fields(model),
        "gpus": 8 * nodes, "dp": dp, "tp": tp, "pp": pp, "micro_batch_size": mbs,
        "zero_stage": zero, "recompute": "none", "sequence_parallel": tp > 1,
        "global_batch_size": int(point["GBS"]), "seq_length": SEQ,
        "tokens_per_s": _number(point["tok/s"]),
        # ZeRO-0: torch DDP's 25 MB buckets reduced beside the last micro-batch's backward;
        # ZeRO-1: the whole fp32 buffer all-reduced after the backward, not reduce-scattered
        # (trainer.py: 'This is too memory hungry, instead we run all_reduce').
        "overlap_grad_reduce": zero == 0, "zero_grad_allreduce": zero >= 1,
        "plan": plan}


def table(html: str, nodes: int = 1) -> dict:
    """The table document of the figure's completed runs on ``nodes`` nodes (more than one:
    on the DGX H100 preset's InfiniBand, which is not the EFA they ran over: module
    docstring)."""
    rows = [row(p) for p in points(html)
            if int(p["Nodes"]) == nodes and "nan" not in p["MFU"]]
    rows.sort(key=lambda r: r["id"])
    return {"source": SOURCE, "hardware": "8 x H100 80GB SXM per node (NVSwitch)",
            "conventions": CONVENTIONS, "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
            "training": TRAINING, "rows": rows}


def layer_ms(run: dict, measured_step_s: float) -> tuple[float, float]:
    """(the model's kernels, the measured step less the model's other parts) a layer a
    micro-batch on the busiest stage of a replayed run, ms: where the first is small and the
    second is not, the run waited on something else than its kernels (README, 'A new
    stack')."""
    return estimate_layer_ms(predict_run(run)[0], measured_step_s)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    nodes = 1
    if len(args) == 3 and args[1] == "--nodes" and args[2].isdigit() and int(args[2]) >= 1:
        args, nodes = args[:1], int(args[2])
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        doc = table(Path(args[0]).read_text(), nodes)
    except (OSError, UnicodeDecodeError, ValueError, KeyError) as exc:
        print(f"error: {args[0]}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
