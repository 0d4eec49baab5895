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


def rank_groups(tp: int, cp: int, dp: int, pp: int) -> dict[str, list[list[int]]]:
    """The process groups of tp * cp * dp * pp ranks in Megatron-LM's order: tp innermost,
    then cp, then dp, then pp (rank = ((stage * dp + d) * cp + c) * tp + t).

    "tp", "cp" (the ring of context parallelism), "dp" (the gradient reduction runs over data
    and context parallel ranks together, Megatron's dp-cp group) and "pp" (one pipeline: the
    ranks holding the same (d, c, t) in every stage, first stage first)."""
    def rank(s: int, d: int, c: int, t: int) -> int:
        return ((s * dp + d) * cp + c) * tp + t

    S, D, C, T = range(pp), range(dp), range(cp), range(tp)
    return {
        "tp": [[rank(s, d, c, t) for t in T] for s in S for d in D for c in C],
        "cp": [[rank(s, d, c, t) for c in C] for s in S for d in D for t in T],
        "dp": [[rank(s, d, c, t) for d in D for c in C] for s in S for t in T],
        "pp": [[rank(s, d, c, t) for s in S] for d in D for c in C for t in T],
    }
def pipeline_order(pp: int, stage: int, m: int, vpp: int = 1) -> list[tuple[str, int, int]]:
    """The ops of ``stage`` as ("F" or "B", model chunk, micro-batch). With one chunk, 1F1B
    (``one_f_one_b_order``); with ``vpp`` chunks, Megatron-LM's interleaved schedule
    (Narayanan et al. SC'21 section 2.2.2; ``forward_backward_pipelining_with_interleaving``):
    (p - s - 1) * 2 + (v - 1) * p warm-up forwards, then one forward and one backward in turn,
    then the remaining backwards; the k-th forward runs chunk (k mod p*v) // p, the k-th
    backward the chunks in reverse, micro-batches in groups of p."""
    if vpp == 1:
        return [(kind, 0, mb) for kind, mb in one_f_one_b_order(pp, stage, m)]
    total = m * vpp
    warm = min((pp - stage - 1) * 2 + (vpp - 1) * pp, total)

    def op(kind: str, k: int) -> tuple[str, int, int]:
        chunk = (k % (pp * vpp)) // pp
        mb = (k // (pp * vpp)) * pp + k % pp
        return (kind, chunk if kind == "F" else vpp - 1 - chunk, mb)

    order = [op("F", k) for k in range(warm)]
    for i in range(total - warm):
        order += [op("F", warm + i), op("B", i)]
    order += [op("B", k) for k in range(total - warm, total)]
    return order
