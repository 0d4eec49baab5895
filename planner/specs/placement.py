"""Where each rank runs and where each parallel group's members sit, exactly.

Launch layout: torchrun starts the same number of processes on every node, so a plan of W ranks
on nodes of G GPUs runs on the fewest nodes n >= ceil(W / G) with W divisible by n, W / n
processes per node; global rank r runs on node r // (W / n) (torchrun numbers ranks node by
node: ``RANK = GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``).

Rank order: every framework the planner emits numbers the parallel dimensions with tensor
parallelism innermost, then context, then data, then pipeline outermost: Megatron-Core's
``RankGenerator`` order "tp-cp-ep-dp-pp" (Narayanan et al. SC'21 section 3.3: keep the chattiest
groups on the fastest links), torchtitan's device mesh ("pp", "dp_replicate", "dp_shard", "cp",
"tp", last dimension fastest), DeepSpeed's ``PipeModelDataParallelTopology`` (axes pipe, data,
model; model fastest). So rank = ((stage * dp + d) * cp + c) * tp + t, and a group of one kind
is the ``size`` ranks ``base + stride * i``: TP (size tp, stride 1), CP (cp, tp), the gradient
reduction over data and context parallel ranks (dp * cp, tp), PP (pp, tp * cp * dp).

A group's cost is set by its worst member group: the most nodes spanned and, among those, the
fewest members on one node (the node whose rails carry the ring's crossing traffic). The span is
computed from the ranks themselves, so any GPU count per node is handled (a tp=4 group on
6-GPU nodes spans two nodes for every other group); ``tests`` check it against a brute-force
placement of every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class LaunchLayout:
    """How many nodes a plan's ranks occupy and how many processes run on each."""

    world: int
    nnodes: int
    nproc_per_node: int

    def node_of(self, rank: int) -> int:
        return rank // self.nproc_per_node


@lru_cache(maxsize=4096)
def launch_layout(world: int, gpus_per_node: int) -> LaunchLayout:
    """The fewest nodes with the same process count on each (torchrun's requirement)."""
    if world < 1 or gpus_per_node < 1:
        raise ValueError(f"need world >= 1 and gpus_per_node >= 1, got {world}, {gpus_per_node}")
    n = -(-world // gpus_per_node)
    while world % n:
        n += 1
    return LaunchLayout(world, n, world // n)


@dataclass(frozen=True)
class GroupSpan:
    """Where the worst group of one kind sits: nodes spanned, fewest and most members on one
    node, and whether some pair of ring neighbours (i, i + 1) lies on different nodes."""

    size: int
    nodes: int
    min_per_node: int
    max_per_node: int
    neighbours_cross: bool


@lru_cache(maxsize=65536)
def group_span(size: int, stride: int, nproc_per_node: int) -> GroupSpan:
    """The worst of the groups ``{base + stride * i : i < size}`` (every base with base mod
    (stride * size) < stride) of ranks placed ``nproc_per_node`` to a node. The world size is
    a multiple of both stride * size and nproc_per_node, so the groups' shapes repeat with
    period lcm(stride * size, nproc_per_node) and those bases suffice."""
    if size == 1:
        return GroupSpan(1, 1, 1, 1, False)
    block = stride * size
    npn = nproc_per_node
    if npn % block == 0:                              # whole groups inside a node
        return GroupSpan(size, 1, size, size, False)
    if stride % npn == 0:                             # one member per node
        return GroupSpan(size, size, 1, 1, True)
    period = math.lcm(block, npn)
    bases = np.arange(period)
    bases = bases[bases % block < stride]
    nodes = (bases[:, None] + stride * np.arange(size)[None, :]) // npn     # (groups, size)
    cross = bool((nodes[:, 1:] != nodes[:, :-1]).any())
    worst = (0, 0, 0)
    for row in np.unique(nodes - nodes[:, :1], axis=0):     # distinct shapes, a few
        counts = np.unique(row, return_counts=True)[1]
        key = (len(counts), -int(counts.min()), int(counts.max()))
        worst = max(worst, key)
    return GroupSpan(size, worst[0], -worst[1], worst[2], cross)


def plan_spans(tp: int, cp: int, dp: int, pp: int, gpus_per_node: int) -> dict[str, GroupSpan]:
    """The span of each kind of group of a plan: TP, CP, DP (data parallel ranks only), DPCP
    (the gradient reduction over dp * cp ranks), PP."""
    n = launch_layout(tp * cp * dp * pp, gpus_per_node).nproc_per_node
    return {
        "TP": group_span(tp, 1, n),
        "CP": group_span(cp, tp, n),
        "DP": group_span(dp, tp * cp, n),
        "DPCP": group_span(dp * cp, tp, n),
        "PP": group_span(pp, tp * cp * dp, n),
    }


def brute_force_spans(tp: int, cp: int, dp: int, pp: int, gpus_per_node: int
                      ) -> dict[str, GroupSpan]:
    """The same spans, from every rank's coordinates (the reference for tests)."""
    layout = launch_layout(tp * cp * dp * pp, gpus_per_node)

    def rank(s: int, d: int, c: int, t: int) -> int:
        return ((s * dp + d) * cp + c) * tp + t

    S, D, C, T = range(pp), range(dp), range(cp), range(tp)
    groups = {
        "TP": [[rank(s, d, c, t) for t in T] for s in S for d in D for c in C],
        "CP": [[rank(s, d, c, t) for c in C] for s in S for d in D for t in T],
        "DP": [[rank(s, d, c, t) for d in D] for s in S for c in C for t in T],
        "DPCP": [[rank(s, d, c, t) for d in D for c in C] for s in S for t in T],
        "PP": [[rank(s, d, c, t) for s in S] for d in D for c in C for t in T],
    }
    out = {}
    for kind, gs in groups.items():
        worst: tuple[tuple[int, int, int], GroupSpan] | None = None
        for g in gs:
            nodes = [layout.node_of(r) for r in g]
            counts = [nodes.count(x) for x in sorted(set(nodes))]
            cross = any(a != b for a, b in zip(nodes, nodes[1:], strict=False))
            span = GroupSpan(len(g), len(counts), min(counts), max(counts), cross)
            key = (span.nodes, -span.min_per_node, span.max_per_node)
            if worst is None or key > worst[0]:
                worst = (key, span)
            elif key == worst[0] and cross:
                worst = (key, span)
        cross_any = any(layout.node_of(a) != layout.node_of(b)
                        for g in gs for a, b in zip(g, g[1:], strict=False))
        assert worst is not None            # every kind has at least one group
        s = worst[1]
        out[kind] = GroupSpan(s.size, s.nodes, s.min_per_node, s.max_per_node, cross_any)
    return out

