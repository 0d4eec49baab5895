"""Published runs given as a table (``{"source", "hardware", "conventions", "rows": [...]}``,
one row per run with the model's shape, the GPUs, the degrees, the batch and the published
figure) turned into the corpus's requests, so that ``published_accuracy.py --data table.json``
replays a table as it stands in a paper without hand-encoding every run first.

A row that is a run of the corpus (``data/published_runs.json``: the same model shape, sequence,
batch, GPUs and degrees on the same GPU family) is replayed as the corpus encodes it (its
settings, its unpublished knobs, its split), with the table's figure as the measurement. Any
other row is built from what the row and the table say, and every setting neither states is
listed under the run's ``assumed``:

- columns: the corpus's names (``gpus``, ``seq_length``, ``global_batch_size``, ``tp``, ...)
  or the usual others (``num_gpus``, ``seq_len``, ``batch_size``, ``tensor_parallel``, ...:
  ``_ALIASES``); model fields by the planner's ModelSpec names;
- GPUs: the row's or the table's ``cluster`` (a planner cluster spec), else the cloud
  instance the ``hardware`` text names by type (AWS p4d, p4de, p5, p5e, p5en where the text
  is AWS's; Azure's ND A100 v4, NDm A100 v4, ND H100 v5, ND H200 v5; Google Cloud's A3 Ultra)
  on its preset, else the GPU the ``hardware`` text names (A100 40/80 GB, H100, H200, H800,
  B200, B300, GB200, GB300) on its DGX, HGX or NVL72 preset, V100 (16/32 GB) on its DGX-2
  or DGX-1 preset, or AMD's MI300X and MI325X on their 8-GPU nodes and MI250X (Frontier,
  LUMI-G) as one GPU a GCD, with the per-node network the text gives as ``N x R Gb/s`` (or
  Gbps, or G; a single rate is one NIC's unless the text calls it the node's or it is faster
  than the preset's NICs), over RoCE or Ethernet where the text names them and InfiniBand
  otherwise;
- a model named only by its size ("7b") under a table that names llm-foundry (MPT's) or IBM's
  fms-fsdp (its Llama 2 variants); a batch smaller than the data-parallel ranks is each rank's;
- software of the time: a source dated before 2023 (its arXiv number, else a year, a venue's
  'YY or a release's YY.MM in its text: ``table_rules.year``) ran without FlashAttention,
  with dropout, fp32 gradients and no gradient or parameter overlap (Megatron-LM's defaults
  until its 2023 releases; FlashAttention-2 and the overlapped distributed optimizer came that
  year); before 2021 also the attention scores scaled, masked and softmaxed by separate
  kernels, the column-parallel all-reduce blocking the backward and fp16 gradients
  all-reduced in fp16 (``_BEFORE_2021``); one that names Megatron-LM (not NVIDIA's recipes or
  Megatron-Core) before April 2024 (its arXiv number's month, else 2023) the same, Megatron-LM's
  own defaults until Transformer Engine's attention became its default
  (``table_rules.megatron_lm_defaults``); a later one with the planner's defaults; a ZeRO-3
  row of 2021 or before DeepSpeed's ZeRO-3 of then, each tensor gathered on its own into
  per-rank copies (``table_rules.zero3_of_2021``);
- software of the framework the source, the conventions or the row name
  (``table_rules.framework``), for what the row leaves out: DeepSpeed (and the trainers on
  it, BigScience's Megatron-DeepSpeed and GPT-NeoX) sends its pipeline activations split over
  the TP ranks (``p2p_scatter_gather``, as the corpus's Megatron-DeepSpeed runs), gathers the
  updated weights after the optimizer step, reduces at the end of its pipeline schedule,
  blocks the backward on the column-parallel all-reduce, under fp16 reduces fp16
  gradients and under bf16 (from April 2022, DeepSpeed #1801) adds every micro-batch's
  gradients into fp32 ones (BF16_Optimizer: ``microbatch_grad_copy``), and BigScience's fork
  runs no FlashAttention; torchtitan runs what a torchtitan search costs
  (``FRAMEWORK_TRAINING``: FSDP2's per-parameter copies, PyTorch's ring attention), selective
  recompute by its per-op policy (the Llama 3 configs' ``selective_ac_option = "op"``,
  torchtitan/models/llama3/train_configs/llama3_8b.toml at v0.2.2), attention through
  PyTorch's SDPA, whose flash backend is FlashAttention-2 (``attention_kernel`` 'flash2' on
  the GPUs that have its rates), and eager elementwise kernels and loss unless the row (or,
  where the row says nothing, the table) names torch.compile; NVIDIA's published NeMo,
  Megatron-Bridge and DGX Cloud Benchmarking runs of 2023 on reduce bf16 gradients, overlap
  their TP communication (as does a text that names AsyncTP or TP communication overlap:
  ``training.tp_comm_overlap``, its share hidden at the default 0.8) and from 2025 gather fp8
  weights in fp8 training, Megatron-Bridge's with Transformer Engine's fused loss; Aleph Alpha's
  trainer (Hagemann et al.'s) reduces bf16 gradients whole in fp32 after the backward, runs
  eager elementwise kernels (and RMSNorm unless the RMS kernel is named), gathers the logits
  for an fp32 loss, reruns the head under checkpointing and brings three column-parallel
  inputs a layer into TP with a blocking all-reduce; FSDP (PyTorch's or FairScale's, as
  OPT-175B's metaseq ran it; torchtitan's and llm-foundry's have their own settings)
  reduce-scatters each module's gradients beside the rest of the backward, in the 16-bit
  compute dtype, whatever the date; IBM's fms-fsdp runs uncompiled unless the row names
  torch.compile (eager RMSNorm, rotary and SwiGLU, K and V expanded, SDPA's FlashAttention-2,
  an eager loss), its "selective" checkpointing every n-th block whole (n = 1-4 tuned); a
  "Compile" column of Y or N names torch.compile or not, and a row that names it is no corpus
  run that ran uncompiled;
  a row that names HSDP or hybrid sharding shards over a node's data-parallel ranks and
  replicates over the nodes, one that gives its shard group ("sharded across 128 GPUs",
  MiCS's shard size) over that many (``table_rules.hybrid_shard``); llm-foundry's MPT runs
  its fused loss, the Triton FlashAttention its benchmark script ran until March 2024 where
  the GPU has that kernel's rates, else FlashAttention-2, and reduces in bf16 under
  Composer's PURE mixed precision;
- the attention a row's words (else the table's) name, where they name exactly one:
  FlashAttention-2, v1 (FlashAttention unqualified where FlashAttention-2 is named too or
  before 2023), Triton's, Megatron's fused softmax, or none ("Without FlashAttention",
  "torch"), or minGPT's eager attention with its dropout (``table_rules.attention``);
- the fp8 recipe (and NVFP4) the row's words or else the table's name: FP8-CS or current
  scaling, FP8-MX or MXFP8, FP8-BLK or blockwise, delayed scaling, NVFP4 (``table_rules``);
- for a MoE model, the dispatcher (DeepEP, HybridEP, the flex dispatcher), a capacity factor,
  the EP all-to-all overlap and forced balance where the words name them (``table_rules``), and
  the balanced routing of NVIDIA's published MoE runs (``table_rules.moe``);
- the ZeRO stage a row leaves out from its words or the table's (ZeRO-N, FSDP, distributed
  optimizer), else from the framework (torchtitan's FSDP2, llm-foundry's FSDP, DeepSpeed's
  and NVIDIA's recipes' ZeRO-1), else 0 (``table_rules.zero``);
- unpublished knobs are tuned as the corpus tunes them (the fastest that fits): the micro-batch
  size (1, 2, 4, 8), the recompute mode where neither the row nor the conventions name one,
  sequence parallelism for tensor-parallel rows from 2022 on (not on BigScience's
  Megatron-DeepSpeed, nor Microsoft's before July 2023 or GPT-NeoX before August 2024, which
  had none), and the virtual stages of a
  pipelined row that does not give them where its text names the interleaved schedule or,
  from 2023 on, names no schedule and no framework without one (1F1B alone, GPipe,
  DeepSpeed, Aleph Alpha's trainer, torchtitan's default: ``table_rules.schedule``); a VP
  column's "n/a" is no virtual stages.

The published figure becomes a step time: ``step_time_s``, ``tokens_per_s``,
``tokens_per_s_per_gpu`` or ``samples_per_s`` directly; TFLOP/s per GPU through the FLOPs
convention the table states (``conventions``, or a row's ``flops_convention``): Megatron-LM's
96 B s l h^2 (1 + s/6h + V/16lh) with the recomputed forward (Narayanan et al., SC'21, eq. 3),
its 72 B s l h^2 (1 + s/6h + V/12lh) without (the same paper's count less one forward of the
layers), 6 N per token (Kaplan et al. 2020) or PaLM's 6 N + 12 L H Q T (Chowdhery et al.
2022, appendix B; H Q the hidden size), N from the row's ``params_billion`` or else the model's
(active) parameters; an MFU figure (fraction or percent) through the same convention over the
GPU's 16-bit peak.
"""

