"""What a published table's words and date imply for the runs it prints (``published_tables``):
the year of its software, the framework it names and what that framework runs, its MoE
settings, its TP overlap, its ZeRO stage, its precision and fp8 recipe, its recompute mode.
Each rule cites the framework code or the page it reads; ``published_tables``'s docstring
lists them in the order a row is built."""

from __future__ import annotations

import re

from planner.search.plan_request import FRAMEWORK_TRAINING
from planner.specs import ClusterSpec

# What the software of a framework a source names runs (module docstring), by its name's
# pattern: the DeepSpeed engine's (deepspeed/runtime/pipe/engine.py ``is_pipe_partitioned`` and
# its ``ReduceGrads`` after the schedule; ZeRO-1/2 gather the updated weights inside ``step``,
# deepspeed/runtime/zero/stage_1_and_2.py), NVIDIA's performance recipes' bf16 gradient
# reduction (NeMo-Framework-Launcher's H100 benchmark scripts and DGX Cloud Benchmarking's
# yaml: optim.grad_sync_dtype bf16; NeMo 2.0's scripts/performance and Megatron-Bridge's
# performance configs: grad_reduce_in_fp32 False), torchtitan's below.
_DEEPSPEED = {"p2p_scatter_gather": True, "overlap_param_gather": False,
              "grad_reduce_after_last_backward": True}
_NVIDIA_RECIPES = re.compile(r"\bnemo\b|megatron[- ]bridge|dgx cloud benchmarking|"
                             r"dgxc-benchmarking")


def nvidia_recipes(text: str, year: int | None) -> bool:
    """Whether the (lower-case) text names NVIDIA's published performance recipes (NeMo,
    Megatron-Bridge, DGX Cloud Benchmarking) of 2023 on, or undated: the runs the NVIDIA rules
    below describe. NeMo Megatron's 2022 runs are the legacy software's."""
    return bool(_NVIDIA_RECIPES.search(text)) and (year is None or year >= 2023)
_COMPILED = re.compile(r"torch\.compile|\bcompiled?\b")
# ... unless it is named as off: "no torch.compile", "without compile", "compile: off".
_NOT_COMPILED = re.compile(r"\b(?:no|without|w/o|disabled?)\s+(?:torch\.)?compile"
                           r"|\bcompiled?\b\s*[:=]?\s*(?:off|false|disabled|no)\b|\buncompiled\b")


# A row's columns that name the run rather than describe how it ran.
_NAMING = ("id", "source", "sweep", "split", "model", "precision", "hardware", "recompute")


def row_words(row: dict) -> str:
    """What a row says in words about how it ran (a technique or notes column): its text
    columns but those naming the run, and nothing where they hold only figures."""
    words = " ".join(v for k, v in row.items() if isinstance(v, str) and k not in _NAMING)
    return words if re.search(r"[a-zA-Z]{2}", words) else ""


