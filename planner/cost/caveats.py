"""What a practitioner should know before trusting one prediction: where the plan lies
outside what published runs confirm, or where the model is known to be optimistic.

The step model is an optimiser's input, so the search lands where the model is most
optimistic; these notes say so in the answer instead of hiding it (predictions are never
capped). Each note rests on the published runs of ``benchmarks/data/published_runs.json`` as
``benchmarks/published_accuracy.py`` replays them; ``tests/test_caveats.py`` recomputes every
number quoted here from that corpus, so a refit or a new run that moves them fails the suite
until this table is updated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

if TYPE_CHECKING:
    from planner.result import PlanEstimate


# The best model-FLOPs utilisation measured by published dense runs, per GPU family and
# precision group (16-bit or fp8), in the planner's own FLOPs convention (the model's FLOPs
# of the run over its measured step time), for models of at least a given size: small models
# reach MFUs no large one has (no pipeline or tensor parallelism to pay for), so a plan is
# held to the best run of a model as large as its own or larger. Each entry is a step of that
# staircase, by size: (parameters, MFU, corpus run id) -- the best of the runs of at least
# that many parameters -- and the number of runs of the class.
BEST_DENSE_MFU: dict[tuple[str, str], tuple[tuple[tuple[float, float, str], ...], int]] = {
    ("a100", "16-bit"): (((2.65e9, 0.717, "fa2-gpt3-2.7b-8k-flash2"),
                          (14.0e9, 0.673, "hagemann-13b-2k-64g-fa2rms-noac-m1t1p1-132178"),
                          (33.81e9, 0.606, "hagemann-30b-2k-64g-fa2rms-noac-m1t1p4-nosp-131848"),
                          (66.86e9, 0.587, "hagemann-65b-2k-64g-fa2rms-noac-m1t2p4-sp-131697"),
                          (1007.95e9, 0.563, "korthikanti-1t-selective")), 569),
    ("h100", "16-bit"): (((8.03e9, 0.6, "dgxc-2502-llama3.1-8b-h100-8-bf16"),
                          (15.63e9, 0.554, "dgxc-2502-nemotron4-15b-h100-16-bf16"),
                          (407.56e9, 0.547, "dgxc-2502-llama3.1-405b-h100-576-bf16"),
                          (461.44e9, 0.465, "megatron-readme-462b")), 69),
    ("v100", "16-bit"): (((1.16e9, 0.44, "megatron-2020-1b-v100-1"),
                          (2.03e9, 0.39, "megatron-2020-2b-v100-2"),
                          (4.23e9, 0.354, "megatron-2020-4b-v100-4"),
                          (8.67e9, 0.315, "megatron-2020-8b-v100-8")), 4),
    ("h100", "fp8"): (((174.57e9, 0.484, "mlperf41-gpt3-175b-h100-256"),
                       (175.18e9, 0.449, "nemo2407-gpt3-175b-512"),
                       (407.56e9, 0.435, "dgxc-2502-llama3.1-405b-h100-576-fp8")), 84),
}
PARAMS_ROUNDING = 0.01e9       # the steps' parameters, to 0.01 B
# GPU families FlashAttention does not run on (flash-attn needs sm80, Ampere, or newer).
NO_FLASH_ATTENTION = ("v100",)
# Points of MFU above that best before a plan is flagged (the "within 3 points").
MFU_MARGIN = 0.03
# GPU families no published run of the corpus ran on: their sustained rates are derived from
# datasheets and a matmul benchmark (planner/specs/gpu.py), never fitted or tested there; the
# one published run found on them (Llama 3 8B on 64 MI250X GCDs, torchtitan's FSDP2,
# github.com/eminorhan/frontier-torchtitan) measured this much slower than predicted
# (``tests/test_amd.py``).
DERIVED_ONLY = ("mi250x", "mi300x", "mi325x")
DERIVED_ONLY_CHECK = ("mi250x", 28)

# Collectives across AWS EFA instances as one published cluster measured them: 256 MB
# all_reduce and all_gather bus bandwidth (GB/s) by node count, 8 H100 a node, from the
# Ultra-Scale Playbook's figure (``benchmarks/data/efa_collectives_playbook.json``, which
# ``tests/test_cloud_presets.py`` holds these to). On two nodes they are near what the cloud
# presets cost (planner/specs/cloud.py); beyond, they fall far below the rings the model
# costs, which lose about 6% a doubling.
EFA_MEASURED_NODES = (1, 2, 4, 8, 16, 32, 64)
EFA_MEASURED_ALL_REDUCE = (436.0, 361.7, 160.1, 99.6, 84.7, 64.9, 32.9)
EFA_MEASURED_ALL_GATHER = (249.8, 184.6, 119.0, 69.0, 55.0, 28.0, 11.0)

# A host-bound layer: the Ultra-Scale Playbook's single-node nanotron runs whose layers the
# model puts under this many ms a micro-batch (forward and backward, the busiest stage's
# compute over its layers and micro-batches) took (runs, least, most) ms a layer, and
# (least, most) percent longer than predicted (``tests/test_host_floor.py`` recomputes them
# from ``benchmarks/data/tables/ultrascale_playbook_1node.json``).
HOST_BOUND_MS = 3.2
HOST_BOUND_RUNS = (14, 3.0, 4.1, 18, 203)


def per_layer_ms(compute_s: float, step_s: float, microbatches: int, layers: int,
                 measured_step_s: float | None = None) -> tuple[float, float]:
    """(the model's compute, the measured step less the model's other parts) a layer a
    micro-batch on the busiest stage (its ``layers``), forward and backward, ms, from a step of
    ``step_s`` with ``compute_s`` of compute (the second 0 without a measured step): where
    the first is small and the second is not, the run waited on its host rather than on its
    kernels."""
    n = microbatches * max(layers, 1)
    return compute_s / n * 1e3, (0.0 if measured_step_s is None
                                 else (measured_step_s - (step_s - compute_s)) / n * 1e3)


def layer_ms(est: PlanEstimate, measured_step_s: float | None = None) -> tuple[float, float]:
    """``per_layer_ms`` of an estimate."""
    return per_layer_ms(est.breakdown["compute"], est.step_time_s, est.grad_accum_steps,
                        max(est.layers_per_stage), measured_step_s)


# Fine-grained mixture of experts: the published runs of models with at least this many
# routed experts, (runs, least, median, most) of measured / predicted - 1 in percent, and how
# many of them measured slower than the model predicts (all but NeMo AutoModel's two, which
# ran 18% faster: the model is optimistic on such models in most stacks, not in every one).
FINE_GRAINED_EXPERTS = 128
FINE_GRAINED_ERRORS = (20, -18, 26, 145)
FINE_GRAINED_SLOWER = 18

# What held-out published runs measured against the model's prediction, per model class:
# (runs, sources, 10th percentile, median, 90th percentile) of measured / predicted step time,
# over the held-out runs of ``benchmarks/data/published_runs.json`` as ``published_accuracy.py``
# replays them, each source weighing the same (``published_accuracy.source_weighted_quantiles``:
# one team's long layout sweep must not set the band of every plan). ``step_time_band`` scales
# an estimate's step time by them: the range eight in ten published runs of its class fell in.
MEASURED_OVER_PREDICTED: dict[str, tuple[int, int, float, float, float]] = {
    "dense": (709, 28, 0.905, 1.015, 1.24),
    "moe": (14, 3, 0.861, 0.895, 1.096),
    "fine_grained_moe": (20, 9, 0.885, 1.183, 1.419),
}
# The same per class and GPU family (``gpu_family``), where at least ``BAND_MIN_SOURCES``
# sources ran the class on that family: the model errs one way on A100 (fitted on Megatron-LM's
# best runs, the other stacks of the time ran slower) and the other on H100 (NVIDIA's recipes of
# late 2024 onwards run faster), so the pooled band is wider than either; a family with fewer
# sources takes its class's pooled band.
BAND_MIN_SOURCES = 5
MEASURED_OVER_PREDICTED_BY_GPU: dict[tuple[str, str], tuple[int, int, float, float, float]] = {
    ("dense", "a100"): (551, 17, 0.962, 1.056, 1.28),
    ("dense", "h100"): (132, 14, 0.872, 0.973, 1.09),
    ("fine_grained_moe", "h100"): (14, 8, 0.845, 1.174, 1.43),
}
# The same for predictions anchored on a measured run of the stack (a request whose
# ``efficiency.compute_scale`` or ``network_scale`` is not 1, as ``planner calibrate anchor``
# fits them: ``EfficiencyModel.anchored``): each held-out source's runs on each GPU model it
# ran on at least twice, anchored on the one of them on the fewest GPUs and scored on the
# others, as the service keeps one anchor per cluster (``benchmarks/anchored_accuracy.py
# --per-gpu``), all classes together.
ANCHORED_MEASURED_OVER_PREDICTED = (694, 32, 0.951, 1.027, 1.172)

# Custom interleaved layouts: the closed form the estimate and the search use sees each
# stage's total; where the event simulation (``cost.pipeline.simulate``) of the schedule runs
# more than this much longer, the plan says so. (Every published interleaved run's layout is
# within 2.5% either way; DeepSeek-V3 as 8, ..., 8, 5 layers at pp 8 x vpp 4, a light last
# stage whose last chunk holds a layer, the MTP module and two head passes, runs 19% longer.)
SCHEDULE_MARGIN = 0.03

# Not flagged, because published runs contradict the worry: interleaving down to one layer a
# chunk (NeMo 24.07's Llama 2 70B at vpp 20 and 13B at vpp 10, predicted within 2.1%), memory
# within 5% of the GPU's (llm-foundry's A100 runs, a Mixtral 8x22B run and the MoE report's
# DeepSeek-V3 ran where the model puts them at 95-98%), and sharded data parallelism that
# keeps activations: once llm-foundry's runs are costed with the attention kernel they ran
# (TrainingSpec.attention_kernel), such runs land on both sides of the prediction (llm-foundry's
# A100 runs without recompute from 13% faster to 6% slower; its H100 runs at 512 GPUs 16-19%
# slower and torchtitan's eager FSDP2 runs of April 2024 12-20%; torchtitan's full-recompute
# 70B runs 6-7%).


def precision_group(training: TrainingSpec) -> str:
    return training.precision if training.precision in ("fp8", "fp4") else "16-bit"


def best_dense_mfu(family: str, group: str, params: float) -> tuple[float, str, int] | None:
    """(MFU, run id, runs of the class): the best published dense run on this GPU family and
    precision group of a model with at least ``params`` parameters (the largest model's, for a
    model larger than any published), or None for a class without published runs."""
    entry = BEST_DENSE_MFU.get((family, group))
    if entry is None:
        return None
    steps, runs = entry
    # Steps hold parameters to 0.01 B, so a model within half of that of a step is that step's.
    _, mfu, run_id = next((x for x in steps if x[0] + PARAMS_ROUNDING / 2 >= params), steps[-1])
    return mfu, run_id, runs


def model_class(model: ModelSpec) -> str:
    """The class ``MEASURED_OVER_PREDICTED`` holds a model's published runs under."""
    if not model.is_moe:
        return "dense"
    return "fine_grained_moe" if model.experts >= FINE_GRAINED_EXPERTS else "moe"


