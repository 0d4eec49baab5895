"""The pipeline schedule and the rank groups of a plan, shared by the predicted trace and the
probe worker (which imports only this light module)."""

from __future__ import annotations

from planner.cost.pipeline import schedule


def one_f_one_b_order(pp: int, stage: int, m: int) -> list[tuple[str, int]]:
    """The ops of ``stage`` in a 1F1B schedule of m micro-batches: p - stage - 1 warm-up
    forwards, then one forward and one backward in turn, then the remaining backwards
    (Narayanan et al. SC'21, figure 4). Ops are ("F" or "B", micro-batch)."""
    return [(kind, mb) for kind, _, mb in schedule(pp, stage, m)]


def pipeline_order(pp: int, stage: int, m: int, vpp: int = 1, group: int | None = None
                   ) -> list[tuple[str, int, int]]:
    """The ops of ``stage`` as ("F" or "B", model chunk, micro-batch): the step model's
    schedule (``planner.cost.pipeline.schedule``), 1F1B or Megatron-LM's interleaved one."""
    return schedule(pp, stage, m, vpp, group)


def rank_groups(tp: int, cp: int, dp: int, pp: int, ep: int = 1, etp: int = 1,
                dpr: int = 1, cpa: int = 1) -> dict[str, list[list[int]]]:
    """The process groups of tp * cp * dp * pp ranks in Megatron-LM's order: tp innermost,
    then cp, then dp, then pp (rank = ((stage * dp + d) * cp + c) * tp + t).

    "tp", "cp" (the ring of context parallelism), "dp" (the gradient reduction runs over data
    and context parallel ranks together, Megatron's dp-cp group) and "pp" (one pipeline: the
    ranks holding the same (d, c, t) in every stage, first stage first). The expert groups
    fold into each stage's tp * cp * dp ranks in Megatron-Core's expert order, etp innermost,
    then ep, then the expert data parallel group: "etp", "ep" and "edp".

    Hybrid sharding (``dpr`` replicas, ``plan.dp_replicate``): each replica is dp / dpr
    consecutive data-parallel ranks (its tp * cp * dp / dpr global ranks in a row); "dp" and
    "edp" are one replica's (what ZeRO shards over) and "dpr" the ranks at the same place in
    every replica (what the sharded gradients are all-reduced over).

    Hierarchical context parallelism (``cpa`` > 1, ``ring_attention`` 'a2a+p2p'): "cpa", the
    all-to-all's groups of cpa consecutive CP ranks, and "cpr", the ring's, the ranks cpa
    apart (Megatron-Core's ``create_hierarchical_groups``)."""
    def rank(s: int, d: int, c: int, t: int) -> int:
        return ((s * dp + d) * cp + c) * tp + t

    S, D, C, T = range(pp), range(dp), range(cp), range(tp)
    fold = tp * cp * dp
    edp = fold // (ep * etp)
    dsh, esh, R = dp // dpr, edp // dpr, range(dpr)

    def expert(s: int, e: int, x: int, t: int) -> int:
        return s * fold + (e * ep + x) * etp + t

    return {
        "tp": [[rank(s, d, c, t) for t in T] for s in S for d in D for c in C],
        "cp": [[rank(s, d, c, t) for c in C] for s in S for d in D for t in T],
        "cpa": [[rank(s, d, r * cpa + c, t) for c in range(cpa)] for s in S for d in D
                for r in range(cp // cpa) for t in T],
        "cpr": [[rank(s, d, r * cpa + c, t) for r in range(cp // cpa)] for s in S for d in D
                for c in range(cpa) for t in T],
        "dp": [[rank(s, r * dsh + d, c, t) for d in range(dsh) for c in C] for s in S
               for r in R for t in T],
        "dpr": [[rank(s, r * dsh + d, c, t) for r in R] for s in S for d in range(dsh)
                for c in C for t in T],
        "pp": [[rank(s, d, c, t) for s in S] for d in D for c in C for t in T],
        "etp": [[expert(s, e, x, t) for t in range(etp)] for s in S for e in range(edp)
                for x in range(ep)],
        "ep": [[expert(s, e, x, t) for x in range(ep)] for s in S for e in range(edp)
               for t in range(etp)],
        "edp": [[expert(s, r * esh + e, x, t) for e in range(esh)] for s in S for r in R
                for x in range(ep) for t in range(etp)],
    }