def framework(text: str, words: str, year: int | None, cluster: dict,
               precision: str = "bf16") -> tuple[dict, list[str]]:
    """(training settings, what was assumed) for the framework the table's ``text`` or the
    row's ``words`` name: DeepSpeed, torchtitan or NVIDIA's recipes (module docstring);
    nothing for any other. Whether torch.compile ran is the row's to say where it says how it
    ran (a caption naming the techniques its rows compare names them for none in particular),
    the table's where the row says nothing."""
    t = f"{text} {words}".lower()
    out: dict = {}
    said: list[str] = []
    if "deepspeed" in t:
        out.update(_DEEPSPEED)
        said.append("DeepSpeed's pipeline engine sends each activation split over the "
                    "model-parallel ranks (PipelineEngine is_pipe_partitioned), as the "
                    "corpus's Megatron-DeepSpeed runs do: p2p_scatter_gather; its ZeRO gathers "
                    "the updated weights inside the optimizer step and its pipeline reduces "
                    "after the schedule")
    if "torchtitan" in t:
        named = (words if words.strip() else text).lower()
        compiled = bool(_COMPILED.search(named)) and not _NOT_COMPILED.search(named)
        out.update(FRAMEWORK_TRAINING["torchtitan"])
        out.update({"loss_implementation": "fused" if compiled else "eager",
                    "eager_elementwise": not compiled, "selective_recompute": "per_op"})
        try:
            gpu = ClusterSpec.model_validate(cluster).gpu
        except ValueError:          # the run's own validation says why, where it replays
            gpu = None
        if gpu is not None and gpu.attention_kernels.flash2 is not None:
            out["attention_kernel"] = "flash2"
        said.append("torchtitan: FSDP2's per-parameter copies and the rest a torchtitan search "
                    "costs; selective recompute by its per-op policy; attention through "
                    "PyTorch's SDPA (FlashAttention-2 where the GPU has its rates); "
                    + ("torch.compile: fused elementwise kernels and loss" if compiled else
                       "no torch.compile named: eager elementwise kernels and loss"))
    if nvidia_recipes(t, year):
        out["grad_dtype"] = "bf16"
        said.append("NVIDIA's performance recipes reduce bf16 gradients (grad_sync_dtype bf16, "
                    "grad_reduce_in_fp32 False)")
        if precision == "fp8" and (year is None or year >= 2025):
            out["fp8_param_gather"] = True
            said.append("NVIDIA's performance recipes of 2025 on gather fp8 weights when they "
                        "train in fp8 (NeMo 2.0's bf16_with_fp8_mixed fp8_params, DGX Cloud "
                        "Benchmarking's fp8_params, Megatron-Bridge's fp8 recipes' "
                        "fp8_param_gather): fp8_param_gather")
    if re.search(r"megatron[- ]bridge", t):
        out["loss_implementation"] = "fused"
        said.append("Megatron-Bridge's performance configs fuse the loss (cross_entropy_fusion_"
                    "impl 'te', Transformer Engine's parallel_cross_entropy): 'fused'")
    return out, said


# MoE settings a table's words name: (pattern, TrainingSpec field, value; None: the number
# the pattern captures). DeepEP, NVIDIA's HybridEP and Megatron-LM's flex dispatcher send a
# token once per node ('deepep'); the EP all-to-all overlap is Megatron-LM's
# --overlap-moe-expert-parallel-comm (its "1F1B A2A overlap"); forced balance routes every
# expert the mean load.
_MOE_WORDS = [
    (r"deep[- ]?ep|hybrid[- ]?ep|flex dispatcher", "moe_dispatcher", "deepep"),
    (r"\bstandard\b|all[- ]?to[- ]?all dispatch|alltoall", "moe_dispatcher", "alltoall"),
    (r"capacity[- ]factor (?:of )?(\d+(?:\.\d+)?)", "moe_capacity_factor", None),
    (r"\b(?:a2a|all-to-all|ep) (?:comm(?:unication)? )?overlap|overlap-moe-expert-parallel-comm"
     r"|a2a[_ ]1f1b|1f1b (?:a2a )?overlap", "moe_a2a_overlap", True),
    (r"force[sd]? (?:load )?balanc", "moe_load_imbalance", 1.0),
]


def moe(text: str, words: str, year: int | None) -> tuple[dict, list[str]]:
    """(MoE training settings, what was assumed) for a MoE row: what its words name, else
    what the table's text names (``_MOE_WORDS``: a caption naming DeepEP beside the standard
    dispatcher names both, a row one of them), and NVIDIA's recipes' routing: their
    performance runs force-balance it or drop tokens at capacity 1 (Megatron-Bridge
    scripts/performance/utils/overrides.py: moe_router_force_load_balancing True when
    dropless, apply_moe_token_drop otherwise), the busiest rank at the mean load
    (``moe_load_imbalance`` 1.0) against the planner's 1.1."""
    out: dict = {}
    for source in (words.lower(), text.lower()):
        for pattern, key, value in _MOE_WORDS:
            found = re.search(pattern, source)
            if found and key not in out:
                out[key] = float(found[1]) if value is None else value
    t = f"{text} {words}".lower()
    if nvidia_recipes(t, year):
        out.setdefault("moe_load_imbalance", 1.0)
    return out, ([f"MoE settings the text names or NVIDIA's recipes run: {out}"] if out else [])


