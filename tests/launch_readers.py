"""Readers of launch artifacts, written from the frameworks' own argument and config names,
for the tests: each turns an artifact back into the plan it describes (degrees, ZeRO stage,
layers per stage and per chunk, micro-batches), so a test can check that the artifact runs
exactly the predicted plan."""

from __future__ import annotations

import argparse

import tomllib


def megatron_parser() -> argparse.ArgumentParser:
    # The flags as Megatron-LM defines them (megatron/training/arguments.py and the config
    # dataclasses it turns into flags).
    ap = argparse.ArgumentParser()
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
                 "--seq-length", "--max-position-embeddings", "--num-query-groups",
                 "--kv-channels", "--tensor-model-parallel-size",
                 "--pipeline-model-parallel-size", "--context-parallel-size",
                 "--num-virtual-stages-per-pipeline-rank", "--decoder-first-pipeline-num-layers",
                 "--decoder-last-pipeline-num-layers", "--micro-batch-size",
                 "--global-batch-size", "--recompute-num-layers",
                 "--microbatch-group-size-per-virtual-pipeline-stage", "--num-experts",
                 "--moe-router-topk", "--moe-ffn-hidden-size",
                 "--moe-shared-expert-intermediate-size", "--expert-model-parallel-size",
                 "--expert-tensor-parallel-size", "--q-lora-rank", "--kv-lora-rank",
                 "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim",
                 "--mtp-num-layers", "--cpu-offloading-num-layers",
                 "--num-distributed-optimizer-instances"):
        ap.add_argument(flag, type=int)
    for flag in ("--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
                 "--sequence-parallel", "--use-distributed-optimizer", "--bf16", "--fp16",
                 "--overlap-grad-reduce", "--overlap-param-gather", "--grad-reduce-in-bf16",
                 "--account-for-embedding-in-pipeline-split",
                 "--account-for-loss-in-pipeline-split", "--use-megatron-fsdp",
                 "--moe-grouped-gemm", "--moe-permute-fusion", "--multi-latent-attention",
                 "--distribute-saved-activations"):
        ap.add_argument(flag, action="store_true")
    ap.add_argument("--recompute-granularity", choices=["full", "selective"])
    ap.add_argument("--recompute-method", choices=["uniform", "block"])
    ap.add_argument("--fp8-format", choices=["e4m3", "hybrid"])
    ap.add_argument("--fp8-recipe", choices=["tensorwise", "delayed", "mxfp8", "blockwise"])
    ap.add_argument("--recompute-modules", nargs="+",
                    choices=["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                             "shared_experts"])
    ap.add_argument("--cp-comm-type", nargs="+")
    ap.add_argument("--hierarchical-context-parallel-sizes", nargs="+", type=int)
    ap.add_argument("--pipeline-model-parallel-layout")
    ap.add_argument("--data-parallel-sharding-strategy",
                    choices=["no_shard", "optim", "optim_grads", "optim_grads_params"])
    ap.add_argument("--ckpt-format")
    ap.add_argument("--moe-token-dispatcher-type", choices=["allgather", "alltoall", "flex"])
    ap.add_argument("--moe-flex-dispatcher-backend", choices=["deepep", "hybridep", "ncclep"])
    for flag in ("--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"):
        ap.add_argument(flag, action="store_true")
    ap.add_argument("--moe-router-score-function", choices=["softmax", "sigmoid"])
    ap.add_argument("--moe-router-num-groups", type=int)
    ap.add_argument("--use-precision-aware-optimizer", action="store_true")
    for flag in ("--exp-avg-dtype", "--exp-avg-sq-dtype"):
        ap.add_argument(flag, choices=["fp32", "fp16", "bf16", "fp8"])
    ap.add_argument("--moe-router-group-topk", type=int)
    ap.add_argument("--moe-layer-freq")
    ap.add_argument("--attention-backend", choices=["flash", "fused", "unfused", "local", "auto"])
    ap.add_argument("--no-masked-softmax-fusion", action="store_false",
                    dest="masked_softmax_fusion")
    ap.add_argument("--no-overlap-p2p-communication", action="store_false",
                    dest="overlap_p2p_comm")
    ap.add_argument("--transformer-impl", choices=["local", "transformer_engine"],
                    default="transformer_engine")
    ap.add_argument("--moe-expert-capacity-factor", type=float)
    # TransformerConfig's defaults (transformer_config.py).
    ap.add_argument("--attention-dropout", type=float, default=0.1)
    ap.add_argument("--hidden-dropout", type=float, default=0.1)
    return ap


def moe_layer_flags(freq: str | None, num_layers: int) -> list[int]:
    """Megatron-LM's ``moe_freq_type``: an int N (layer i is MoE when i % N == 0) or a list
    expression evaluated to one 0/1 per layer."""
    if freq is None:
        return [1] * num_layers
    if "[" not in freq:
        return [int(i % int(freq) == 0) for i in range(num_layers)]
    flags = eval(freq, {"__builtins__": {}})   # the pattern grammar Megatron evaluates
    assert len(flags) == num_layers
    return flags


def _chunks_from_virtual(virtual: list[int], pp: int) -> list[list[int]]:
    vpp = len(virtual) // pp
    return [[virtual[c * pp + r] for c in range(vpp)] for r in range(pp)]


def _spread(n: int, v: int) -> list[int]:
    return [n // v] * v      # even chunks inside a stage (Megatron's non-layout forms)


def megatron_plan(argv: list[str], world: int) -> dict:
    """The plan Megatron-LM would run from these arguments on ``world`` ranks."""
    a = megatron_parser().parse_args(argv)
    tp, pp, cp = (a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
                  a.context_parallel_size)
    L = a.num_layers
    dp = world // (tp * pp * cp)
    if a.pipeline_model_parallel_layout:
        stages = a.pipeline_model_parallel_layout.split("|")
        assert stages[0].startswith("E") and stages[-1].endswith("L")
        # validate_layer_layout: as many 'm' as --mtp-num-layers, after every decoder layer.
        flat = "".join(stages)
        assert flat.count("m") == (a.mtp_num_layers or 0)
        assert "t" not in flat[flat.index("m"):] if "m" in flat else True
        chunks = _chunks_from_virtual([s.count("t") for s in stages], pp)
    else:
        v = a.num_virtual_stages_per_pipeline_rank or 1
        if a.account_for_embedding_in_pipeline_split:
            assert a.account_for_loss_in_pipeline_split
            u = (L + 2) // (pp * v)
            assert (L + 2) % (pp * v) == 0
            chunks = [[u] * v for _ in range(pp)]
            chunks[0][0] -= 1
            chunks[-1][-1] -= 1
        elif a.decoder_first_pipeline_num_layers is not None:
            first, last = a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers
            mid = (L - first - last) // (pp - 2) if pp > 2 else 0
            assert pp == 2 or (L - first - last) % (pp - 2) == 0
            stages_l = [first] + [mid] * (pp - 2) + [last]
            assert all(n % v == 0 for n in stages_l)
            chunks = [_spread(n, v) for n in stages_l]
        else:
            assert L % (pp * v) == 0
            chunks = [[L // (pp * v)] * v for _ in range(pp)]
    if a.use_megatron_fsdp:
        zero = {"optim_grads": 2, "optim_grads_params": 3, "optim": 1,
                "no_shard": 0}[a.data_parallel_sharding_strategy]
    else:
        zero = 1 if a.use_distributed_optimizer else 0
    instances = a.num_distributed_optimizer_instances or 1
    if instances > 1:    # distributed_data_parallel.py, parallel_state.py
        assert a.use_distributed_optimizer, "Partial DistOpt cannot be used without DistOpt"
        assert (dp * cp) % instances == 0
    if a.cpu_offloading_num_layers:      # TransformerConfig.__post_init__'s rules
        assert 0 < a.cpu_offloading_num_layers < L and pp == 1
        assert a.recompute_granularity is None
    if a.distribute_saved_activations:   # arguments.py validate_args, TransformerConfig
        assert tp > 1 and a.recompute_granularity == "full" and a.recompute_method
        assert not a.sequence_parallel
    m = a.global_batch_size // (a.micro_batch_size * dp)
    vpp = len(chunks[0])
    ep = a.expert_model_parallel_size or 1
    etp = a.expert_tensor_parallel_size or tp        # Megatron's default: tp
    if a.num_experts:
        # parallel_state.initialize_model_parallel and validate_args.
        assert world % (etp * ep * pp) == 0 and a.num_experts % ep == 0
        assert a.moe_token_dispatcher_type in ("alltoall", "flex")
        if a.overlap_moe_expert_parallel_comm:     # transformer_config.py's asserts
            assert ep > 1 and a.recompute_granularity != "full"
            # (A layout string sets the virtual stages too: arguments.py validate_args.)
            assert pp == 1 or vpp > 1
        assert tp == 1 or a.sequence_parallel       # MoE layers raise otherwise
    return {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "vpp": vpp, "zero_stage": zero,
            "dp_replicate": instances, "ep": ep, "etp": etp if a.num_experts else 1,
            "micro_batch_size": a.micro_batch_size, "grad_accum_steps": m,
            "sequence_parallel": a.sequence_parallel,
            "dropout": a.attention_dropout > 0 or a.hidden_dropout > 0,
            "recompute": a.recompute_granularity or "none",
            "distribute_saved_activations": a.distribute_saved_activations,
            "cpu_offload_layers": a.cpu_offloading_num_layers or 0,
            "recompute_num_layers": a.recompute_num_layers
            if a.recompute_method == "block" else None,
            "layers_per_stage": [sum(c) for c in chunks], "layers_per_chunk": chunks,
            "microbatch_group_size": (a.microbatch_group_size_per_virtual_pipeline_stage or pp)
            if vpp > 1 else None}


def torchtitan_plan(text: str, num_layers: int) -> dict:
    """The plan torchtitan (v0.2.2 JobConfig) would run from these config sections."""
    cfg = tomllib.loads(text)
    par, tr = cfg["parallelism"], cfg["training"]
    rep, shard = par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]
    dp = rep * shard
    tp, pp, cp = (par["tensor_parallel_degree"], par["pipeline_parallel_degree"],
                  par["context_parallel_degree"])
    reshard = par.get("fsdp_reshard_after_forward", "default")
    # ParallelDims.fsdp_enabled: dp_shard > 1 or cp > 1 (FSDP over dp_shard x cp, HSDP
    # with the replicas outside); otherwise DDP over the replicas. Under a pipeline, FSDP not
    # resharded after forward ("default" there, or "never") gathers once and reduce-scatters
    # once a step (torch.distributed.pipelining syncs at the last micro-batch): ZeRO-1.
    if shard == 1 and cp == 1:
        zero = 0
    elif reshard == "always":
        zero = 3
    elif pp > 1:
        zero = 1
    else:
        assert reshard == "never"       # "default" reshards without a pipeline: ZeRO-3
        zero = 2
    if dp == 1:
        zero = None                     # nothing to shard: any stage stands for all
    chunks = [[num_layers]]
    mbs = tr["local_batch_size"]
    if pp > 1:
        mbs = par["pipeline_parallel_microbatch_size"]
        if "module_fqns_per_model_part" in par:
            parts = par["module_fqns_per_model_part"]
            assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]
            virtual = [sum(x.startswith("layers.") for x in part) for part in parts]
            listed = [x for part in parts for x in part if x.startswith("layers.")]
            assert listed == [f"layers.{i}" for i in range(num_layers)]
        else:           # generate_llm_fqn_per_model_part: embedding and output as layers
            per = par["pipeline_parallel_layers_per_stage"]
            first = par["pipeline_parallel_first_stage_less_layers"]
            last = par["pipeline_parallel_last_stage_less_layers"]
            n = (num_layers + first + last) // per
            assert n * per == num_layers + first + last
            virtual = [per] * n
            virtual[0] -= first
            virtual[-1] -= last
        chunks = _chunks_from_virtual(virtual, pp)
    m = tr["global_batch_size"] // (mbs * dp)
    if pp > 1:
        sched = par["pipeline_parallel_schedule"]
        want = "Interleaved1F1B" if len(chunks[0]) > 1 else ("GPipe" if m < pp else "1F1B")
        assert sched == want, (sched, want)
    ep, etp = par.get("expert_parallel_degree", 1), par.get("expert_tensor_parallel_degree", 1)
    if ep > 1:   # v0.2.2 ParallelDims: EP borrows from dp_shard * cp (* tp when etp == 1)
        assert etp in (1, tp)
        region = shard * cp * tp if etp == 1 else shard * cp
        assert region % ep == 0 and ep % (cp * tp if etp == 1 else cp) == 0
    return {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "vpp": len(chunks[0]), "zero_stage": zero,
            "dp_replicate": rep if zero else 1, "ep": ep, "etp": etp, "micro_batch_size": mbs,
            "grad_accum_steps": m, "sequence_parallel": tp > 1,
            "recompute": cfg["activation_checkpoint"]["mode"],
            "cpu_offload_layers": 0,           # torchtitan offloads no activations
            "layers_per_stage": [sum(c) for c in chunks], "layers_per_chunk": chunks}


def deepspeed_plan(cfg: dict, world: int, num_layers: int) -> dict:
    """The plan DeepSpeed would run from this config (and a PipelineModule as the notes say)."""
    tp = cfg.get("tensor_parallel", {}).get("autotp_size", 1) or 1
    pp = cfg.get("pipeline", {}).get("stages", 1)
    if pp > 1:
        assert cfg["pipeline"]["partition"] == "uniform" and num_layers % pp == 0
    dp = world // (tp * pp)
    mbs = cfg["train_micro_batch_size_per_gpu"]
    m = cfg["gradient_accumulation_steps"]
    # DeepSpeed's batch check: micro-batch x accumulation x its world size, every rank
    # without an mpu (AutoTP), the data-parallel ranks under the pipeline engine's.
    assert cfg["train_batch_size"] == mbs * m * dp * tp
    # MiCS (zero/mics.py, mics_utils.py): ZeRO-3 shard groups of mics_shard_size
    # consecutive global ranks, replicated across the others.
    shard = cfg["zero_optimization"].get("mics_shard_size", -1)
    if shard > 0:
        assert cfg["zero_optimization"]["stage"] == 3 and world % shard == 0 and tp == 1
    # AutoEP (deepspeed/module_inject/auto_ep_folding.py build_folding_spec): ep divides the
    # stage and, without AutoTP folding, groups ep consecutive ranks; its expert tensor
    # parallelism is reserved (1 only); ZeRO-1/2 with experts assert reduce_scatter.
    autoep = cfg.get("expert_parallel", {})
    ep = autoep.get("autoep_size", 1) if autoep.get("enabled") else 1
    if ep > 1:
        assert world % ep == 0 and tp == 1 and pp == 1 and shard <= 0
        assert cfg["zero_optimization"].get("reduce_scatter", True)
        assert autoep.get("expert_tensor_parallel_size", 1) == 1
    return {"dp": dp, "tp": tp, "pp": pp, "cp": 1, "vpp": 1, "ep": ep, "etp": 1,
            "dp_replicate": dp // shard if shard > 0 else 1,
            "zero_stage": cfg["zero_optimization"]["stage"], "micro_batch_size": mbs,
            "grad_accum_steps": m, "sequence_parallel": False, "cpu_offload_layers": 0,
            "distribute_saved_activations": cfg.get("activation_checkpointing", {}).get(
                "partition_activations", False),
            "layers_per_stage": [num_layers // pp] * pp}