from __future__ import annotations

import copy
import json
import math
import re

import table_rules as rules

from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

# The GPU a hardware description names, most specific first: (pattern, cluster preset, GPU).
_HARDWARE = [
    (r"mi325x", "mi325x-8", None),
    (r"mi300x", "mi300x-8", None),
    (r"mi250x|frontier|lumi-g", "hpe-cray-ex235a", None),     # one GPU a GCD
    (r"gb300", "gb300-nvl72", None),
    (r"gb200", "gb200-nvl72", None),
    (r"\bb300", "dgx-b300", None),
    (r"\bb200", "dgx-b200", None),
    (r"h200", "dgx-h200", None),
    (r"h800", "hgx-h800", None),
    (r"h100", "dgx-h100", None),
    (r"a800", "hgx-a800", None),
    (r"a100[^,;]*?\b40\s*g(?:i?b)?\b", "dgx-a100", "a100-40gb"),    # "40GB", GLM's "(40G)"
    (r"\b40\s*g(?:i?b)?\s+a100", "dgx-a100", "a100-40gb"),    # BloombergGPT's "40GB A100"
    (r"a100", "dgx-a100", None),
    (r"v100[^,;]*?\b16\s*g(?:i?b)?\b", "dgx-1", "v100-16gb"),
    (r"v100", "dgx-1", None),          # a DGX-2 where the text names one (``_cluster``)
]
# Cloud instances a hardware text names by type (planner/specs/cloud.py), before any GPU name:
# AWS's where the text is AWS's (an instance size, EC2, EFA or AWS named), Azure's VM sizes
# and series, Google Cloud's A3 Ultra.
_AWS_TEXT = r"\baws\b|\bec2\b|amazon|xlarge|\befa"
_CLOUD = [
    (r"\bp4de\b", "aws-p4de", _AWS_TEXT),
    (r"\bp4d\b", "aws-p4d", _AWS_TEXT),
    (r"\bp5en\b", "aws-p5en", _AWS_TEXT),
    (r"\bp5e\b", "aws-p5e", _AWS_TEXT),
    (r"\bp5\b", "aws-p5", _AWS_TEXT),
    (r"\bnd96amsr a100 v4\b|\bndm a100 v4\b", "azure-ndm-a100-v4", ""),
    (r"\bnd96asr v4\b|\bnd a100 v4\b", "azure-nd-a100-v4", ""),
    (r"\bnd96isr h100 v5\b|\bnd h100 v5\b", "azure-nd-h100-v5", ""),
    (r"\bnd96isr h200 v5\b|\bnd h200 v5\b", "azure-nd-h200-v5", ""),
    (r"\ba3-ultragpu|\ba3 ultra\b", "gcp-a3-ultra", ""),
]
_FAMILY = {"dgx-1": "v100", "dgx-2": "v100", "dgx-a100": "a100", "hgx-a800": "a800",
           "dgx-h100": "h100",
           "dgx-h200": "h200", "hgx-h800": "h800", "dgx-b200": "b200", "dgx-b300": "b300",
           "gb200-nvl72": "gb200", "gb300-nvl72": "gb300", "hpe-cray-ex235a": "mi250x",
           "mi300x-8": "mi300x", "mi325x-8": "mi325x",
           "aws-p4d": "a100-40gb", "aws-p4de": "a100", "aws-p5": "h100", "aws-p5e": "h200",
           "aws-p5en": "h200", "azure-nd-a100-v4": "a100-40gb", "azure-ndm-a100-v4": "a100",
           "azure-nd-h100-v5": "h100", "azure-nd-h200-v5": "h200", "gcp-a3-ultra": "h200"}
_GPUS_PER_NODE = {"dgx-2": 16, "gb200-nvl72": 72, "gb300-nvl72": 72}
_HARDWARE_COLUMNS = ("hardware", "gpu", "system", "platform", "accelerator", "gpu_type")

# Legacy software (module docstring): what a pre-2023 source ran.
_LEGACY_TRAINING = {"flash_attention": False, "dropout": True, "overlap_grad_reduce": False,
                    "overlap_param_gather": False, "grad_dtype": "fp32"}
# Older still, by Megatron-LM's own defaults (megatron/arguments.py history): the scores' scale,
# mask and softmax ran as separate kernels until the fused kernel became the default on
# 2021-01-06 (9acc895632, "Change some arguments to default to on"), and fp16 gradients were
# all-reduced as they were until fp32 accumulation arrived in March 2021 (b4bc51b1e7); the
# column-parallel input all-reduce blocked the backward until it ran asynchronously by
# default from 2021-09-02 (3f65246911). A source of 2021 keeps the overlap, as the corpus keeps
# its 2021 runs (the README's "known misdescription": marking SC'21's fit table truthfully
# calls for a refit that is not made), so a table of that year replays as the corpus does.
_BEFORE_2021 = {"softmax_fusion": False, "async_tensor_model_parallel_allreduce": False}
_DEGREES = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp")
_DIRECT_METRICS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "samples_per_s")
_TFLOPS_KEYS = ("tflops_per_gpu_published", "tflops_per_gpu")
# MFU figures: a fraction or a percentage, against the 16-bit peak (``_with_mfu_step``).


def load_table(doc: dict, name: str, corpus: list[dict]) -> tuple[list[dict], list[dict]]:
    """(runs, {"id", "reason"} of the rows that cannot become one) of a table document
    (module docstring): rows as objects, or as lists of cells under the document's
    ``columns``; ``name`` names its source and prefixes its ids; ``corpus`` holds the runs a
    row may be (``published_accuracy.load_runs()``). Raises ValueError when the document has
    no rows at all."""
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{name}: 'rows' must be a non-empty list of runs")
    index: dict[str, list[dict]] = {}
    for r in corpus:
        if (key := _match_key(r)) is not None:
            index.setdefault(key, []).append(r)
    columns = doc.get("columns")
    runs, skipped = [], []
    for i, row in enumerate(rows):
        try:
            if isinstance(row, list) and isinstance(columns, list):
                # A table given as its header and its rows of cells, as printed.
                if len(row) != len(columns):
                    raise ValueError(f"a row of {len(row)} cells under {len(columns)} columns")
                row = dict(zip((str(c) for c in columns), row, strict=True))
            if not isinstance(row, dict):
                raise ValueError("a row must be an object (or a list of cells under the "
                                 "table's 'columns')")
            runs.append(_row_run(doc, row, name, i, index))
        except (KeyError, TypeError, ValueError) as exc:
            skipped.append({"id": f"{name} rows[{i}]", "reason": f"{type(exc).__name__}: {exc}"})
    return runs, skipped