# The share of the TP collectives hidden under GEMMs the corpus gives Transformer Engine's
# tp-comm-overlap (userbuffers) and torchtitan's AsyncTP (``EfficiencyModel.tp_comm_overlap``).
_TP_OVERLAP = 0.8


def overlap(text: str, words: str, year: int | None, tp: int) -> tuple[dict, list[str]]:
    """(efficiency overrides, what was assumed): tensor-parallel communication overlap where
    the row runs TP and NVIDIA's performance recipes of 2023 on ran it (their TP
    configurations set tp_comm_overlap, the userbuffers overlap: NeMo's
    MegatronCommOverlapCallback, Megatron-Bridge's comm_overlap, DGX Cloud Benchmarking's
    ub_tp_comm_overlap) or the text names AsyncTP (torchtitan's) or TP communication
    overlap."""
    if tp <= 1:
        return {}, []
    t = f"{text} {words}".lower()
    named = re.search(r"async[- ]?tp|tp[- ]comm(unication)?[- ]overlap", t)
    recipes = nvidia_recipes(t, year)
    if not (named or recipes):
        return {}, []
    return {"tp_comm_overlap": _TP_OVERLAP}, [
        f"TP communication overlap ({'as the text names it' if named else 'NVIDIA recipes'}"
        f"): efficiency.tp_comm_overlap {_TP_OVERLAP}, the corpus's value for it"]


def zero(text: str, words: str, year: int | None, pp: int) -> tuple[int, str]:
    """(ZeRO stage, why) of a row that does not give one: the stage the row's words name
    ("ZeRO-3", "ZeRO stage 1"; FSDP or "fully sharded" 3, or 1 under pipeline parallelism,
    where torchtitan and torch.distributed.pipelining gather the weights once a step and keep
    them, the corpus's convention; "distributed optimizer" 1), or, where they say nothing of
    how the run was parallelised, the table's (a caption naming ZeRO-3 beside PTD-P names a
    comparison, a row one side of it); else the framework's: torchtitan shards with FSDP2 and
    llm-foundry (MosaicML's MPT runs) with FSDP's FULL_SHARD, DeepSpeed's runs and NVIDIA's
    recipes of 2023 on use the ZeRO-1 (distributed) optimizer; else 0, plain data
    parallelism."""
    fsdp = 3 if pp == 1 else 1
    w = words.lower()
    describes = re.search(r"zero|fsdp|ptd|\b3d\b|megatron|shard|parallel", w)
    for source in (w,) if describes else (w, text.lower()):
        stage = re.search(r"\bzero[- ]?(?:stage[- ]?)?([0-3])\b", source)
        if stage:
            return int(stage[1]), "as the text names it"
        if re.search(r"\bfsdp|fully[- ]sharded|\bhsdp\b", source):
            return fsdp, "FSDP, as the text names it"
        if "distributed optimizer" in source:
            return 1, "the distributed optimizer, as the text names it"
    t = f"{text} {words}".lower()
    if "torchtitan" in t:
        return fsdp, "torchtitan shards with FSDP2"
    if re.search(r"llm[- ]foundry|mosaicml", t):
        return fsdp, "llm-foundry shards with FSDP (FULL_SHARD)"
    if "deepspeed" in t:
        return 1, "DeepSpeed's runs shard the optimizer (ZeRO-1)"
    if nvidia_recipes(t, year):
        return 1, "NVIDIA's recipes run the distributed optimizer"
    return 0, ""


