"""Megatron-LM (Megatron-Core) command-line arguments for a plan it runs as predicted.

Flag names are those of Megatron-LM (``megatron/training/arguments.py`` and the config
dataclasses it turns into flags, ``model_parallel_config.py``, ``transformer_config.py``; read
at d98e8a6): ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
``--context-parallel-size`` with ``--cp-comm-type p2p`` (ring attention),
``--num-virtual-stages-per-pipeline-rank`` and
``--microbatch-group-size-per-virtual-pipeline-stage`` (interleaved 1F1B), the pipeline
layout (``--decoder-first/last-pipeline-num-layers``, ``--account-for-embedding-in-pipeline-split``
and ``--account-for-loss-in-pipeline-split``, or ``--pipeline-model-parallel-layout`` for
anything else), ``--sequence-parallel``, ``--recompute-granularity`` and
``--recompute-method``, ``--use-distributed-optimizer`` (ZeRO-1) and Megatron-FSDP
(``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads|optim_grads_params``,
ZeRO-2/3, which needs ``--ckpt-format fsdp_dtensor``), and the model-shape flags.
"""

from __future__ import annotations

from planner.launch.context import LaunchContext
from planner.specs.layout import megatron_layout_string

SHARDING = {2: "optim_grads", 3: "optim_grads_params"}


def megatron_args(ctx: LaunchContext) -> tuple[list[str], list[str]]:
    """(argv after the script name, notes)."""
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
    if p.cp > 1:
        args += ["--cp-comm-type", "p2p"]
    args += _pipeline_layout(ctx)
    args += ["--micro-batch-size", str(p.micro_batch_size),
             "--global-batch-size", str(t.global_batch_size)]
    if p.sequence_parallel:
        args += ["--sequence-parallel"]
    if p.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif p.recompute == "full" and p.recompute_num_layers:
        args += ["--recompute-granularity", "full", "--recompute-method", "block",
                 "--recompute-num-layers", str(p.recompute_num_layers)]
    elif p.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", "1"]
    if p.zero_stage >= 1:
        args += ["--use-distributed-optimizer"]
    if p.zero_stage >= 2:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                 SHARDING[p.zero_stage], "--ckpt-format", "fsdp_dtensor"]
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
        if t.overlap_param_gather and p.zero_stage >= 1:
            args += ["--overlap-param-gather"]
    return args, notes


def _pipeline_layout(ctx: LaunchContext) -> list[str]:
    """Interleaving and the split of layers over stages, in the form Megatron-LM accepts for
    this layout (at most one of the layout forms may be given; arguments.py validate_args)."""
    p = ctx.plan
    if p.pp == 1:
        return []
    layout = ctx.layout
    out: list[str] = []
    if layout.kind == "custom":
        return ["--pipeline-model-parallel-layout", megatron_layout_string(layout)] + (
            _group(ctx))
    if p.vpp > 1:
        out += ["--num-virtual-stages-per-pipeline-rank", str(p.vpp)]
    if layout.kind == "embedding_loss":
        out += ["--account-for-embedding-in-pipeline-split",
                "--account-for-loss-in-pipeline-split"]
    elif layout.kind == "first_last":
        out += ["--decoder-first-pipeline-num-layers", str(layout.stages[0]),
                "--decoder-last-pipeline-num-layers", str(layout.stages[-1])]
    return out + _group(ctx)


def _group(ctx: LaunchContext) -> list[str]:
    p = ctx.plan
    g = p.microbatch_group_size
    if p.vpp > 1 and g is not None and g != p.pp:
        return ["--microbatch-group-size-per-virtual-pipeline-stage", str(g)]
    return []
