"""Megatron-LM (Megatron-Core) command-line arguments for a plan.

Flag names are those of ``megatron/training/arguments.py``: ``--tensor-model-parallel-size``,
``--pipeline-model-parallel-size``, ``--context-parallel-size``,
``--num-virtual-stages-per-pipeline-rank`` (interleaved 1F1B),
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` (uneven first
and last stages), ``--sequence-parallel``, ``--recompute-granularity`` and
``--recompute-method``, ``--use-distributed-optimizer`` (ZeRO-1), and the model-shape flags.
"""

from __future__ import annotations

from planner.launch.context import LaunchContext


def megatron_args(ctx: LaunchContext) -> tuple[list[str], list[str]]:
    """(argv after the script name, notes on what Megatron-LM cannot express)."""
    p, m, t = ctx.plan, ctx.model, ctx.training
    notes: list[str] = []
    args = [
        "--num-layers", str(m.num_layers),
        "--hidden-size", str(m.hidden_size),
        "--num-attention-heads", str(m.num_attention_heads),
        "--ffn-hidden-size", str(m.ffn),
        "--seq-length", str(t.seq_length),
        "--max-position-embeddings", str(t.seq_length),
    ]
    if m.kv_heads != m.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
    if m.head_dim is not None and m.head_dim * m.num_attention_heads != m.hidden_size:
        args += ["--kv-channels", str(m.head_dim)]
    if m.ffn_type == "swiglu":
        args += ["--swiglu"]
    if not m.tied_embeddings:
        args += ["--untie-embeddings-and-output-weights"]
    args += [
        "--tensor-model-parallel-size", str(p.tp),
        "--pipeline-model-parallel-size", str(p.pp),
        "--context-parallel-size", str(p.cp),
    ]
    if p.vpp > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(p.vpp)]
    uneven = ctx.uneven_stages
    if uneven is not None:
        args += ["--decoder-first-pipeline-num-layers", str(uneven[0]),
                 "--decoder-last-pipeline-num-layers", str(uneven[1])]
    args += ["--micro-batch-size", str(p.micro_batch_size),
             "--global-batch-size", str(t.global_batch_size)]
    if p.sequence_parallel:
        args += ["--sequence-parallel"]
    if p.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif p.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", "1"]
    if p.zero_stage >= 1:
        args += ["--use-distributed-optimizer"]
    if p.zero_stage >= 2:
        notes.append(f"Megatron-LM's distributed optimizer shards optimizer states (ZeRO-1); "
                     f"zero_stage={p.zero_stage} also shards gradients"
                     + (" and weights" if p.zero_stage == 3 else "")
                     + ": use torchtitan (FSDP2) or DeepSpeed for that memory saving")
    if t.precision in ("bf16", "fp8"):
        args += ["--bf16"]
    elif t.precision == "fp16":
        args += ["--fp16"]
    if t.precision == "fp8":
        args += ["--fp8-format", "hybrid"]
    if t.grad_dtype == "bf16":
        args += ["--grad-reduce-in-bf16"]
    if t.overlap_grad_reduce:
        args += ["--overlap-grad-reduce"]
    return args, notes
