"""Why nothing fits: the binding constraints, with numbers, and what would make it fit."""

from __future__ import annotations

import numpy as np

from planner.cost.batch import BatchCost, PlanArrays, compose
from planner.cost.memory import GIB
from planner.cost.tables import RECOMPUTE, cost_tables
from planner.search.space import degree_domains, equal_work_vpps
from planner.search.spec import SearchSpec, allows
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, TrainingSpec
from planner.specs.plan import a2a_cp_violation


def structural_reasons(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                       search: SearchSpec, lattice_points: int = 0,
                       unfiltered: int = 0, refusals: dict[str, list[str]] | None = None
                       ) -> list[str]:
    """The space is empty before memory is even considered: say which rule empties it.
    ``lattice_points``: the degree combinations (dp, tp, pp, cp and the expert degrees) that
    land on the GPUs; when there are some, the other knobs emptied the space. ``unfiltered``:
    the plans the request allows before the framework filter; when there are some, the
    filter emptied it, and ``refusals`` says, per framework, what it refuses in all of them."""
    N, G = cluster.num_gpus, cluster.gpus_per_node
    gbs = training.global_batch_size
    dom = degree_domains(model, cluster, training, search)
    out = []
    if not dom["tp"]:
        out.append(
            f"no tensor parallel degree is possible: tp must divide num_attention_heads"
            f"({model.num_attention_heads}), num_kv_heads({model.kv_heads}) and "
            f"ffn_hidden_size({model.ffn}), stay within a node (gpus_per_node={G}) unless "
            f"allow_cross_node_tp, and satisfy the request's tp restriction ({search.tp!r})")
    if not dom["dp"]:
        out.append(f"no data parallel degree is possible: dp must divide global_batch_size"
                   f"({gbs}), be at most the GPUs ({N}) and satisfy the request ({search.dp!r})")
    if not dom["pp"]:
        out.append(f"no pipeline degree is possible: pp must be at most num_layers"
                   f"({model.num_layers}) and the GPUs ({N}) and satisfy the request "
                   f"({search.pp!r})")
    if not out and unfiltered:
        who = f"{search.framework} runs none" if search.framework else "no framework runs any"
        out.append(f"{unfiltered} plans satisfy the request, but {who} of them as predicted "
                   "(the framework capability matrix, GET /v1/frameworks, says why); "
                   "search.framework 'any' searches them all")
        for fw, messages in (refusals or {}).items():
            if messages:
                out.append(f"{fw} runs none of them: " + "; ".join(messages))
        return out
    if not out and lattice_points:
        out.append(f"{lattice_points} combinations of dp, tp, pp and cp land on the GPUs, "
                   "but the request's other restrictions exclude every plan of them")
        if search.vpp is not None and not allows(search.vpp, 1):
            L = model.num_layers
            pps = [p for p in dom["pp"] if p > 1]
            none = [p for p in pps if not equal_work_vpps(L, p, search)]
            if none:
                out.append(
                    f"vpp {search.vpp!r}: the search interleaves only layouts whose model "
                    f"chunks hold equal work, num_layers({L}) dividing pp * vpp, or {L + 2} "
                    "doing so with the embedding and the loss standing in for a layer each; "
                    f"no allowed vpp does at pp in {none[:12]}; estimate such a plan with "
                    "its layers_per_stage instead")
            out.append("interleaving also needs grad_accum_steps >= pp")
        elif search.dp_replicate is not None and not allows(search.dp_replicate, 1):
            out.append(
                f"dp_replicate {search.dp_replicate!r}: hybrid sharding needs a ZeRO stage "
                "of 1 or more, dp divisible by dp_replicate with a shard group of at least "
                "two ranks left (dp / dp_replicate * cp >= 2) and, in a MoE model, whole "
                f"expert groups in each replica; dp may be {dom['dp'][:12]}")
        else:
            out.append("the restrictions on micro_batch_size, grad_accum_steps, vpp, "
                       "zero_stage, recompute, sequence_parallel, ep or etp exclude every "
                       "combination; note 1F1B needs grad_accum_steps >= pp")
        return out
    # The all-to-all's head rule removes (tp, cp) pairs before they reach the GPU count.
    kept, refused = a2a_pairs(model, training, dom)
    degrees_exist = not out
    if degrees_exist and refused:
        out.append(f"{next(iter(refused.values()))}; of the (tp, cp) pairs the request "
                   f"allows, {len(refused)} are refused so and {kept[:12]} are left; "
                   "Transformer Engine's ring (training.ring_attention 'te') takes any cp, "
                   "and the hierarchy ('a2a+p2p') any multiple of a cp_a2a_size that splits "
                   "the heads")
    if degrees_exist and (kept or not refused):
        lo = N if not search.allow_idle_gpus else -(-N // 2)
        out.append(
            f"no dp * tp * pp * cp lands on {N} GPUs"
            + (f" (or between {lo} and {N})" if search.allow_idle_gpus else "")
            + f" with dp dividing global_batch_size({gbs}) (dp in {dom['dp'][:12]}), tp in "
            f"{dom['tp']}, cp in {dom['cp'][:12]}, pp in {dom['pp'][:12]}"
            + ("" if search.allow_idle_gpus else "; allow_idle_gpus would accept fewer GPUs")
            + ", or choose a global batch with more divisors")
        if any(getattr(search, f) is not None for f in
               ("micro_batch_size", "grad_accum_steps", "vpp", "zero_stage", "recompute",
                "sequence_parallel")):
            out.append("the request's restrictions on micro_batch_size, grad_accum_steps, vpp, "
                       "zero_stage, recompute or sequence_parallel exclude every combination "
                       "left; note 1F1B needs grad_accum_steps >= pp")
    return out


def memory_reasons(req, plans: PlanArrays, bc: BatchCost, capacity: float) -> list[str]:
    """Every plan of the space overflows memory: show the smallest footprint and its parts."""
    gpu: GPUSpec = req.cluster.gpu
    # The search skipped the activations of plans whose model states alone overflow: the
    # smallest footprint needs every plan's exact memory.
    full = compose(plans, cost_tables(req.model, req.cluster, req.training, req.efficiency,
                                      req.calibration), memory_only=True)
    i = int(np.argmin(full.memory_bytes))
    exact = compose(plans.take(np.array([i])), cost_tables(req.model, req.cluster, req.training,
                                                            req.efficiency, req.calibration))
    parts = {k: float(v[0]) / GIB for k, v in exact.memory_parts.items()}
    states = parts["weights"] + parts["gradients"] + parts["optimizer"]
    usable = capacity / GIB
    desc = (f"dp={plans.dp[i]}, tp={plans.tp[i]}, pp={plans.pp[i]}, cp={plans.cp[i]}, "
            f"micro_batch_size={plans.mbs[i]}, recompute={RECOMPUTE[plans.rec[i]]}, "
            f"zero_stage={plans.zero[i]}")
    head = (f"no plan fits in memory: the smallest footprint in the space is "
            f"{exact.memory_bytes[0] / GIB:.1f} GiB per GPU ({desc}): weights, gradients and "
            f"optimizer states {states:.1f} GiB, activations {parts['activations']:.1f} GiB; "
            f"a {gpu.name} has {gpu.memory_gib:g} GiB, {usable:.1f} GiB usable after the "
            f"{100 * req.search.memory_headroom:.0f}% headroom")
    out = [head]
    s = req.search
    states_all = (bc.memory_parts["weights"] + bc.memory_parts["gradients"]
                  + bc.memory_parts["optimizer"])
    j = int(np.argmin(states_all))
    min_states = float(states_all[j]) / GIB
    room = usable - req.efficiency.memory_reserve_gib
    if min_states > room:
        gpus = int(np.ceil(min_states / max(room, 1e-9) * req.cluster.num_gpus))
        out.append(f"weights, gradients and optimizer states alone need {min_states:.1f} GiB per "
                   f"GPU even with tp={plans.tp[j]}, pp={plans.pp[j]}, dp={plans.dp[j]}, "
                   f"zero_stage={plans.zero[j]}, the most sharded plan allowed; a {gpu.name} has "
                   f"{gpu.memory_gib:g} GiB: about {gpus} GPUs in all would be needed to spread "
                   "them")
    hints = []
    if not s.allows_recompute("full"):
        hints.append("allow recompute='full' (activations shrink to one tensor per layer)")
    if s.zero_stage is not None and not (s.zero_stage == 3 or (isinstance(s.zero_stage, list)
                                                               and 3 in s.zero_stage)):
        hints.append("allow zero_stage=3 (shards the weights too)")
    if parts["activations"] > states:
        hints.append("a smaller micro-batch, sequence or global batch, or context parallelism")
    if (ring := a2a_cp_limit(req)) is not None:
        hints.append(ring)
    need = float(exact.memory_bytes[0]) / GIB
    hints.append(larger_gpu_hint(gpu, need, 1 - s.memory_headroom))
    hints.append("more GPUs")
    out.append("what would help: " + "; ".join(hints))
    return out


def a2a_pairs(model: ModelSpec, training: TrainingSpec, dom: dict[str, list[int]]
              ) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str]]:
    """The (tp, cp) pairs of the degree domains that all-to-all context parallelism's head
    rule keeps, and those it refuses with why (``specs.plan.a2a_cp_violation``; it refuses
    none for other CP)."""
    refused = {(t, c): why for t in dom["tp"] for c in dom["cp"]
               if (why := a2a_cp_violation(model, training, t, c)) is not None}
    return [(t, c) for t in dom["tp"] for c in dom["cp"] if (t, c) not in refused], refused