def gpu_family(cluster: ClusterSpec) -> str:
    """The GPU family the published runs are grouped by: the preset name's first part
    ('a100' for both A100 memories, 'h100', 'gb200', ...)."""
    return cluster.gpu.name.split("-")[0]


def step_time_band(model: ModelSpec, step_time_s: float, anchored: bool = False,
                   family: str | None = None) -> dict[str, float | int | str | None]:
    """The step time eight in ten held-out published runs of the model's class would have
    measured, given this prediction: the prediction times the 10th, 50th and 90th percentiles
    of their measured / predicted, each source weighing the same: those of the class on the
    GPU ``family`` where enough sources ran it there (``MEASURED_OVER_PREDICTED_BY_GPU``,
    ``gpu`` the family), else of the class on every GPU (``MEASURED_OVER_PREDICTED``, ``gpu``
    None); for a prediction ``anchored`` on a measured run of its stack, those of the anchored
    published runs (``ANCHORED_MEASURED_OVER_PREDICTED``, class 'anchored')."""
    cls = "anchored" if anchored else model_class(model)
    by_gpu = None if anchored else MEASURED_OVER_PREDICTED_BY_GPU.get((cls, family or ""))
    runs, sources, low, median, high = (ANCHORED_MEASURED_OVER_PREDICTED if anchored
                                        else by_gpu or MEASURED_OVER_PREDICTED[cls])
    return {"model_class": cls, "gpu": family if by_gpu else None, "runs": runs,
            "sources": sources, "low_s": step_time_s * low, "median_s": step_time_s * median,
            "high_s": step_time_s * high}


