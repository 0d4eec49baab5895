"""Megatron-LM (Megatron-Core) command-line arguments for a plan it runs as predicted.

Flag names are those of Megatron-LM (``megatron/training/arguments.py`` and the config
dataclasses it turns into flags, ``model_parallel_config.py``, ``transformer_config.py``; read
at d98e8a6): ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
``--context-parallel-size`` with ``--cp-comm-type p2p`` (ring attention), ``a2a``
(all-to-all, ``TrainingSpec.ring_attention`` 'a2a') or ``a2a+p2p`` with
``--hierarchical-context-parallel-sizes`` (both, 'a2a+p2p' with ``cp_a2a_size``),
``--num-virtual-stages-per-pipeline-rank`` and
``--microbatch-group-size-per-virtual-pipeline-stage`` (interleaved 1F1B), the pipeline
layout (``--decoder-first/last-pipeline-num-layers``, ``--account-for-embedding-in-pipeline-split``
and ``--account-for-loss-in-pipeline-split``, or ``--pipeline-model-parallel-layout`` for
anything else), ``--sequence-parallel`` (with ``--tp-comm-overlap`` where
``TrainingSpec.tp_comm_overlap`` is 'te'), ``--recompute-granularity`` and
``--recompute-method`` (with ``--distribute-saved-activations`` where the plan keeps 1/tp of
each checkpointed input), ``--use-distributed-optimizer`` (ZeRO-1) and Megatron-FSDP
(``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads|optim_grads_params``,
ZeRO-2/3, which needs ``--ckpt-format fsdp_dtensor``), ``--num-distributed-optimizer-instances``
(hybrid sharding, ``plan.dp_replicate``), and the model-shape flags.

Mixture of experts (``transformer_config.py``, ``arguments.py`` ``_add_moe_args``):
``--num-experts``, ``--moe-router-topk``, ``--moe-ffn-hidden-size``,
``--moe-shared-expert-intermediate-size`` (all shared experts together), ``--moe-layer-freq``
(a pattern such as ``([0]*3+[1]*58)`` when dense layers lead), ``--expert-model-parallel-size``,
``--expert-tensor-parallel-size`` (passed always: Megatron's default is tp),
``--moe-token-dispatcher-type alltoall`` (or ``flex`` with ``--moe-flex-dispatcher-backend
deepep``: the dispatcher the step model costs), ``--overlap-moe-expert-parallel-comm
--delay-wgrad-compute`` (EP all-to-all overlap),
``--moe-grouped-gemm``, ``--moe-router-score-function sigmoid`` (DeepSeek-V3) and
``--moe-expert-capacity-factor``. MLA: ``--multi-latent-attention``, ``--q-lora-rank``,
``--kv-lora-rank``, ``--qk-head-dim``, ``--qk-pos-emb-head-dim``, ``--v-head-dim``.
``--attention-dropout 0.0 --hidden-dropout 0.0`` unless ``training.dropout`` (both default
to 0.1 in ``transformer_config.py``).
"""

from __future__ import annotations

