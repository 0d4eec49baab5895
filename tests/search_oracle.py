"""Exhaustive enumeration for the search tests: every integer combination of the plan
variables, validated with the estimate path's own checks, costed with the cost model; with
``search.rebalance_stages``, every first/last split of each pipelined plan without
interleaving or block recompute, and every split that leaves its last stage the LM head and the
loss alone (``layout.search_splits``), each costed on its own through the single-plan layout
path;
block recompute and CPU offloading of every layer count, the fewest that fits offered."""

from __future__ import annotations

from itertools import product

import pytest
from pydantic import ValidationError

from planner.cost.batch import PlanArrays, compose
from planner.cost.memory import GIB
from planner.cost.tables import RECOMPUTE, CostTables
from planner.frameworks import model_rule_args, reasons_by_framework
from planner.search.plan_request import PlanRequest
from planner.search.plan_result import PlanResult
from planner.search.spec import allows
from planner.specs import ParallelPlan
from planner.specs.layout import search_splits
from planner.specs.plan import plan_key, plan_layout, plan_violations


def enumerate_top_k(req: PlanRequest) -> list[tuple]:
    """[(plan tuple, step_time_s, memory_bytes)] of the k best fitting plans."""
    m, c, tr, s = req.model, req.cluster, req.training, req.search
    N, L, gbs = c.num_gpus, m.num_layers, tr.global_batch_size
    lo = -(-N // 2) if s.allow_idle_gpus else N
    plans = []
    experts = range(1, N + 1) if m.is_moe else [1]
    for dp, tp, pp, cp in product(range(1, N + 1), repeat=4):
        if not lo <= dp * tp * pp * cp <= N:
            continue
        for mbs, vpp, rec, zero, sp, ep, etp in product(
                range(1, gbs + 1), range(1, L + 1), range(3), range(4), (False, True), experts,
                experts):
            if gbs % (dp * mbs):
                continue
            if m.is_moe and etp not in (1, tp):
                continue   # the space's documented expert layouts: etp 1 or tp
            shards = dp * cp > 1 or (m.is_moe and tp * cp * dp > ep * etp)
            if not shards and zero != min(z for z in range(4) if allows(s.zero_stage, z)):
                continue   # nothing to shard: one ZeRO stage stands for all
            if not (allows(s.dp, dp) and allows(s.tp, tp) and allows(s.pp, pp)
                    and allows(s.cp, cp) and allows(s.vpp, vpp) and allows(s.ep, ep)
                    and allows(s.etp, etp)
                    and allows(s.micro_batch_size, mbs) and allows(s.zero_stage, zero)
                    and allows(s.grad_accum_steps, gbs // (dp * mbs))
                    and s.allows_recompute(RECOMPUTE[rec]) and s.allows_sp(sp)):
                continue
            for r in range(1, dp + 1):
                # Hybrid sharding's replica counts: by default those whose replicas span 1,
                # 2, 4 or 8 whole nodes, with ZeRO-3; a restriction admits any count and
                # stage (space.py's documented rule).
                ranks = tp * cp * dp // r
                if dp % r or not allows(s.dp_replicate, r) or (
                        r > 1 and s.dp_replicate is None
                        and (ranks % c.gpus_per_node or ranks // c.gpus_per_node
                             not in (1, 2, 4, 8) or zero != 3)):
                    continue
                try:
                    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp,
                                        micro_batch_size=mbs, recompute=RECOMPUTE[rec],
                                        zero_stage=zero, sequence_parallel=sp, ep=ep, etp=etp,
                                        dp_replicate=r)
                except ValidationError:
                    continue
                if plan_violations(plan, m, c, tr, allow_cross_node_tp=s.allow_cross_node_tp):
                    continue
                # The space interleaves only chunks of equal work (space.py's documented rule).
                if vpp > 1 and plan_layout(plan, m).kind not in ("even", "embedding_loss"):
                    continue
                # A framework must run it as predicted (the named one, or any).
                even = plan_layout(plan, m).kind == "even"
                reasons = reasons_by_framework(plan, gbs // (dp * mbs), even, tr, None,
                                               *model_rule_args(m))
                if s.any_framework:
                    reasons = {"any": []}
                elif s.framework is not None:
                    reasons = {s.framework: reasons[s.framework]}
                if all(reasons.values()):
                    continue
                plans.append(plan)
                # Block recompute of the first n layers of each chunk, n below the largest chunk
                # (Megatron-LM only).
                if (rec == 2 and s.partial_recompute and s.allows_recompute("none")
                        and s.megatron_allowed and not reasons.get("megatron")):
                    most = max(max(ch) for ch in plan_layout(plan, m).chunks)
                    plans += [plan.model_copy(update={"recompute_num_layers": n})
                              for n in range(1, most)]
                # CPU offloading of the first n layers, n below the layers (Megatron-LM only).
                if (rec == 0 and pp == 1 and s.cpu_offload and c.host_link_gb_per_s is not None
                        and s.megatron_allowed and not reasons.get("megatron")):
                    plans += [plan.model_copy(update={"cpu_offload_layers": n})
                              for n in range(1, L)]
    if not plans:
        return []
    arrays = PlanArrays.from_plans(plans)
    bc = compose(arrays, CostTables(m, c, tr, req.efficiency))
    cap = c.gpu.memory_bytes * (1 - s.memory_headroom)
    # Block recompute is offered for plans that do not fit without recompute, with the fewest
    # recomputed layers that fit (more only costs time).
    fits = {i: bc.memory_bytes[i] <= cap for i in range(len(plans))}
    def tuple_of(p):
        return (p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch_size, p.zero_stage,
                p.sequence_parallel, p.ep, p.etp, p.dp_replicate)
    none_fits = {tuple_of(p): fits[i] for i, p in enumerate(plans)
                 if p.recompute == "none" and not p.cpu_offload_layers}
    fewest: dict = {}
    for i, p in enumerate(plans):
        n = p.recompute_num_layers or p.cpu_offload_layers
        if n and fits[i] and not none_fits.get(tuple_of(p), False):
            t = (tuple_of(p), bool(p.cpu_offload_layers))
            if t not in fewest or n < (plans[fewest[t]].recompute_num_layers
                                       or plans[fewest[t]].cpu_offload_layers):
                fewest[t] = i
    offered = set(fewest.values())
    tables = CostTables(m, c, tr, req.efficiency)
    rows = []
    for i, p in enumerate(plans):
        if (p.recompute_num_layers or p.cpu_offload_layers) and i not in offered:
            continue
        key = plan_key(p)
        # (time us, memory, layers) of the default layout, then of every other split.
        options = [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]), ())]
        if (s.rebalance_stages and p.pp > 1 and not p.recompute_num_layers
                and (p.vpp == 1 or s.rebalance_interleaved)):
            for split in search_splits(L, p.pp, p.vpp):
                one = compose(PlanArrays.from_plans([p]), tables, split)
                options.append((float(one.step_time_s[0]), float(one.memory_bytes[0]), split))
        fitting = [(round(t * 1e6), round(mem), lay, t, mem) for t, mem, lay in options
                   if mem <= cap]
        if fitting:
            us, mem_r, lay, t, mem = min(fitting)
            rows.append((us, mem_r, key, t, mem, lay))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return [(r[2], r[3], r[4]) for r in rows[: s.top_k]]





def assert_equals_oracle(got: PlanResult, want: list) -> None:
    """The search's answer equals the brute-force top k ``want`` (from ``enumerate_top_k``):
    the same plans in the same order, with the same step time and memory."""
    if not want:
        assert got.search.status == "INFEASIBLE" and not got.plans
        assert got.infeasible_reasons
        return
    assert got.search.status == "OPTIMAL"
    assert [plan_key(p) for p in got.plans] == [w[0] for w in want]
    for p, (_, step, mem) in zip(got.plans, want, strict=True):
        assert p.step_time_s == pytest.approx(step, rel=1e-9)
        assert p.memory_per_gpu_gib * GIB == pytest.approx(mem, rel=1e-9)


__all__ = ["assert_equals_oracle", "enumerate_top_k"]