def caveats(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, *, mfu: float,
            schedule_excess: float = 0.0, layer_ms: float | None = None) -> list[str]:
    """The notes for one plan (empty when published runs back it). ``schedule_excess``: how
    much longer the event simulation of the plan's schedule runs than its closed form;
    ``layer_ms``: the busiest stage's compute a layer a micro-batch, forward and backward,
    where no host floor was given (``EfficiencyModel.layer_host_floor_us``)."""
    out: list[str] = []
    if layer_ms is not None and layer_ms < HOST_BOUND_MS:
        n, lo, hi, slow_lo, slow_hi = HOST_BOUND_RUNS
        out.append(
            f"this plan's layers take {layer_ms:.2f} ms a micro-batch on the GPU: published "
            f"runs of an eager stack (nanotron, the Ultra-Scale Playbook) whose layers the "
            f"model puts under {HOST_BOUND_MS} ms took {lo}-{hi} ms a layer ({n} runs, "
            f"{slow_lo}-{slow_hi}% slower than predicted), the time its host needs to issue "
            "them; on such a stack set efficiency.layer_host_floor_us to its figure")
    if schedule_excess > SCHEDULE_MARGIN:
        out.append(
            f"the event simulation of this interleaved schedule runs "
            f"{100 * schedule_excess:.0f}% longer than the step time, which sees stage totals "
            "only: its model chunks hold unequal work (a heavy last chunk beside light "
            "ones); read the step time as a lower bound, or split the layers so that no "
            "chunk outweighs the others")
    if cluster.name.startswith("aws-") and cluster.num_nodes > 2:
        i = max(j for j, n in enumerate(EFA_MEASURED_NODES) if n <= cluster.num_nodes)
        ag, ar = EFA_MEASURED_ALL_GATHER, EFA_MEASURED_ALL_REDUCE
        out.append(
            f"collectives across {cluster.num_nodes} EFA instances: on one published cluster "
            f"of p5 instances (the Ultra-Scale Playbook) 256 MB all_gather fell from "
            f"{ag[1]:g} GB/s of bus bandwidth on 2 nodes to {ag[i]:g} on "
            f"{EFA_MEASURED_NODES[i]} ({100 * ag[i] / ag[1]:.0f}%) and all_reduce from "
            f"{ar[1]:g} to {ar[i]:g} ({100 * ar[i] / ar[1]:.0f}%), where the model's rings "
            "lose about 6% a doubling past 4 nodes; calibrate with nccl-tests at your node "
            "count (planner calibrate import-nccl-tests) before trusting the data-parallel "
            "and ZeRO times")
    family = gpu_family(cluster)
    if family in NO_FLASH_ATTENTION and training.flash_attention:
        out.append(
            f"FlashAttention does not run on {family.upper()} (flash-attn: \"FlashAttention "
            "only supports Ampere GPUs or newer\"); a fused attention there is PyTorch SDPA's "
            "memory-efficient kernel, costed at a rate no benchmark gives "
            f"({cluster.gpu.attention_efficiency:.2f} of the peak); set training.flash_attention "
            "false to cost unfused attention (Megatron-LM's fused softmax) instead")
    if family in DERIVED_ONLY:
        checked, slower = DERIVED_ONLY_CHECK
        out.append(
            f"no published run on {family.upper()} is in the accuracy corpus: its rates are "
            "derived from the datasheet and a matmul benchmark, not fitted or tested (the one "
            f"published run found, on {checked.upper()}, measured {slower}% slower than "
            "predicted); anchor the model on a measured step of your stack (planner "
            "calibrate anchor) before trusting the step time")
    best = best_dense_mfu(family, precision_group(training), model.num_params)
    if best is not None and not model.is_moe and mfu > best[0] + MFU_MARGIN:
        mfu_best, run_id, runs = best
        # The family's own band where it has one (``step_time_band`` decides), as a factor.
        band = step_time_band(model, 1.0, family=family)
        ratio = cast(float, band["median_s"])
        typical = (f" (held-out dense {family.upper()} runs measured a median {ratio:.3f} "
                   f"times the predicted step, which puts it at {100 * mfu / ratio:.1f}%)"
                   if band["gpu"] else "")
        out.append(
            f"predicted MFU {100 * mfu:.1f}% is {100 * (mfu - mfu_best):.1f} points above the "
            f"best of {runs} published dense {family.upper()} {precision_group(training)} "
            f"runs for a model this large ({100 * mfu_best:.1f}%, {run_id}): no "
            f"published run confirms it; read it as an upper bound{typical}")
    if model.is_moe and model.experts >= FINE_GRAINED_EXPERTS:
        n, lo, med, hi = FINE_GRAINED_ERRORS
        faster = (f"; the other {n - FINE_GRAINED_SLOWER} up to {-lo}% faster"
                  if FINE_GRAINED_SLOWER < n else "")
        out.append(
            f"fine-grained MoE ({model.experts} experts): {FINE_GRAINED_SLOWER} of the {n} "
            f"published runs of such models measured slower than this model predicts, up to "
            f"{hi}% (median {med}%{faster}); read the step time as a likely lower bound")
    return out