from planner.cost.layers import distributes_saved_input
from planner.launch.context import TORCH_DTYPE, LaunchContext
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
    if m.mla:
        args += ["--multi-latent-attention", "--kv-lora-rank", str(m.kv_lora_rank),
                 "--qk-head-dim", str(m.d_head),
                 "--qk-pos-emb-head-dim", str(m.qk_rope_head_dim),
                 "--v-head-dim", str(m.v_dim)]
        if m.q_lora_rank:
            args += ["--q-lora-rank", str(m.q_lora_rank)]
    else:
        if m.kv_heads != m.num_attention_heads:
            args += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
        if m.head_dim is not None and m.head_dim * m.num_attention_heads != m.hidden_size:
            args += ["--kv-channels", str(m.head_dim)]
    if m.num_sliding_window_layers:
        notes.append(f"{m.num_sliding_window_layers} of {m.num_layers} layers attend within "
                     f"{m.sliding_window} tokens: set Megatron's --window-size and "
                     "--window-attn-skip-freq to that pattern")
    if t.loss_implementation != "megatron":
        notes.append(f"the plan was costed with the {t.loss_implementation} cross-entropy "
                     "(training.loss_implementation); Megatron-LM runs its vocab-parallel "
                     "one, which holds 6 bytes a logit at its peak (its Transformer Engine "
                     "fusion is refused by megatron/training/arguments.py)")
    if not t.dropout:
        # TransformerConfig's hidden_dropout and attention_dropout default to 0.1: left
        # unset, the run would store dropout masks the plan was not costed (or sized) with.
        args += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    if m.ffn_type == "swiglu":
        args += ["--swiglu"]
    if not m.tied_embeddings:
        args += ["--untie-embeddings-and-output-weights"]
    args += [
        "--tensor-model-parallel-size", str(p.tp),
        "--pipeline-model-parallel-size", str(p.pp),
        "--context-parallel-size", str(p.cp),
    ]
    if p.cp > 1:      # Transformer Engine's ring, or its all-to-all (DeepSpeed-Ulysses')
        if t.ring_attention == "a2a+p2p" and t.cp_a2a_size:
            args += ["--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes",
                     str(t.cp_a2a_size), str(p.cp // t.cp_a2a_size)]
            notes.append("hierarchical context parallelism needs Transformer Engine 1.12 or "
                         "later (megatron/core/extensions/transformer_engine.py asserts it)")
        else:
            args += ["--cp-comm-type", "a2a" if t.ring_attention == "a2a" else "p2p"]
    args += moe_args(ctx)
    if m.mtp_num_layers:      # on the last pipeline stage (Megatron-LM's default)
        args += ["--mtp-num-layers", str(m.mtp_num_layers)]
    args += _pipeline_layout(ctx)
    args += ["--micro-batch-size", str(p.micro_batch_size),
             "--global-batch-size", str(t.global_batch_size)]
    if p.sequence_parallel:
        args += ["--sequence-parallel"]
        if ctx.tp_overlap == "te":      # Transformer Engine's userbuffers (tp_overlap.py)
            args += ["--tp-comm-overlap"]
        elif t.tp_comm_overlap == "te" and p.tp > 1:
            notes.append("--tp-comm-overlap left off, as predicted: the TP group spans NVLink "
                         "domains, where Transformer Engine's userbuffers do not run")
    if p.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
        if t.recompute_modules != ("core_attn",):
            # Megatron-LM examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh passes
            # "--recompute-modules mlp moe mla_up_proj layernorm".
            args += ["--recompute-modules", *t.recompute_modules]
    elif p.recompute == "full" and p.recompute_num_layers:
        args += ["--recompute-granularity", "full", "--recompute-method", "block",
                 "--recompute-num-layers", str(p.recompute_num_layers)]
    elif p.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", "1"]
    if distributes_saved_input(t, p):
        args += ["--distribute-saved-activations"]
    if p.cpu_offload_layers:
        # TransformerConfig.cpu_offloading_num_layers; validate_args turns on cpu_offloading.
        args += ["--cpu-offloading-num-layers", str(p.cpu_offload_layers)]
    if p.zero_stage >= 1:
        args += ["--use-distributed-optimizer"]
    if p.zero_stage >= 2:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                 SHARDING[p.zero_stage], "--ckpt-format", "fsdp_dtensor"]
    if p.dp_replicate > 1:
        # Hybrid sharding: the distributed optimizer's instances (Megatron-FSDP's HSDP, its
        # --outer-dp-sharding-strategy left at no_shard: the replicas all-reduce).
        args += ["--num-distributed-optimizer-instances", str(p.dp_replicate)]
    if TORCH_DTYPE[t.precision] == "bfloat16":         # bf16, and fp8 / fp4 over bf16 weights
        args += ["--bf16"]
    elif t.precision == "fp16":
        args += ["--fp16"]
    if t.precision == "fp8":
        args += ["--fp8-format", "hybrid"]
        if t.fp8_recipe != "delayed":
            # Megatron-LM's default recipe is delayed scaling; TransformerConfig refuses
            # moe_act / layernorm recompute with it (planner.frameworks does too).
            args += ["--fp8-recipe", t.fp8_recipe]
        if t.fp8_param_gather:
            args += ["--fp8-param-gather"]
    if t.precision == "fp4":
        # NVFP4 (TransformerConfig fp4 / fp4_recipe; Transformer Engine >= 2.7); its weights
        # gathered in fp4 under --fp4-param-gather.
        args += ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]
        if t.fp8_param_gather:
            args += ["--fp4-param-gather"]
    if t.attention_kernel == "flash2" and t.flash_attention:
        args += ["--attention-backend", "flash"]
    if not (t.flash_attention or t.softmax_fusion):
        # megatron/training/arguments.py: "Disable fusion of query_key_value scaling,
        # masking, and softmax" (dest masked_softmax_fusion), which Megatron-Core's own
        # DotProductAttention reads (its FusedScaleMaskSoftmax); the local transformer
        # implementation builds that attention instead of Transformer Engine's.
        args += ["--transformer-impl", "local", "--no-masked-softmax-fusion"]
    if t.grad_dtype == "bf16":
        args += ["--grad-reduce-in-bf16"]
    if t.optimizer_state_dtype != "fp32":
        args += ["--use-precision-aware-optimizer", "--exp-avg-dtype", t.optimizer_state_dtype,
                 "--exp-avg-sq-dtype", t.optimizer_state_dtype]
    if t.overlap_grad_reduce:
        args += ["--overlap-grad-reduce"]
        if t.overlap_param_gather and p.zero_stage >= 1:
            args += ["--overlap-param-gather"]
    return args, notes