# A venue's two-digit year ("SC'21", "NSDI '24", "MLSys’23").
_VENUE_YEAR = re.compile(r"\b(?:sc|neurips|icml|mlsys|iclr|nsdi|osdi|sosp|atc|eurosys|ppopp|"
                         r"asplos|isca|hpca|micro|colm|acl|emnlp|naacl|kdd|vldb|aaai|ipdps|"
                         r"hpdc|ics|cvpr)\s*['’](\d\d)\b")


# A release named by its year and month, as NVIDIA's containers and pages are ("NeMo 24.07",
# "Megatron-Bridge 25.11", "release v25.02", "the 24.09 container").
_RELEASE_YEAR = re.compile(r"\b(?:nemo(?: framework)?|megatron[- ]bridge|release|container|"
                           r"version|v)\s*v?(2\d)\.(?:0[1-9]|1[0-2])(?:\.\d+)?\b"
                           r"|\b(2\d)\.(?:0[1-9]|1[0-2]) container")


def year(text: str) -> int | None:
    """The year of the software a source ran: its arXiv number's where it has one (the work
    as submitted; the venue that printed it a year later ran nothing newer: Korthikanti et
    al., arXiv 2205.05198, MLSys'23, ran 2022's Megatron-LM), else the latest year, venue 'YY
    or release YY.MM its text names (a source cites earlier work, not later)."""
    arxiv = [2000 + int(y) for y in re.findall(r"\b([12]\d)[01]\d\.\d{4,5}\b", text)]
    if arxiv:
        return max(arxiv)
    years = [int(y) for y in re.findall(r"\b(20[12]\d)\b", text)]
    years += [2000 + int(y) for y in re.findall(_VENUE_YEAR, text.lower())]
    years += [2000 + int(a or b) for a, b in re.findall(_RELEASE_YEAR, text.lower())]
    return max(years) if years else None


PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
# The fp8 recipes (and NVFP4) published tables name, most specific first: (pattern,
# precision, ``TrainingSpec.fp8_recipe``); NVIDIA's performance pages write FP8-CS (current
# scaling), FP8-MX (MXFP8), FP8-BLK (DeepSeek-style blockwise) and NVFP4.
_RECIPES = [
    (r"nvfp4", "fp4", None),
    (r"mxfp8|\bfp8[- ]mx\b", "fp8", "mxfp8"),
    (r"\bfp8[- ]cs\b|current[- ]scaling|tensorwise", "fp8", "tensorwise"),
    (r"\bfp8[- ]blk\b|blockwise|deepseek[- ]style", "fp8", "blockwise"),
    (r"delayed[- ]scaling", "fp8", "delayed"),
]


def quantisation(text: str) -> tuple[str | None, str | None]:
    """(precision, fp8 recipe) the text names (``_RECIPES``); (None, None) where it names
    none."""
    t = text.lower()
    return next(((prec, recipe) for pattern, prec, recipe in _RECIPES if re.search(pattern, t)),
                (None, None))


def precision(text: str) -> str:
    t = text.lower()
    if re.search(r"\bfp8\b", t) and "peak" not in t:
        return "fp8"
    return "fp16" if "fp16" in t and "bf16" not in t else "bf16"


def recompute(text: str) -> str | None:
    """The recompute mode the text names: none (no or disabled recomputation, activation
    checkpointing or AC), selective, or full (full recomputation or AC, the recomputed
    forward, activation checkpointing unqualified); None where it names none."""
    t = re.sub(r"[_\s]+", " ", text.lower())
    if re.search(r"\b(no|without) (activation )?(recomput|checkpoint|ac\b)|"
                 r"(checkpointing|recomputation|\bac)( type)?:? (disabled|none|off)\b", t):
        return "none"
    if "selective" in t:
        return "selective"
    if re.search(r"(full|activation) (activation )?recomputation|recomputed forward|"
                 r"activation checkpointing|\bfull ac\b", t):
        return "full"
    return None
