"""Megatron-LM training logs written the way Megatron-LM writes them (``_print_args`` in
megatron/training/arguments.py, ``training_log`` in megatron/training/training.py and the
tokenizer's padded-vocabulary line, read at d98e8a6), from a launch's arguments: what
``planner.calibration.megatron_log`` must read back into the run."""

from __future__ import annotations

from planner.calibration.megatron_log import layout_chunks
from tests.launch_readers import megatron_parser

# Flags whose destination is a config attribute of another name (argparse_meta arg_names).
DEST = {"fp8_format": "fp8",
        "microbatch_group_size_per_virtual_pipeline_stage": "microbatch_group_size_per_vp_stage"}
DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16",
          "fp8": "torch.uint8"}


def printed_args(argv: list[str], world: int) -> dict:
    """The arguments as validate_args leaves them (the values _print_args prints)."""
    a = vars(megatron_parser().parse_args(argv))
    out = {DEST.get(k, k): v for k, v in a.items()}
    out["world_size"] = world
    v = out.pop("num_virtual_stages_per_pipeline_rank", None)
    if out.get("pipeline_model_parallel_layout"):     # the stages the layout holds
        v = len(layout_chunks(out["pipeline_model_parallel_layout"],
                              out["pipeline_model_parallel_size"])[0])
    out["virtual_pipeline_model_parallel_size"] = v if v and v > 1 else None
    if out.get("kv_channels") is None:
        out["kv_channels"] = out["hidden_size"] // out["num_attention_heads"]
    out["attention_backend"] = f"AttnBackend.{out.get('attention_backend') or 'auto'}"
    for k in ("exp_avg_dtype", "exp_avg_sq_dtype"):
        out[k] = DTYPES[out.get(k) or "fp32"]
    if out.get("cp_comm_type") is None:
        out["cp_comm_type"] = ["p2p"]
    freq = out.get("moe_layer_freq")
    if freq is not None and "[" in freq:
        out["moe_layer_freq"] = eval(freq, {"__builtins__": {}})   # moe_freq_type
    elif out.get("num_experts"):
        out["moe_layer_freq"] = 1
    if out.get("num_experts") and out.get("expert_tensor_parallel_size") is None:
        out["expert_tensor_parallel_size"] = out["tensor_model_parallel_size"]
    if out.get("use_megatron_fsdp") is False:
        out["data_parallel_sharding_strategy"] = out.get("data_parallel_sharding_strategy") \
            or "optim_grads_params"
    return out


def megatron_log(argv: list[str], world: int, vocab: int, padded: int,
                 iteration_ms: list[float], log_interval: int = 10,
                 prefix: str = "") -> str:
    """A rank-0 log: start-up lines, the arguments block, the padded vocabulary, one line
    per logged interval."""
    args = printed_args(argv, world)
    lines = [f"{prefix}using world size: {world}", f"{prefix}"
             "------------------------ arguments ------------------------"]
    rows = [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in args.items()]
    lines += [prefix + r for r in sorted(rows, key=str.lower)]
    lines.append(f"{prefix}-------------------- end of arguments ---------------------")
    lines.append(f"{prefix} > padded vocab (size: {vocab}) with {padded - vocab} dummy tokens "
                 f"(new size: {padded})")
    total = log_interval * len(iteration_ms)
    for i, ms in enumerate(iteration_ms, 1):
        it = i * log_interval
        lines.append(
            f"{prefix} [2026-12-05 08:00:{i:02d}.000000] iteration {it:8d}/{total:8d} | "
            f"consumed samples: {it * args['global_batch_size']:12d} | elapsed time per "
            f"iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 400.0 | "
            f"learning rate: 3.000000E-04 | global batch size: {args['global_batch_size']:5d} "
            f"| lm loss: 7.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped "
            f"iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"