# Other names tables give the same columns (first the name this module reads).
_ALIASES = {"gpus": ("num_gpus", "gpu_count", "world_size", "number_of_gpus", "of_gpus",
                     "n_gpus"),
            "nodes": ("num_nodes", "number_of_nodes", "node_count", "of_nodes", "n_nodes"),
            # llm-foundry's benchmark tables print "SeqLen (T)", "MicroBatchSize",
            # "GlobalBatchSize", "Throughput (S/s)", "Throughput (T/s)",
            # "Throughput (T/s/GPU)" and "NumParams".
            "seq_length": ("seq_len", "sequence_length", "context_length", "seqlen",
                           "seqlen_t"),
            "global_batch_size": ("batch_size", "gbs", "global_batch", "globalbatchsize"),
            "params_billion": ("model_size", "parameters", "params", "numparams",
                               "num_params", "parameters_billion", "params_b"),
            "micro_batch_size": ("mbs", "microbatchsize", "micro_batch", "microbatch_size"),
            # A batch in tokens (Llama 3's "Tokens/Batch", llm-foundry's "GlobalBatchSize
            # (T)") and one data-parallel rank's batch (Llama 3's "Batch size/DP").
            "global_batch_tokens": ("tokens_batch", "tokens_per_batch", "batch_tokens",
                                    "batch_size_tokens", "globalbatchsize_t",
                                    "global_batch_size_tokens", "tokens_per_step"),
            "batch_per_dp": ("batch_size_dp", "batch_size_per_dp", "batch_per_dp_rank",
                             "local_batch_size", "per_dp_batch_size"),
            # Gradient accumulation ("GA", llm-foundry's "GradAccum").
            "grad_accum": ("ga", "gradaccum", "gradient_accumulation_steps",
                           "gradient_accumulation", "accumulation_steps", "gas"),
            "num_layers": ("layers", "n_layers", "number_of_layers", "of_layers"),
            "hidden_size": ("hidden", "d_model", "hidden_dim", "model_dim"),
            "num_kv_heads": ("kv_heads", "num_key_value_heads", "query_groups",
                             "num_query_groups"),
            "num_attention_heads": ("heads", "n_heads", "num_heads", "attention_heads",
                                    "number_of_attention_heads"),
            # Megatron-LM's README prints "Tensor MP size", "Pipeline MP size" and
            # "Data-parallel size"; its arguments say tensor_model_parallel_size and so on.
            "tp": ("tensor_parallel", "tp_size", "tensor_mp_size", "tensor_parallel_size",
                   "tensor_model_parallel_size"),
            "pp": ("pipeline_parallel", "pp_size", "pipeline_mp_size", "pipeline_parallel_size",
                   "pipeline_model_parallel_size"),
            "dp": ("data_parallel", "dp_size", "data_parallel_size"),
            "cp": ("context_parallel", "cp_size", "context_parallel_size"),
            "ep": ("expert_parallel", "ep_size", "expert_model_parallel_size",
                   "expert_parallel_size"),
            "etp": ("expert_tensor_parallel", "etp_size", "expert_tensor_parallel_size"),
            "vpp": ("virtual_stages", "virtual_pipeline_stages", "vp", "virtual_pipeline_size",
                    "virtual_pipeline_model_parallel_size"),
            "step_time_s": ("iteration_time_s", "seconds_per_step", "step_time",
                            "iteration_time", "seconds_per_iteration", "time_per_step_s",
                            "elapsed_time_per_iteration_s", "step_time_sec",
                            # Nemotron-4 340B's report: "Iteration time (secs)".
                            "iteration_time_secs", "iteration_time_sec", "step_time_secs"),
            "step_time_ms": ("iteration_time_ms", "elapsed_time_per_iteration_ms",
                             "time_per_step_ms"),
            "tokens_per_s": ("tokens_s", "tokens_sec", "tokens_per_second", "throughput_tokens_s",
                             "tokens_per_sec", "throughput_t_s"),
            "samples_per_s": ("samples_s", "samples_sec", "samples_per_second", "sequences_s",
                              "throughput_samples_s", "samples_per_sec", "throughput_s_s"),
            "tokens_per_s_per_gpu": ("tokens_per_sec_per_gpu", "tps_per_gpu",
                                     "throughput_tokens_s_gpu", "tokens_gpu_s", "tgs",
                                     "tokens_s_per_gpu", "tokens_per_gpu_per_s",
                                     "tokens_sec_gpu", "tokens_s_gpu", "throughput_t_s_gpu"),
            "tflops_per_gpu": ("model_tflop_sec_gpu", "model_tflops_sec_gpu", "tflop_sec_gpu",
                               "tflops_gpu", "per_gpu_teraflop_s", "teraflop_s_per_gpu",
                               "tflop_s_per_gpu", "per_gpu_tflop_s",
                               # the FlashAttention-2 paper's "TFLOPs/s/GPU", "TFLOP/s/GPU",
                               # a log's "TFLOPs" (Megatron-LM's and BLOOM's, per GPU)
                               "tflops_s_gpu", "tflop_s_gpu", "tflops_per_gpu_s",
                               "teraflops_per_gpu", "model_tflops_per_gpu", "tflops",
                               # SC'21's "Achieved teraFLOP/s per GPU"
                               "achieved_teraflop_s_per_gpu", "achieved_tflop_s_per_gpu",
                               "achieved_tflops_per_gpu", "achieved_tflops",
                               "throughput_per_gpu_tflop_s"),
            # (not an "FP8 MFU": against which peak is the table's to say, not this reader's)
            "mfu": ("bf16_mfu", "model_flops_utilization", "mfu_pct", "mfu_percent")}


def _plain(name: str) -> str:
    """A header in its plainest words: seconds as s, teraFLOPs as tflop, "per" and
    "training" dropped (IBM fms-fsdp's "Training Throughput tokens/sec/GPU")."""
    words = [{"seconds": "s", "second": "s", "secs": "s", "sec": "s", "teraflops": "tflop",
              "teraflop": "tflop", "tflops": "tflop"}.get(w, w)
             for w in re.split(r"_+", name) if w and w not in ("per", "training")]
    return "_".join(words)


def _canonical(row: dict) -> dict:
    """The row under this module's column names: a header as a page prints it ("Seq Length",
    "#-GPUs", "VP", "Tokens / sec / GPU") in lower case with its other characters as single
    underscores, then the usual other names (``_ALIASES``)."""
    out = {}
    for key, value in row.items():
        norm = re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")
        out[norm if norm and norm not in row else key] = value
    for key, names in _ALIASES.items():
        for alias in names:
            if key not in out and alias in out:
                out[key] = out.pop(alias)
    # A header no name above matches, read once more in its plainest words ("Throughput
    # (samples/sec)", "Tokens per second per GPU", "TeraFLOPs per GPU").
    for header in [h for h in out if h not in _KNOWN]:
        key = _PLAIN_NAMES.get(_plain(header))
        if key is not None and key not in out:
            out[key] = out.pop(header)
    for key in _NUMERIC:
        if isinstance(out.get(key), str):
            text = out[key].strip().replace(",", "")
            if _NOT_APPLICABLE.fullmatch(text):
                if key == "vpp":
                    out[key] = 1            # a VP column's "n/a": no virtual stages
                else:
                    del out[key]            # "n/a", "-": the column does not apply
            elif key == "mfu" and re.fullmatch(r"\d+(?:\.\d+)?\s*%", text):
                out[key] = float(text.rstrip("% "))     # "38%", "41.5 %": a percentage
            elif key in _RATES and re.fullmatch(r"\d+(?:\.\d+)?\s*[km]", text.lower()):
                # A rate in thousands or millions (MegaScale's "39.3k" tokens/s).
                out[key] = float(text[:-1]) * (1e3 if text[-1] in "kK" else 1e6)
            elif key == "params_billion" and not re.fullmatch(r"\d*\.?\d+", text):
                # A model size as printed ("70B", "1.7B", "350M", "1T"); one that reads as
                # no size ("GPT-3") is left out: the model's own count stands for it.
                size = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([mbt])", text.lower())
                if size:
                    out[key] = float(size[1]) * {"m": 1e-3, "b": 1.0, "t": 1e3}[size[2]]
                    # A table whose only model column is its size, with no shape (IBM
                    # fms-fsdp's "Model Size": "7b"), names its model by it (``_model``).
                    if not any(k in out for k in ("model", "name", "num_layers",
                                                  "hidden_size")):
                        out["model"] = text
                else:
                    del out[key]
            elif re.fullmatch(r"\d+", text):
                out[key] = int(text)
            elif re.fullmatch(r"\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+", text.lower()):
                out[key] = float(text)
    # An activation checkpointing column (llm-foundry's "Activation Checkpointing": True or
    # False, each block checkpointed whole or none) where the row gives no recompute mode.
    column = next((k for k in _CHECKPOINTING if k in out), None)
    if "recompute" not in out and column is not None:
        said = str(out[column]).strip().lower()
        flag = _flag(said)
        mode = ("full" if flag else "none") if flag is not None else (
            said if said in ("full", "none", "selective") else None)
        if mode:
            out["recompute"] = mode
            del out[column]
        # Else its words ("No AC", "Selective AC") stay among the row's, which name the mode
        # (``table_rules.recompute``, read with the framework's meaning of it in ``_plan``).
    elif column is not None:
        del out[column]
    # A compile column (IBM fms-fsdp's "Compile": Y or N) said in the words the framework
    # rules read (``table_rules.framework``: "torch.compile", "no torch.compile").
    compiled = next((k for k in _COMPILE_COLUMNS if k in out), None)
    if compiled is not None:
        said = str(out.pop(compiled)).strip()
        flag = _flag(said)
        out["compile_words"] = said if flag is None else (      # else its own words
            "torch.compile" if flag else "no torch.compile")
    size = out.get("params_billion")
    if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 1e5:
        out["params_billion"] = size / 1e9      # a count of parameters, not of billions
    ms = out.pop("step_time_ms", None)
    if "step_time_s" not in out and isinstance(ms, (int, float)) and not isinstance(ms, bool):
        out["step_time_s"] = ms / 1000          # Megatron-LM's log prints milliseconds
    return out