def moe_args(ctx: LaunchContext) -> list[str]:
    """The expert layers and their parallelism (empty for a dense model)."""
    p, m, t = ctx.plan, ctx.model, ctx.training
    if not m.is_moe:
        return []
    args = ["--num-experts", str(m.experts), "--moe-router-topk", str(m.top_k),
            "--moe-ffn-hidden-size", str(m.expert_ffn)]
    if m.shared_ffn:
        args += ["--moe-shared-expert-intermediate-size", str(m.shared_ffn)]
    if m.num_moe_layers != m.num_layers:
        args += ["--moe-layer-freq", moe_layer_pattern(m)]
    if m.moe_router_score == "sigmoid":
        args += ["--moe-router-score-function", "sigmoid"]
    if m.moe_router_num_groups is not None:
        args += ["--moe-router-num-groups", str(m.moe_router_num_groups),
                 "--moe-router-group-topk", str(m.moe_router_group_topk)]
    args += ["--expert-model-parallel-size", str(p.ep),
             "--expert-tensor-parallel-size", str(p.etp)]
    if t.moe_dispatcher == "deepep":
        args += ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend",
                 "deepep"]
    else:
        args += ["--moe-token-dispatcher-type", "alltoall"]
    # Transformer Engine's fused permute and unpermute, the token copies the plan is costed
    # with (training.moe_routing 'fused'; TransformerConfig.moe_permute_fusion).
    args += ["--moe-grouped-gemm", "--moe-permute-fusion"]
    if t.moe_a2a_overlap:
        args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    if t.moe_capacity_factor is not None:
        args += ["--moe-expert-capacity-factor", f"{t.moe_capacity_factor:g}"]
    return args


def moe_layer_pattern(model) -> str:
    """Megatron's list form of ``--moe-layer-freq`` (1: MoE layer, 0: dense), run-length
    encoded: ``([0]*3+[1]*58)``."""
    k, f = model.first_k_dense_layers, model.moe_layer_freq
    flags = [int(i >= k and (i + 1) % f == 0) for i in range(model.num_layers)]
    runs: list[list[int]] = []
    for x in flags:
        if runs and runs[-1][0] == x:
            runs[-1][1] += 1
        else:
            runs.append([x, 1])
    return "(" + "+".join(f"[{x}]*{n}" for x, n in runs) + ")"


def _pipeline_layout(ctx: LaunchContext) -> list[str]:
    """Interleaving and the split of layers over stages, in the form Megatron-LM accepts for
    this layout (at most one of the layout forms may be given; arguments.py validate_args)."""
    p = ctx.plan
    if p.pp == 1:
        return []
    layout = ctx.layout
    out: list[str] = []
    if layout.kind == "custom":
        return ["--pipeline-model-parallel-layout",
                megatron_layout_string(layout, ctx.model.mtp_num_layers)] + (
            _interleaved(ctx))
    if p.vpp > 1:
        out += ["--num-virtual-stages-per-pipeline-rank", str(p.vpp)]
    if layout.kind == "embedding_loss":
        out += ["--account-for-embedding-in-pipeline-split",
                "--account-for-loss-in-pipeline-split"]
    elif layout.kind == "first_last":
        out += ["--decoder-first-pipeline-num-layers", str(layout.stages[0]),
                "--decoder-last-pipeline-num-layers", str(layout.stages[-1])]
    return out + _interleaved(ctx)


def _interleaved(ctx: LaunchContext) -> list[str]:
    """The interleaved schedule's micro-batch group when not the default, and its blocking
    send/recv where the training says so (Megatron-LM overlaps them by default:
    ``--no-overlap-p2p-communication``, ``TrainingSpec.overlap_p2p_comm``)."""
    p = ctx.plan
    if p.vpp == 1:
        return []
    g = p.microbatch_group_size
    out = (["--microbatch-group-size-per-virtual-pipeline-stage", str(g)]
           if g is not None and g != p.pp else [])
    if not ctx.training.overlap_p2p_comm:
        out += ["--no-overlap-p2p-communication"]
    return out
