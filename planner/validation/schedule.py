"""The pipeline schedule and the rank groups of a plan, shared by the predicted trace and the
probe worker (which imports only this light module)."""

from __future__ import annotations


def one_f_one_b_order(pp: int, stage: int, m: int) -> list[tuple[str, int]]:
    """The ops of ``stage`` in a 1F1B schedule of m micro-batches: p - stage - 1 warm-up
    forwards, then one forward and one backward in turn, then the remaining backwards
    (Narayanan et al. SC'21, figure 4). Ops are ("F" or "B", micro-batch)."""
    warm = min(pp - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    f_next, b_next = warm, 0
    while b_next < m:
        if f_next < m:
            order.append(("F", f_next))
            f_next += 1
        order.append(("B", b_next))
        b_next += 1
    return order


def rank_groups(tp: int, dp: int, pp: int) -> tuple[list[list[int]], list[list[int]]]:
    """(TP groups, DP groups) over tp * dp * pp ranks in Megatron-LM's order: tp innermost,
    then dp, then pp (rank = (stage * dp + d) * tp + t)."""
    tp_groups = [[(s * dp + d) * tp + t for t in range(tp)] for s in range(pp) for d in range(dp)]
    dp_groups = [[(s * dp + d) * tp + t for d in range(dp)] for s in range(pp) for t in range(tp)]
    return tp_groups, dp_groups