_RATES = ("tokens_per_s", "tokens_per_s_per_gpu", "samples_per_s")
# Every name this module reads a column by, and each in its plainest words (``_plain``).
_KNOWN = {*_ALIASES, *(a for names in _ALIASES.values() for a in names)}
_PLAIN_NAMES = {_plain(n): key for key, names in _ALIASES.items() for n in (key, *names)}
_COMPILE_COLUMNS = ("compile", "torch_compile", "compiled")


def _flag(said: str) -> bool | None:
    """A yes/no cell ("Y", "True", "on", "1"; "N", "False", "off", "0") as a flag; None for
    anything else."""
    said = said.strip().lower()
    return True if said in ("y", "yes", "true", "on", "1") else (
        False if said in ("n", "no", "false", "off", "0") else None)
_CHECKPOINTING = ("activation_checkpointing", "activation_checkpoint", "checkpoint_activations",
                  "act_ckpt", "activation_recomputation")
# Columns that hold numbers, which a page may print as text ("1,071", "8") or leave "n/a".
_NUMERIC = (*_DEGREES, "micro_batch_size", "gpus", "nodes", "seq_length", "global_batch_size",
            "global_batch_tokens", "batch_per_dp", "grad_accum", "params_billion", "mfu",
            "step_time_ms", *_DIRECT_METRICS,
            *_TFLOPS_KEYS)
_NOT_APPLICABLE = re.compile(r"(?i)|n/?a|-+|—|none|null")


# Degrees and batches written into a row's words, its model's name or the table's caption
# (DGX Cloud Benchmarking's "Llama 3.1 8b BF16 (TP=1, PP=1, CP=2, MBS=1, GA=32)", "tp4 pp4",
# "EP: 8"): the keys a row leaves out.
_DEGREE_WORDS = re.compile(r"\b(tp|pp|cp|ep|etp|vpp|vp|dp|mbs|gbs|ga)\s*[=:]?\s*(\d+)\b"
                           r"(?!\s*[-–]\s*\d)", re.I)       # not a citation's "pp 12-24"
_DEGREE_KEYS = {"vp": "vpp", "mbs": "micro_batch_size", "gbs": "global_batch_size",
                "ga": "grad_accum"}


# A precision printed in a model's name ("Llama 3.1 70b BF16 (TP=4, ...)", "Qwen3_30B_a3B FP8").
_NAMED_PRECISION = re.compile(r"\b(?:bf16|fp16|fp8(?:[-_ ]?(?:cs|mx|blk|ds))?|mxfp8|nvfp4)\b",
                              re.I)


def _given_precision(doc: dict, row: dict) -> object:
    """The precision the row, the table or the row's model name prints, as printed; None
    where none does."""
    given = row.get("precision") or doc.get("precision")
    if given is None and isinstance(row.get("model"), str):
        named = _NAMED_PRECISION.search(row["model"])
        given = named[0] if named else None
    return given


def _degrees_named(*texts: object) -> dict:
    """The degrees (and micro-batch and global batch) the texts write as "TP=8", "tp8" or
    "PP: 4", the first text that names a key winning."""
    out: dict = {}
    for text in texts:
        if isinstance(text, str):
            for key, value in _DEGREE_WORDS.findall(text):
                out.setdefault(_DEGREE_KEYS.get(key.lower(), key.lower()), int(value))
    return out


def _dp_of(row: dict) -> int | None:
    """The row's data-parallel ranks: its own, else its GPUs over tp x pp x cp where they
    divide; None where neither is a positive whole number."""
    ranks = row.get("dp")
    if ranks is None and isinstance(row.get("gpus"), int):
        degrees = {k: row[k] for k in ("tp", "pp", "cp") if isinstance(row.get(k), int)}
        try:
            ranks = _derived_dp(degrees, row["gpus"])
        except (ValueError, ZeroDivisionError):
            return None
    return ranks if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks > 0 else None