def a2a_cp_limit(req) -> str | None:
    """Where all-to-all context parallelism (``training.ring_attention`` 'a2a') keeps cp below
    what the sequence allows, since it splits each tensor-parallel rank's heads: say how far
    Transformer Engine's ring would go instead. None otherwise."""
    if req.training.ring_attention != "a2a":
        return None
    dom = degree_domains(req.model, req.cluster, req.training, req.search)
    split = [c for _, c in a2a_pairs(req.model, req.training, dom)[0]]
    if not dom["cp"] or max(split, default=1) >= max(dom["cp"]):
        return None
    return (f"Transformer Engine's ring (training.ring_attention 'te'), which allows cp up to "
            f"{max(dom['cp'])}: the all-to-all splits each tensor-parallel rank's heads over "
            f"the cp ranks, so with {req.model.attention_kv_heads} K,V heads and "
            f"{req.model.num_attention_heads} query heads it stops at cp={max(split, default=1)}; "
            "or the hierarchy (ring_attention 'a2a+p2p'), whose all-to-alls split the heads "
            "over cp_a2a_size ranks only")


def larger_gpu_hint(gpu: GPUSpec, need_gib: float, usable_share: float) -> str:
    """Which GPU presets would hold the smallest footprint (``need_gib`` per GPU, at the same
    share of their memory usable): a larger GPU is named only where the plan would then fit,
    and where none would, the hint says so rather than suggesting one that still overflows."""
    presets = (GPUSpec.from_preset(g) for g in GPUSpec.preset_names())
    bigger = sorted((g for g in presets if g.memory_gib > gpu.memory_gib),
                    key=lambda g: g.memory_gib)
    holds = [g.name for g in bigger if g.memory_gib * usable_share >= need_gib]
    if holds:
        return f"a GPU with more memory that holds {need_gib:.1f} GiB ({', '.join(holds)})"
    if not bigger:
        return f"no GPU preset has more memory than the {gpu.name}"
    top = bigger[-1]
    return (f"no GPU preset holds {need_gib:.1f} GiB per GPU (the largest, {top.name}, has "
            f"{top.memory_gib * usable_share:.1f} GiB usable)")
