"""The plan space of a request: every plan that satisfies the structural constraints and that
a framework runs as predicted.

dp * tp * pp * cp equals the GPU count (or lies between half of it and it, with idle GPUs
allowed); dp * micro_batch_size * grad_accum_steps = global_batch_size; tp divides the query
heads, the KV heads and the FFN width and no TP group spans two nodes (with the ranks placed as
torchrun places them) unless allowed otherwise; cp divides the sequence into 2 cp load-balanced
chunks; the layers fill pp stages (the middle ones equal, or the embedding and the loss standing
in for a layer each) and, with interleaving, pp * vpp chunks of equal work (``specs.layout``;
other layouts are estimated when given, not enumerated); interleaving needs at least pp
micro-batches (the micro-batch group is then chosen as Megatron-LM allows); plain 1F1B runs any
number of micro-batches, fewer than pp included (its bubble is then (p - 1)/m). Knobs that make
no difference are not duplicated: sequence parallelism only with tp > 1, interleaving only with
pp > 1, and a single ZeRO stage when nothing shards. Hybrid sharding (``plan.dp_replicate``)
joins ZeRO-3 plans whose replicas span 1, 2, 4 or 8 whole nodes, or any count and sharding
stage the search asks for (``replica_counts``). Mixture-of-experts models add the expert
degrees (``specs.plan``: ep divides the experts, ep * etp divides tp * cp * dp; etp is 1 or tp,
the two layouts Megatron-Core's folding recommends and torchtitan supported).
``search.framework`` keeps the plans that
framework runs (``planner.frameworks``); without it, those at least one framework runs.
Memory is not checked here (``solver.py`` does it with the cost model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from planner.cost.batch import PLAN_FIELDS, PlanArrays
from planner.cost.tables import RECOMPUTE
from planner.errors import PlannerInputError
from planner.frameworks import (
    FRAMEWORKS,
    model_rule_args,
    rules_context,
    rules_mask,
    universal_refusals,
)
from planner.kept import Kept
from planner.search.spec import SearchSpec, allows
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.specs.layout import default_layout, layout_of
from planner.specs.placement import launch_layout
from planner.specs.plan import a2a_cp_violation


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass
class Space:
    plans: PlanArrays
    domains: dict[str, list[int]] = field(default_factory=dict)
    world_sizes: tuple[int, int] = (0, 0)
    lattice_points: int = 0
    # Plans of the request's restrictions before the framework filter (``framework_mask``).
    unfiltered: int = 0
    # When the filter removed every plan: per framework asked for, its rules that refuse all
    # of them (``frameworks.universal_refusals``).
    refusals: dict[str, list[str]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.plans)


def degree_domains(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                   search: SearchSpec) -> dict[str, list[int]]:
    """The values each degree may take on its own (before their product is constrained)."""
    N, G = cluster.num_gpus, cluster.gpus_per_node
    tp_max = N if search.allow_cross_node_tp else min(G, N)
    g = math.gcd(math.gcd(model.num_attention_heads, model.kv_heads), model.ffn)
    s = training.seq_length
    L = model.num_layers
    return {
        "tp": [t for t in divisors(g) if t <= tp_max and allows(search.tp, t)],
        # cp > 1 splits the sequence into 2 cp chunks: cp divides s / 2.
        "cp": [c for c in (divisors(s // 2) if s % 2 == 0 else [1])
               if c <= N and (c == 1 or N % c == 0 or search.allow_idle_gpus)
               and allows(search.cp, c)],
        "pp": [p for p in range(1, min(L + 2, N) + 1) if allows(search.pp, p)
               and default_layout(L, p, 1) is not None],
        "dp": [d for d in divisors(training.global_batch_size) if d <= N and allows(search.dp, d)],
    }


def equal_work_vpps(num_layers: int, pp: int, search: SearchSpec) -> list[int]:
    """The interleaving degrees the space holds at ``pp``: those whose chunks hold equal work,
    the layers dividing pp * vpp, or doing so once the embedding and the loss stand in for a
    layer each. Custom layouts are estimated when asked for, not enumerated: the closed form
    the search ranks by sees stage totals only, and chunks of unequal work can run far longer
    (``cost.caveats``: DeepSeek-V3 as 8, ..., 8, 5 layers at pp 8 x vpp 4 runs 19% longer in
    the event simulation than the closed form says)."""
    return [v for v in range(2, (num_layers + 2) // pp + 1)
            if (layout := default_layout(num_layers, pp, v)) is not None
            and layout.kind in ("even", "embedding_loss") and allows(search.vpp, v)]


def expert_degrees(model: ModelSpec, search: SearchSpec, tp: int, fold: int
                   ) -> list[tuple[int, int]]:
    """(ep, etp) pairs of a stage whose tp * cp * dp ranks number ``fold`` ((1, 1) for a dense
    model)."""
    if not model.is_moe:
        return [(1, 1)] if allows(search.ep, 1) and allows(search.etp, 1) else []
    etps = [1] + ([tp] if tp > 1 and model.expert_ffn % tp == 0 else [])
    return [(e, et) for et in etps if allows(search.etp, et)
            for e in divisors(model.experts)
            if allows(search.ep, e) and fold % (e * et) == 0]


# Nodes one replica spans in the hybrid sharding the search holds by default.
HYBRID_NODES = (1, 2, 4, 8)


def replica_counts(dp: int, tp: int, cp: int, expert_unit: int, gpus_per_node: int,
                   search: SearchSpec) -> list[int]:
    """Hybrid sharding's replica counts (``plan.dp_replicate``) the space holds for a stage of
    dp * tp * cp ranks: 1 (shard over all of them) and, unless the search restricts them, each
    count whose replicas span 1, 2, 4 or 8 whole nodes (``HYBRID_NODES``: HSDP shards inside a
    node or a few and replicates across them), still shard something (dp / r * cp >= 2) and
    hold whole expert groups (``expert_unit`` = ep * etp), with ZeRO-3 (``knobs``). A
    restriction in ``search.dp_replicate`` admits any count that satisfies the last two, with
    any ZeRO stage from 1."""
    out = [1] if allows(search.dp_replicate, 1) else []
    for r in divisors(dp)[1:]:
        ranks = tp * cp * dp // r
        if dp // r * cp < 2 or ranks % expert_unit or not allows(search.dp_replicate, r):
            continue
        if search.dp_replicate is None and not (
                ranks % gpus_per_node == 0 and ranks // gpus_per_node in HYBRID_NODES):
            continue
        out.append(r)
    return out


MAX_LATTICE_POINTS = 20_000
MAX_PLANS = 1_500_000   # ~1.5 GB of arrays while costing; the largest benchmark space is ~400K


# Fields of the search that do not change the space (they rank, sample or bound the search).
_NOT_THE_SPACE = {"top_k", "time_limit_ms", "memory_headroom", "space_sample",
                  "rebalance_stages", "rebalance_interleaved", "partial_recompute",
                  "cpu_offload"}
_SPACES: Kept[Space] = Kept(16)


def build_space(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                search: SearchSpec) -> Space:
    """The request's space (kept for the next requests of the same setup, as the cost tables
    are: it is a pure function of its arguments, and callers only read it). Raises
    PlannerInputError when the space is too large to search in reasonable time."""
    key = (model, cluster, training, search.model_dump_json(exclude=_NOT_THE_SPACE))
    hit = _SPACES.get(key)
    return hit if hit is not None else _SPACES.put(key, _build_space(model, cluster,
                                                                     training, search))


def _build_space(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                 search: SearchSpec) -> Space:
    N, G = cluster.num_gpus, cluster.gpus_per_node
    L = model.num_layers
    gbs = training.global_batch_size
    lo = math.ceil(N / 2) if search.allow_idle_gpus else N
    dom = degree_domains(model, cluster, training, search)
    loops = len(dom["tp"]) * len(dom["cp"]) * len(dom["pp"]) * len(dom["dp"])
    if loops > 50 * MAX_LATTICE_POINTS:
        raise PlannerInputError(
            "search", f"the plan space is too large to search: tp({len(dom['tp'])} values) x "
            f"cp({len(dom['cp'])}) x pp({len(dom['pp'])}) x dp({len(dom['dp'])}) = {loops:,} "
            "degree combinations; restrict pp, cp or dp in the search")
    recs = [i for i, r in enumerate(RECOMPUTE) if search.allows_recompute(r)]
    zeros = [z for z in range(4) if allows(search.zero_stage, z)]
    vpp_of = {p: equal_work_vpps(L, p, search) for p in dom["pp"] if p > 1}
    knob_sets: dict[tuple[bool, bool, bool], np.ndarray] = {}

    def knobs(has_tp: bool, shards: bool, hybrid: bool = False) -> np.ndarray:
        key = (has_tp, shards, hybrid)
        if key not in knob_sets:
            sps = [s for s in ((0, 1) if has_tp else (0,)) if search.allows_sp(bool(s))]
            # Hybrid sharding: ZeRO-3 by default (whose per-layer gathers and reduce-scatters
            # the shard group's span matters most to); any sharding stage when asked for.
            hybrid_zs = [3] if search.dp_replicate is None else [1, 2, 3]
            zs = ([z for z in zeros if z in hybrid_zs] if hybrid else zeros if shards
                  else zeros[:1])
            knob_sets[key] = np.array(list(product(recs, zs, sps)),
                                      dtype=np.int64).reshape(-1, 3)
        return knob_sets[key]

    mbs_of = {dp: [(b, gbs // (dp * b)) for b in divisors(gbs // dp)
                   if allows(search.micro_batch_size, b)
                   and allows(search.grad_accum_steps, gbs // (dp * b))] for dp in dom["dp"]}
    # (dp, tp, pp, cp, vpp, mbs, ep, etp, replicas) by the flags that pick its knob set
    heads: dict[tuple[bool, bool, bool], list[tuple]] = {}
    lattice = total = 0
    for tp, cp, pp in product(dom["tp"], dom["cp"], dom["pp"]):
        inner = tp * cp * pp
        if inner > N or a2a_cp_violation(model, training, tp, cp) is not None:
            continue
        for dp in dom["dp"]:
            world = inner * dp
            if not lo <= world <= N:
                continue
            if (tp > 1 and not search.allow_cross_node_tp
                    and launch_layout(world, G).nproc_per_node % tp):
                continue                      # some TP group would span two nodes
            for ep, etp in expert_degrees(model, search, tp, tp * cp * dp):
                lattice += 1
                shards = dp * cp > 1 or (model.is_moe and tp * cp * dp > ep * etp)
                reps = (replica_counts(dp, tp, cp, ep * etp, G, search) if shards
                        else [1] if allows(search.dp_replicate, 1) else [])
                for r in reps:
                    ks = knobs(tp > 1, shards, r > 1)
                    if not len(ks):
                        continue
                    for mbs, m in mbs_of[dp]:
                        vpps = ([1] if allows(search.vpp, 1) else []) + (
                            [v for v in vpp_of[pp] if m >= pp] if pp > 1 else [])
                        rows = heads.setdefault((tp > 1, shards, r > 1), [])
                        for vpp in vpps:
                            rows.append((dp, tp, pp, cp, vpp, mbs, ep, etp, r))
                            total += len(ks)
            if total > MAX_PLANS:
                raise PlannerInputError(
                    "search", f"the plan space exceeds {MAX_PLANS:,} plans; restrict "
                    "micro_batch_size, pp, cp, vpp or the other knobs in the search")
    # Each variable as one contiguous array (a column of a row-major table would be strided:
    # the framework rules over a million plans ran three times slower on those).
    cols: dict[str, list[np.ndarray]] = {f: [] for f in PLAN_FIELDS}
    for flags in sorted(f for f, rows in heads.items() if rows):
        hs = np.array(heads[flags], dtype=np.int64)
        ks = knobs(*flags)
        for j, f in enumerate(("dp", "tp", "pp", "cp", "vpp", "mbs")):
            cols[f].append(np.repeat(hs[:, j], len(ks)))
        for j, f in enumerate(("rec", "zero", "sp")):
            cols[f].append(np.tile(ks[:, j].astype(np.int64), len(hs)))
        for j, f in ((6, "ep"), (7, "etp"), (8, "rep")):
            cols[f].append(np.repeat(hs[:, j], len(ks)))
        for f in ("rnl", "off"):                  # rnl 0: every layer recomputed; no offload
            cols[f].append(np.zeros(len(hs) * len(ks), dtype=np.int64))
    plans = PlanArrays(**{f: (np.concatenate(v) if v else np.empty(0, dtype=np.int64))
                          for f, v in cols.items()})
    unfiltered = len(plans)
    kept = plans.take(np.flatnonzero(framework_mask(plans, model, training, search)))
    refusals = (framework_refusals(plans, model, training, search)
                if unfiltered and not len(kept) else {})
    return Space(plans=kept, domains=dom, world_sizes=(lo, N), lattice_points=lattice,
                 unfiltered=unfiltered, refusals=refusals)


def framework_mask(plans: PlanArrays, model: ModelSpec, training: TrainingSpec,
                   search: SearchSpec) -> np.ndarray:
    """Plans the requested framework runs as predicted (any framework when none is named;
    every plan with ``"any"``)."""
    if search.any_framework:
        return np.ones(len(plans), dtype=bool)
    return runs_on(plans, model, training, _framework_names(search))


def _schedule_facts(plans: PlanArrays, model: ModelSpec, training: TrainingSpec):
    """(micro-batches, whether the layout is the even split) of each plan."""
    m = training.global_batch_size // (plans.dp * plans.mbs)
    key = plans.pp * 100_000 + plans.vpp
    uniq, inv = np.unique(key, return_inverse=True)
    even_of = np.array([layout_of(model.num_layers, int(k // 100_000),
                                  int(k % 100_000)).kind == "even" for k in uniq])
    return m, even_of[inv.reshape(-1)]


def framework_refusals(plans: PlanArrays, model: ModelSpec, training: TrainingSpec,
                       search: SearchSpec) -> dict[str, list[str]]:
    """Per framework the request asks for, what it refuses in every one of the plans."""
    m, even = _schedule_facts(plans, model, training)
    return {name: universal_refusals(name, plans, m, even, training, *model_rule_args(model))
            for name in _framework_names(search)}


def _framework_names(search: SearchSpec) -> list[str]:
    """The frameworks a search asks for: the named one, or any of them."""
    return [search.framework] if search.framework else list(FRAMEWORKS)


def runs_on(plans: PlanArrays, model: ModelSpec, training: TrainingSpec,
            names: Sequence[str]) -> np.ndarray:
    """Plans at least one of the named frameworks runs as predicted."""
    if not len(plans):
        return np.zeros(0, dtype=bool)
    m, even = _schedule_facts(plans, model, training)
    moe, mtp, autotp, gqa = model_rule_args(model)
    ctx = rules_context(plans, m, even, training, moe=moe, mtp=mtp, autotp=autotp, gqa=gqa)
    ok = np.zeros(len(plans), dtype=bool)
    for name in names:          # each framework over the plans none before it runs
        if ok.all():
            break
        ok |= rules_mask(name, ctx, only=~ok)
    return ok