def _row_run(doc: dict, row: dict, name: str, i: int, index: dict) -> dict:
    row = _canonical(row)
    notes: list[str] = []                  # what the row's figures were read as
    if row.get("gpus") is None and row.get("nodes") is not None:
        # A count of nodes (NeMo Megatron's tables): GPUs at the GPUs a node of the hardware
        # holds (16 on a DGX-2, 4 on a GB200/GB300 compute tray, else 8).
        text = _hardware_text(doc, row).lower()
        per_node = (16 if re.search(r"dgx-?2", text)
                    else 4 if re.search(r"gb[23]00", text) else 8)
        row["gpus"] = _require_int(row, "nodes") * per_node
    named = _degrees_named(rules.row_words(row), row.get("model"),
                           *(doc.get(k) for k in ("table", "caption", "source")))
    row.update({k: v for k, v in named.items() if row.get(k) is None})
    if row.get("gpus") is None and row.get("dp") is not None:
        # No GPU count, every degree given: their product.
        row["gpus"] = math.prod(_require_int(row, k) for k in ("tp", "pp", "dp", "cp")
                                if row.get(k) is not None)
    tokens = next((row[k] for k in ("global_batch_tokens", "batch_tokens", "tokens_per_step")
                   if row.get(k) is not None), None)
    per_dp = row.get("batch_per_dp")
    if "global_batch_size" not in row and per_dp is not None and row.get("dp") is not None:
        # One data-parallel rank's sequences times the ranks (Llama 3's "Batch size/DP").
        row["global_batch_size"] = _require_int(row, "batch_per_dp") * _require_int(row, "dp")
    ranks = _dp_of(row)
    if (isinstance(row.get("global_batch_size"), int) and ranks is not None
            and 0 < row["global_batch_size"] < ranks):
        # Fewer sequences than data-parallel ranks cannot be a step's batch: it is each
        # rank's (IBM's fms-fsdp table's "Batch Size" of 2 on 128 GPUs).
        notes.append(f"global batch {row['global_batch_size'] * ranks}: a batch of "
                     f"{row['global_batch_size']} cannot split over {ranks} data-parallel "
                     f"ranks, so it is each rank's")
        row["global_batch_size"] *= ranks
    if ("global_batch_size" not in row and tokens is None and ranks is not None
            and row.get("grad_accum") is not None and row.get("micro_batch_size") is not None):
        # Accumulation steps times the micro-batch times the data-parallel ranks ("MBS=1,
        # GA=64" at DP 2: 128 sequences).
        row["global_batch_size"] = (_require_int(row, "grad_accum")
                                    * _require_int(row, "micro_batch_size") * ranks)
    if "global_batch_size" not in row and tokens is not None:
        # A batch given in tokens (Llama 2 and 3's "4M tokens"): sequences of seq_length.
        seq = _require_int(row, "seq_length")
        tokens = _token_count(tokens, seq)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens % seq:
            raise ValueError(f"a global batch of {tokens!r} tokens is not a whole number of "
                             f"{seq}-token sequences")
        row["global_batch_size"] = tokens // seq
        # A token budget that does not split into whole sequences per data-parallel rank
        # (OPT's "2M" over 124 ranks: 1,024 sequences) runs each rank's whole share, as a
        # launcher derives a per-rank batch from it (metaseq's opt_baselines.py:
        # (2M // data-parallel ranks) // 2048 = 8 a rank, 992 sequences).
        if (ranks is not None and row["global_batch_size"] % ranks
                and row["global_batch_size"] >= ranks):
            whole = row["global_batch_size"] // ranks * ranks
            rounded = (f"global batch {whole} sequences: {tokens} tokens are "
                       f"{row['global_batch_size']} of {seq}, each of the {ranks} data-parallel "
                       f"ranks taking its whole share")
            row["global_batch_size"] = whole
            notes.append(rounded)
    text = " ".join(str(doc.get(k, "")) for k in ("source", "citation", "hardware"))
    conventions = str(row.get("flops_convention") or doc.get("conventions") or "")
    model = _model(row, text)
    shape_preset = model.pop("shape_preset", None)
    cluster, preset = _cluster(doc, row)
    gpus = _require_int(row, "gpus")
    seq, batch = _require_int(row, "seq_length"), _require_int(row, "global_batch_size")
    degrees = {k: _require_int(row, k) for k in _DEGREES if row.get(k) is not None}
    degrees.setdefault("dp", _derived_dp(degrees, gpus))
    used = (degrees.get("tp", 1) * degrees.get("pp", 1) * degrees["dp"] * degrees.get("cp", 1))
    if used != gpus:
        raise ValueError(f"gpus {gpus} is not tp x pp x dp x cp = {used}")
    measured = _measured(row, conventions, model, gpus)
    found = _corpus_run(index.get(json.dumps([
        _family(cluster, preset), model["num_layers"], model["hidden_size"],
        model["num_attention_heads"], model.get("vocab_size"), seq, batch, gpus,
        [degrees.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep")]]), []),
        _given_precision(doc, row), rules.compile_named(rules.row_words(row)))
    if found is not None:
        run = copy.deepcopy(found)
        run["table_row_of"] = found["id"]         # the corpus run this table row is
        run["measured"] = _with_mfu_step(measured, run["cluster"], gpus)
        run["assumed"] = ([f"the corpus's run {found['id']}: its settings and split, the "
                           "table's figure"] + notes
                          + list(found.get("assumed", [])))
        # The split the row or the table gives, as for any other row, else the corpus run's.
        run["split"] = row.get("split", doc.get("split", found["split"]))
        return run
    year = rules.year(text)
    words = rules.row_words(row)
    training, assumed = _training(doc, row, year, (cluster, preset), model,
                                  f"{text} {conventions}", words)
    if shape_preset:
        assumed.append(f"the model's vocabulary and MLP (not printed): the {shape_preset} "
                       "preset's, of the same layers, width and heads")
    assumed += notes
    layers = model["num_layers"]
    plan, tune, more = _plan(row, degrees, year, conventions + " " + text, words,
                             layers=layers if isinstance(layers, int) else None)
    if plan.get("zero_stage") == 3 and "dp_replicate" not in plan:
        replicas, why = rules.hybrid_shard(
            words, ClusterSpec.model_validate(cluster).gpus_per_node, plan, text)
        if replicas:
            plan["dp_replicate"] = replicas
            more.append(why)
    given = {*(doc.get("training") or {}), *(row.get("training") or {}),
             *(k for k in TrainingSpec.model_fields if k in row)}
    if plan.get("zero_stage") == 3 and year is not None and year <= 2021:
        implied, said = rules.zero3_of_2021(model, training["precision"])
        training.update({k: v for k, v in implied.items() if k not in given})
        more += said
    implied, said = rules.overlap(f"{text} {conventions}", words, year, degrees.get("tp", 1))
    training.update({k: v for k, v in implied.items() if k not in given})
    efficiency = {**(doc.get("efficiency") or {}), **(row.get("efficiency") or {})}
    return {"id": str(row.get("id") or f"{name}-{i}-{_slug(model['name'])}"),
            "source": str(row.get("source") or name),
            "citation": str(doc.get("source", "")),
            "sweep": row.get("sweep") or doc.get("sweep") or name,
            "model": model, "cluster": cluster, "training": training, "plan": plan,
            "tune": tune, "measured": _with_mfu_step(measured, cluster, gpus),
            "assumed": assumed + more + said, "efficiency": efficiency,
            "split": row.get("split", doc.get("split", "held_out"))}


def _training(doc: dict, row: dict, year: int | None, gpus: tuple[dict, str | None],
              model: dict, text: str, words: str) -> tuple[dict, list[str]]:
    """The row's TrainingSpec and what was assumed for it: the software of its date and of
    the framework the table's ``text`` or the row's own ``words`` name, its precision, then
    whatever the table and the row set by the planner's field names. ``gpus``: the row's
    cluster and the preset it came from (``_cluster``); ``model``: its model (``_model``)."""
    cluster, preset = gpus
    training: dict = {"global_batch_size": row["global_batch_size"],
                      "seq_length": row["seq_length"]}
    assumed = []
    said_precision, recipe = rules.quantisation(words)
    if said_precision is None:          # the row's own words first, then the table's
        said_precision, recipe = rules.quantisation(text)
    given = _given_precision(doc, row)
    if isinstance(given, str):
        # As a page prints it ("BF16", "FP8-CS", "MXFP8", "NVFP4"): the precision, and the
        # recipe it names before any other.
        given, named_recipe = rules.printed_precision(given)
        recipe = named_recipe or recipe
    training["precision"] = (given
                             or ("fp16" if _FAMILY.get(preset or "") == "v100"
                                 else said_precision or rules.precision(
                                     words if re.search(r"\b(fp8|bf16|fp16)\b", words.lower())
                                     else text)))
    if recipe and training["precision"] == "fp8":
        training["fp8_recipe"] = recipe
        assumed.append(f"fp8 recipe {recipe!r}: as the text names it")
    if year is not None and year < 2021:
        training.update({**_LEGACY_TRAINING, **_BEFORE_2021})
        if training["precision"] == "fp16":
            training["grad_dtype"] = "fp16"
        assumed.append(f"software of {year}: no FlashAttention, the attention scores scaled, "
                       "masked and softmaxed by separate kernels, dropout, the column-parallel "
                       f"all-reduce blocking the backward, {training['grad_dtype']} gradients, "
                       "no gradient or parameter overlap")
    elif year is not None and year < 2023:
        training.update(_LEGACY_TRAINING)
        assumed.append(f"software of {year}: no FlashAttention, dropout, fp32 gradients, no "
                       "gradient or parameter overlap")
    elif rules.megatron_lm_defaults(f"{text} {words}".lower(), year):
        training.update(_LEGACY_TRAINING)
        if training["precision"] == "fp16":
            # --accumulate-allreduce-grads-in-fp32 is opt-in, forced only under bf16
            # (megatron/arguments.py since b4bc51b1e7, 2021-03-08): fp16 runs reduce fp16.
            training["grad_dtype"] = "fp16"
        assumed.append("Megatron-LM's defaults before April 2024: no FlashAttention, dropout, "
                       f"{training['grad_dtype']} gradients, no gradient or parameter overlap")
    elif year is None:
        assumed.append("no date in the source: the planner's default (current) software")
    implied, said = rules.framework(text, words, year, cluster, training["precision"])
    training.update(implied)
    assumed += said
    implied, said = rules.attention(words, text, year)
    training.update(implied)
    assumed += said
    if (model.get("num_experts") or 1) > 1:
        implied, said = rules.moe(text, words, year)
        training.update(implied)
        assumed += said
    training.update(doc.get("training") or {})
    training.update(row.get("training") or {})
    training.update({k: row[k] for k in TrainingSpec.model_fields
                     if k in row and k != "precision"})      # read above, as printed
    return training, assumed


def _plan(row: dict, degrees: dict, year: int | None, text: str, words: str = "",
          layers: int | None = None) -> tuple[dict, dict, list[str]]:
    """(plan, knobs to tune, what was assumed): the published degrees and knobs; the ZeRO
    stage the row's words or the table's name (``table_rules.zero``); the micro-batch, the
    recompute mode (unless the row's words or the text name it), for tensor-parallel rows
    from 2022 on sequence parallelism (but on DeepSpeed's trainers before they had it:
    ``table_rules.deepspeed_without_sequence_parallelism``), and the virtual stages where the
    row leaves them out and the schedule it runs interleaves (``table_rules.schedule``) are
    tuned."""
    plan: dict = {**degrees, **{k: row[k] for k in ("micro_batch_size", "zero_stage",
                                                    "sequence_parallel", "recompute",
                                                    "recompute_num_layers", "dp_replicate")
                                if k in row}}
    plan.update(row.get("plan") or {})
    tune: dict = {}
    assumed = []
    fsdp_column = row.get("fsdp")
    if "zero_stage" not in plan and fsdp_column is not None:
        # An FSDP column (Megatron-Bridge's tables): its degree, or n/a where FSDP is off.
        sharded = isinstance(fsdp_column, int) and not isinstance(fsdp_column, bool) and (
            fsdp_column > 1)
        plan["zero_stage"] = (3 if plan.get("pp", 1) == 1 else 1) if sharded else 1
        assumed.append(f"zero_stage {plan['zero_stage']}: the FSDP column's {fsdp_column!r}")
    if "zero_stage" not in plan:
        stage, why = rules.zero(text, words, year, plan.get("pp", 1))
        if stage:
            plan["zero_stage"] = stage
            assumed.append(f"zero_stage {stage}: {why}")
    if "micro_batch_size" not in plan:
        tune["micro_batch_size"] = [1, 2, 4, 8]
        assumed.append("micro_batch_size: not published; the fastest that fits of 1, 2, 4, 8")
    if "recompute" not in plan:
        named = rules.recompute(words) or rules.recompute(text)
        if named == "selective" and rules.names_fms(f"{text} {words}") and layers:
            # Selective checkpointing as whole blocks, every n-th (IBM's fms-fsdp), n not
            # printed: the fastest that fits of every block, every 2nd, 3rd and 4th.
            plan["recompute"] = "full"
            tune["recompute_num_layers"] = sorted({layers // n for n in (1, 2, 3, 4)})
            assumed.append("recompute: 'selective' as fms-fsdp's every n-th block fully "
                           "recomputed (fms_fsdp/policies/ac_handler.py), n not published; the "
                           "fastest that fits of every block, every 2nd, 3rd and 4th")
        elif named:
            plan["recompute"] = named
        else:
            tune["recompute"] = ["none", "selective", "full"]
            assumed.append("recompute: not published; the fastest that fits")
    if "sequence_parallel" not in plan and plan.get("tp", 1) > 1:
        trainer = rules.deepspeed_without_sequence_parallelism(f"{text} {words}".lower(), year)
        if trainer:
            assumed.append(f"sequence_parallel off: the {trainer} trainer of the source's date "
                           "had no Megatron-LM sequence parallelism")
        elif year is None or year >= 2022:
            tune["sequence_parallel"] = [False, True]
    if "vpp" not in plan and plan.get("pp", 1) > 1:
        schedule, why = rules.schedule(words, text, year)
        if schedule == "interleaved":
            tune["vpp"], which = vpp_candidates(layers, plan["pp"])
            assumed.append(f"vpp: {why}; the fastest that fits of {which}")
        elif why:
            assumed.append(f"vpp 1: {why}")
    return plan, tune, assumed


def vpp_candidates(layers: int | None, pp: int) -> tuple[list[int], str]:
    """(virtual stages to tune, in words) for an interleaved row that does not print them:
    every split of a stage's layers into chunks where the stages hold the same layers, as the
    corpus tunes them (a stage of 7 layers: 1 or 7 chunks); else 1-6 and 8, those that divide
    the layers."""
    if layers and layers % pp == 0:
        per_stage = layers // pp
        found = [v for v in range(1, per_stage + 1) if per_stage % v == 0]
        return found, f"{found}, the divisors of the {per_stage} layers a stage holds"
    return [1, 2, 3, 4, 5, 6, 8], "1-6 and 8 (those that divide the layers)"


def _token_count(tokens: object, seq: int) -> object:
    """A token count as a page prints it: "16M" or "4M tokens" (Llama 3's 16M is 2,048
    sequences of 8,192, 16 x 2^20: binary where that is whole sequences, else decimal), "512K",
    "1,048,576"; anything else as given."""
    if not isinstance(tokens, str):
        return tokens
    found = re.fullmatch(r"\s*([\d.,]+)\s*([km]?)\s*(?:tokens)?\s*", tokens.lower())
    if not found:
        return tokens
    number = float(found[1].replace(",", ""))
    if not found[2]:
        return int(number) if number.is_integer() else tokens
    binary = number * {"k": 2**10, "m": 2**20}[found[2]]
    decimal = number * {"k": 1e3, "m": 1e6}[found[2]]
    for value in (binary, decimal):
        if value.is_integer() and int(value) % seq == 0:
            return int(value)
    return tokens


# A source that prints MPT's configurations by their size alone (llm-foundry's benchmark
# tables: "7b", "760m").
_MPT_SOURCE = re.compile(r"llm[- ]?foundry|mosaic ?ml|\bmpt\b")
# IBM's fms-fsdp names its Llama 2 variants by size (fms_fsdp/utils/config_utils.py
# get_model_config: "7b", "13b", "34b", "70b", the foundation-model-stack's LLaMAConfig with
# Llama 2's 32,000-token vocabulary); its 34b, Llama 2's unreleased 34B, has no preset.
_FMS_SIZES: dict[str, str | dict] = {
    "7b": "llama2-7b", "13b": "llama2-13b", "70b": "llama2-70b",
    "34b": {"name": "llama2-34b (fms)", "num_layers": 48, "hidden_size": 8192,
            "num_attention_heads": 64, "num_kv_heads": 8, "ffn_hidden_size": 22016,
            "ffn_type": "swiglu", "vocab_size": 32000}}


def _model(row: dict, text: str = "") -> dict:
    """The row's model: its shape fields (and a ``model`` object's), over the planner's preset
    of the name it gives where the row leaves the shape out (``_preset_named``; a size alone,
    "7b", in a table whose ``text`` names llm-foundry, MosaicML or MPT is that MPT
    configuration, ``mpt-7b``, and in one that names IBM's fms-fsdp that Llama 2 variant of
    its ``_FMS_SIZES``)."""
    model = {k: row[k] for k in ModelSpec.model_fields if k in row}
    if isinstance(row.get("model"), dict):
        model.update(row["model"])
    elif "name" not in model:
        model["name"] = str(row.get("model") or "model")
    name = str(model.get("name", ""))
    size = name.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(?:\.\d+)?[mb]", size) and _MPT_SOURCE.search(text.lower()):
        name = f"mpt-{size}"
    elif size in _FMS_SIZES and rules.names_fms(text):
        variant = _FMS_SIZES[size]
        if isinstance(variant, dict):
            return {**variant, **model, "name": variant["name"]}
        name = variant
    preset = _preset_named(name)
    if preset and not all(k in model for k in ("num_layers", "hidden_size")):
        model = {**ModelSpec.from_preset(preset).model_dump(mode="json", exclude_none=True),
                 **model}
    for key in ("num_layers", "hidden_size", "num_attention_heads"):
        if key not in model:
            raise ValueError(f"{key!r} is missing (the model's shape; or name a model the "
                             f"planner has a preset for: {', '.join(ModelSpec.preset_names())})")
    if "vocab_size" not in model:
        # A shape printed without its vocabulary (a "175B" of 96 layers of 12,288 and 96
        # heads): the rest from the first preset of that shape (GPT-3 175B's), where one is.
        shape = ("num_layers", "hidden_size", "num_attention_heads")
        same = next((p for p in ModelSpec.preset_names()
                     if all(getattr(ModelSpec.from_preset(p), k) == model[k] for k in shape)),
                    None)
        if same is not None:
            model = {**ModelSpec.from_preset(same).model_dump(mode="json", exclude_none=True),
                     **model, "shape_preset": same}
    return model


# Names a model goes by that name one preset: BLOOM (176B, BigScience's only BLOOM of that
# name without a size), Megatron-Turing NLG 530B.
_FULL_NAMES = {"bloom": "bloom-176b", "megatronturingnlg530b": "mt-nlg-530b",
               "megatronturingnlg": "mt-nlg-530b"}


def _preset_named(name: str) -> str | None:
    """The planner's model preset a published name means ("Llama 3.1 405B", "LLAMA3_70B",
    "Llama-2-70b", "GPT-3 175B", "Mixtral 8x7B", "DeepSeek-V3", "DeepSeek-V3 671B"): compared
    without case, punctuation or a Llama point release (3.1's shapes are 3's), exactly or
    without the size a versioned name adds, else None."""
    bare = re.sub(r"^[\w.-]+/", "", name.lower().strip())     # a Hugging Face organisation
    bare = re.sub(r"^meta[- ]", "", bare)
    # A qualifier in brackets ("DeepSeekV3 (dropless)"), a checkpoint's suffix
    # ("-Instruct", "-hf"), and the names a model goes by in full.
    bare = re.sub(r"\s*[(\[][^)\]]*[)\]]", "", bare).strip()
    # ... and a precision printed after it (DGX Cloud Benchmarking's "Llama 3.1 8b BF16").
    bare = re.sub(r"[-_ ]+(?:bf16|fp16|fp8(?:[-_ ]?(?:cs|mx|blk|ds))?|mxfp8|nvfp4|fp4)$", "",
                  bare).strip()
    bare = re.sub(r"[-_ ](?:instruct|chat|base|hf)$", "", bare)
    bare = _FULL_NAMES.get(re.sub(r"[^a-z0-9]+", "", bare), bare)
    flat = re.sub(r"llama[^a-z0-9]*(\d)(?:\.\d)?", r"llama\1", bare)
    flat = re.sub(r"[^a-z0-9]+", "", flat)
    names = {re.sub(r"[^a-z0-9]+", "", p): p for p in ModelSpec.preset_names()}
    # ... or with the size a versioned name adds ("DeepSeek-V3 671B").
    return names.get(flat) or names.get(re.sub(r"(?<=[a-z]\d)\d+(?:\.\d+)?b$", "", flat))


def _cluster(doc: dict, row: dict) -> tuple[dict, str | None]:
    gpus = _require_int(row, "gpus")
    given = row.get("cluster") or doc.get("cluster")
    if isinstance(given, dict):
        cluster = dict(given)
        return cluster, cluster.get("preset")
    hardware = _hardware_text(doc, row)
    text = hardware.lower().replace("_", " ")
    pcie = re.search(r"\b([ahv]\d00|h800|a800)\b[^,;]*?\b(pcie|nvl)\b", text)
    if pcie:
        # No preset is a PCIe card: its clocks, power and links (an NVLink bridge between two
        # cards at most, PCIe beyond) are not an SXM board's.
        card = f"{pcie[1].upper()} {'PCIe' if pcie[2] == 'pcie' else 'NVL'}"
        raise ValueError(f"'hardware' names {card} cards, which no cluster preset holds (the "
                         "presets are SXM boards on NVSwitch); give 'cluster' as a cluster spec "
                         "with the card's GPU fields and links")
    cloud = next((name for pattern, name, context in _CLOUD
                  if re.search(pattern, text) and re.search(context, text)), None)
    found = (None, cloud, None) if cloud else next(
        (x for x in _HARDWARE if re.search(x[0], text)), None)
    if found is None:
        raise ValueError("'hardware' names no GPU the planner has a preset for (V100, A100, "
                         "A800, H100, H200, H800, B200, B300, GB200, GB300, MI250X, MI300X, "
                         "MI325X); give 'cluster' as "
                         "a cluster spec")
    _, preset, gpu = found
    if preset == "dgx-1" and re.search(r"dgx-?2", text):
        preset = "dgx-2"
    per_node = _GPUS_PER_NODE.get(preset, 8)
    if gpus < per_node:
        cluster = {"preset": preset, "num_nodes": 1, "gpus_per_node": gpus}
    elif gpus % per_node:
        raise ValueError(f"gpus {gpus} is not a whole number of {per_node}-GPU nodes; give "
                         "'cluster' as a cluster spec")
    else:
        cluster = {"preset": preset, "num_nodes": gpus // per_node}
    if gpu:
        cluster["gpu"] = gpu
    if not preset.endswith("-nvl72"):    # an NVL72 rack's network is its trays', not a node's
        network = _network(hardware, ClusterSpec.model_validate({"preset": preset}).inter_node)
        if network:
            cluster["inter_node"] = network
    return cluster, preset


def _hardware_text(doc: dict, row: dict) -> str:
    """What the row, then the table, say of the hardware: a cluster named in words ("DGX
    A100"), the hardware, GPU and system columns (llm-foundry's "GPU": "a100_40gb",
    Megatron-Bridge's "System": "DGX-GB200"), a description given as fields ({"gpu": "H100
    SXM", ...}) read as text."""
    given = row.get("cluster") or doc.get("cluster")
    return " ".join(_words_of(v) for v in (given, *(row.get(k) for k in _HARDWARE_COLUMNS),
                                           *(doc.get(k) for k in _HARDWARE_COLUMNS)))


def _words_of(value: object) -> str:
    """A hardware field as text: a string as it is, an object's keys and values in order
    (``{"gpu": "H100 SXM", "network": "8 x 400 Gb/s InfiniBand"}``), else nothing."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return ", ".join(f"{k} {_words_of(v)}" for k, v in value.items())
    return ""


def _network(hardware: str, preset: object) -> dict | None:
    """The network a hardware text gives, per node and direction (``_cluster``): "N x R Gb/s"
    (or Gbps, Gbit/s, G) is N NICs of R; a single rate is the node's total where the text says
    so ("per node", "per instance", "aggregate", "total") or names AWS's EFA, whose instance
    pages give the total (p4d 400 Gbps, p5 3,200 Gbps), and otherwise one NIC's rate, as many
    NICs as the preset has ("200 Gb/s HDR InfiniBand"), unless it is faster than the preset's
    NICs, when it is the node's total too. The rate's unit is matched with its
    case, Gb (bits), never GB (bytes: an NVLink figure). Over RoCE where the text names it or
    EFA (AWS's RDMA over its own SRD transport, RoCE's class) or HPE Slingshot (RDMA over its
    own Ethernet), Ethernet where it names Ethernet
    or TCP (GPUDirect-TCPX) and not InfiniBand, else InfiniBand. None where it gives no rate."""
    lower = hardware.lower()
    kind = "roce" if re.search(r"\broce|\befa|slingshot", lower) else (
        "ethernet" if re.search(r"ethernet|tcpx?o?\b", lower) and "infiniband" not in lower
        else "infiniband")
    nics = re.search(r"(\d+)\s*[x×]\s*(\d+)\s*(?:Gb/s|Gbps|Gbit/s|G\b|gb/s|gbps)", hardware)
    if nics:
        count, rate = int(nics[1]), int(nics[2])
        total = count * rate / 8
    else:
        single = re.search(r"(?<![\d.x×])(\d+)\s*(?:Gb/s|Gbps|Gbit/s|Gb\b)", hardware)
        if single is None:
            return None
        rate = int(single[1])
        count = getattr(preset, "nics_per_node", None) or 8
        preset_total = getattr(preset, "bandwidth_gb_per_s", None)
        # A rate above the preset's own NICs' is no NIC of that node (IBM's "H100 96 GPUs
        # with 800 Gbps", "A100 ... 400Gbps" beside a DGX's 400 and 200 Gb/s adapters).
        faster = bool(preset_total) and rate > preset_total * 8 / count
        if faster or re.search(r"per (?:node|instance|server|host)|aggregate|total|\befa",
                               lower):
            total = rate / 8
        else:
            total = count * rate / 8
    return {"kind": kind, "bandwidth_gb_per_s": total, "latency_us": 5.0,
            "nics_per_node": count}


def _measured(row: dict, conventions: str, model: dict, gpus: int) -> dict:
    for key in _DIRECT_METRICS:
        if row.get(key) is not None:
            return {"metric": key, "value": _positive(row, key)}
    for key in _TFLOPS_KEYS:
        if row.get(key) is not None:
            tflops = _positive(row, key)
            flops = _step_flops(conventions, row, model)
            return {"metric": "tflops_per_gpu", "value": tflops,
                    "step_time_s": flops / (tflops * 1e12 * gpus),
                    "flops_convention": conventions[:300]}
    if row.get("mfu") is not None:
        mfu = _positive(row, "mfu")
        mfu = mfu / 100 if mfu > 1 else mfu
        return {"metric": "mfu", "value": mfu, "flops": _step_flops(conventions, row, model),
                "flops_convention": conventions[:300]}
    raise ValueError("no published figure: give one of "
                     + ", ".join(_DIRECT_METRICS + _TFLOPS_KEYS + ("mfu",)))


def step_from_mfu(flops: float, mfu: float, cluster: dict, gpus: int) -> float:
    """An MFU figure's step time: the source's FLOPs over MFU (a fraction, or a percentage
    above 1) x the GPU's dense 16-bit peak (bf16, or fp16 where the GPU has no bf16: the peak
    MFU is quoted against by PaLM's appendix B and the reports that followed it, fp8 runs
    included)."""
    peaks = ClusterSpec.model_validate(cluster).gpu.peak_tflops
    peak = peaks.bf16 or peaks.fp16
    if not peak:
        raise ValueError("an MFU figure needs a GPU with a 16-bit peak")
    return flops / ((mfu / 100 if mfu > 1 else mfu) * peak * 1e12 * gpus)


def _with_mfu_step(measured: dict, cluster: dict, gpus: int) -> dict:
    """The row's measurement with an MFU figure's step time (``step_from_mfu``)."""
    if measured["metric"] != "mfu":
        return measured
    flops = measured.pop("flops")
    return {**measured, "step_time_s": step_from_mfu(flops, measured["value"], cluster, gpus)}


def _step_flops(conventions: str, row: dict, model: dict) -> float:
    params = _positive(row, "params_billion") * 1e9 if row.get("params_billion") else None
    return flops_per_step(conventions, _require_int(row, "global_batch_size"),
                          _require_int(row, "seq_length"), model, params)


def flops_per_step(conventions: str, global_batch_size: int, seq_length: int, model: dict,
                   params: float | None = None) -> float:
    """FLOPs of one step as the source counted them (module docstring; SC'21's "eq. (3)" is
    its 96 B s l h^2 form). ``model``: ModelSpec fields; ``params``: the N of a 6N count
    (default: the model's active parameters as the planner counts them). The counts as
    sources word them are read too: Megatron-LM's (Narayanan et al.'s) formula with or without
    the recomputed forward, 6ND (Kaplan et al.), and MFU named without a count as PaLM's, the
    definition the term comes from. Raises ValueError when the conventions name no count this
    module knows."""
    c = re.sub(r"[\s*·×]", "", conventions.lower())
    B, s = global_batch_size, seq_length
    spec = ModelSpec.model_validate(model)
    l, h = spec.num_layers, spec.hidden_size
    V = spec.vocab_size if "preset" in model else model.get("vocab_size")
    n = params if params is not None else float(spec.active_params)
    if "96bslh^2" in c or "96bslh2" in c or "sc'21eq.(3)" in c:
        return 96 * B * s * l * h**2 * (1 + s / (6 * h) + _vocab(V) / (16 * l * h))
    if "72bslh^2" in c or "72bslh2" in c:
        return 72 * B * s * l * h**2 * (1 + s / (6 * h) + _vocab(V) / (12 * l * h))
    if "12lhqt" in c or "palm" in c:
        return (6 * n + 12 * l * h * s) * B * s
    if re.search(r"(?<![\w.])6\s*[*x·×]?\s*(n|params|parameters)\b", conventions.lower()):
        return 6 * n * B * s
    # The same counts as sources word them: Megatron-LM's (Narayanan et al.'s) formula with or
    # without the recomputed forward, Kaplan et al.'s 6ND, PaLM's definition of MFU; only where
    # the text spells out no formula of its own (one it spells and no form above matches is
    # another count, refused: the FlashAttention-2 paper's, or Megatron-LM's causal-halved one).
    if re.search(r"(?<![\w.])6[nbp]d\b|kaplan|6(params|parameters)(x)?tokens", c):
        return 6 * n * B * s
    if re.search(r"[*+=^]|causal", conventions.lower()):
        raise ValueError(_NO_CONVENTION)
    megatron = re.search(r"megatron|narayanan|sc'?21|eq\.?\(?3", c)
    if megatron and re.search(r"(without|no|excluding)(activation)?recomput", c):
        return 72 * B * s * l * h**2 * (1 + s / (6 * h) + _vocab(V) / (12 * l * h))
    if megatron and re.search(r"recomput|checkpoint", c):
        return 96 * B * s * l * h**2 * (1 + s / (6 * h) + _vocab(V) / (16 * l * h))
    if re.search(r"\bmfu\b|model[- ]?flops[- ]?utili[sz]ation", conventions.lower()):
        # MFU named without its count: PaLM's, the definition the term comes from
        # (Chowdhery et al. 2022, appendix B).
        return (6 * n + 12 * l * h * s) * B * s
    raise ValueError(_NO_CONVENTION)


_NO_CONVENTION = ("a TFLOP/s or MFU figure needs the source's FLOPs convention: 'conventions' "
                  "(or the row's 'flops_convention') must name 96*B*s*l*h^2 (with recompute), "
                  "72*B*s*l*h^2 (without), 6N, or PaLM's 6N + 12LHQT")



def _vocab(v: object) -> int:
    if not isinstance(v, int) or v <= 0:
        raise ValueError("'vocab_size' is needed to undo a Megatron FLOPs count")
    return v


def _corpus_run(runs: list[dict], given: object, compiled: bool | None = None) -> dict | None:
    """The corpus run a row is, of those with its model, batch, GPUs and degrees: where the row
    (or its table) gives a precision, the one in that precision (and fp8 recipe, where named:
    one plan in bf16 and fp8, or in FP8-CS and FP8-MX, is two runs); never, for a row that
    names torch.compile (``compiled``), one that ran uncompiled (IBM fms-fsdp's compiled table
    reran its uncompiled table's plans); else the last."""
    if compiled:
        runs = [r for r in runs if not r["training"].get("eager_elementwise")]
    if isinstance(given, str):
        precision, recipe = rules.printed_precision(given)
        runs = [r for r in runs if r["training"].get("precision", "bf16") == precision
                and (recipe is None or r["training"].get("fp8_recipe", "delayed") == recipe)]
    return runs[-1] if runs else None


def _match_key(run: dict) -> str | None:
    m, c, t, p = run["model"], run["cluster"], run["training"], run["plan"]
    if "num_layers" not in m or c.get("preset") not in _FAMILY:
        return None
    family = _family(c, c["preset"])
    gpus = c.get("num_nodes", 1) * c.get("gpus_per_node", _GPUS_PER_NODE.get(c["preset"], 8))
    degrees = [p.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep")]
    if degrees[0] * degrees[1] * degrees[2] * degrees[3] != gpus:
        return None
    return json.dumps([family, m["num_layers"], m["hidden_size"], m["num_attention_heads"],
                       m.get("vocab_size"), t["seq_length"], t["global_batch_size"], gpus,
                       degrees])


def _family(cluster: dict, preset: str | None) -> str | None:
    """The GPU family a run's cluster names (A100 40 GB apart from 80 GB, V100 16 GB from
    32 GB)."""
    gpu = cluster.get("gpu")
    return gpu if gpu in ("a100-40gb", "v100-16gb") else _FAMILY.get(preset or "")


def _derived_dp(degrees: dict, gpus: int) -> int:
    rest = degrees.get("tp", 1) * degrees.get("pp", 1) * degrees.get("cp", 1)
    if gpus % rest:
        raise ValueError(f"gpus {gpus} is not a multiple of tp x pp x cp = {rest}")
    return gpus // rest


def _require_int(row: dict, key: str) -> int:
    value = row.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key!r} must be a positive integer, got {value!r}")
    return value


def _positive(row: dict, key: str) -> float:
    value = row.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{key!r} must be a positive number, got {value!r}")
    return float(value)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-") or "run"
