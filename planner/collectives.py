"""Alpha-beta cost of collective operations, per algorithm and per topology tier.

Conventions (those of nccl-tests, so predictions and measured logs compare directly):
``message_bytes`` is the *full* buffer: the all_reduce/broadcast/reduce buffer, the all_gather
output, the reduce_scatter input, the scatter/gather root buffer, the bytes one rank sends in
all_to_all, and the message of send_recv. ``p`` is the group size.

Formulas (alpha = latency of one step, beta = seconds per byte = 1 / bandwidth):
Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005, and NCCL's ring/tree models (nccl-tests doc/PERFORMANCE.md,
NCCL src/graph/tuning.cc). Reduction arithmetic (gamma) is taken as zero: on GPUs it runs
inside the copy kernels at memory speed, far faster than the links.

=====================  =====================  ==================================================
collective             algorithm              time
=====================  =====================  ==================================================
send_recv              direct                 a + n b
broadcast, reduce      tree (binomial)        ceil(lg p) (a + n b)
                       ring (pipelined chain) (p - 2 + k)(a + n b / k), best chunk count k
                       halving_doubling       2 lg p a + 2 (p-1)/p n b  (van de Geijn; Rabenseifner)
all_reduce             ring                   2 (p-1) a + 2 (p-1)/p n b
                       tree (double binary)   2 lg p a + 2 n b  (NCCL Tree; each tree carries n/2)
                       recursive_doubling     lg p (a + n b)
                       halving_doubling       2 lg p a + 2 (p-1)/p n b  (Rabenseifner)
                       hierarchical           RS inside nodes, all_reduce of n/g across nodes on
                                              every rail, AG inside nodes
reduce_scatter         ring (= pairwise)      (p-1) a + (p-1)/p n b
                       halving_doubling       lg p a + (p-1)/p n b  (recursive halving)
                       hierarchical           RS inside nodes, then RS of n/g across nodes
all_gather             ring                   (p-1) a + (p-1)/p n b
                       recursive_doubling     lg p a + (p-1)/p n b  (Bruck for any p)
                       hierarchical           AG of n/g across nodes, then AG inside nodes
scatter, gather        tree (binomial)        lg p a + (p-1)/p n b
                       direct (linear)        (p-1) a + (p-1)/p n b
all_to_all             direct (pairwise)      (p-1) a + (p-1)/p n b
                       recursive_doubling     lg p a + (n/2) lg p b  (Bruck)
=====================  =====================  ==================================================

``lg p`` is ceil(log2 p); recursive doubling and halving on a p that is not a power of two pay
two extra steps (a + n b) to fold the extra ranks in and out (MPICH's allreduce).

Topology: a group of p ranks with g of them per node spans N = p / g nodes. Inside one node
every step runs at the intra-node alpha and bandwidth. A flat algorithm across nodes runs at the
pace of its slowest hop: the network alpha, and bandwidth min(intra, g * per-rank network share)
because the g members of a node leave it through g NICs (rails) at once. The per-rank network
share is the node's bandwidth divided by its GPUs, since in a synchronous step every GPU of the
node communicates at the same time. The hierarchical algorithms use the intra-node link for the
intra-node phases and the rails, in parallel, for the inter-node phase.

Direct exchanges (all_to_all, scatter, gather) across nodes do not ride a ring: every rank
sends (p - g)/p of its buffer to the other nodes through its own rail, while (g - 1)/p goes
to its node's peers over NVLink at the same time, so their bandwidth term is
max((g - 1)/p n / B_intra, (p - g)/p n / B_rail). A 64-rank all_to_all over 8 DGX H100
nodes then moves about 45 GB/s of bus bandwidth per GPU, the rail's speed, not the
intra-node ring's (the ring formula would give NVLink-class speeds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from planner.vocabulary import COLLECTIVES, Tier

Algorithm = Literal["ring", "tree", "recursive_doubling", "halving_doubling", "direct",
                    "hierarchical"]
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "send_recv": ("direct",),
    "broadcast": ("tree", "ring", "halving_doubling"),
    "reduce": ("tree", "ring", "halving_doubling"),
    "all_reduce": ("ring", "tree", "recursive_doubling", "halving_doubling", "hierarchical"),
    "reduce_scatter": ("ring", "halving_doubling", "hierarchical"),
    "all_gather": ("ring", "recursive_doubling", "hierarchical"),
    "scatter": ("tree", "direct"),
    "gather": ("tree", "direct"),
    "all_to_all": ("direct", "recursive_doubling"),
}


@dataclass(frozen=True)
class AlphaBeta:
    """One link: latency per algorithm step (s) and achieved bandwidth (bytes/s)."""

    alpha_s: float
    bandwidth: float

    def __post_init__(self) -> None:
        if self.alpha_s < 0 or self.bandwidth <= 0:
            raise ValueError(f"need alpha >= 0 and bandwidth > 0, got {self}")

    @property
    def beta(self) -> float:
        return 1.0 / self.bandwidth


@dataclass(frozen=True)
class GroupTopology:
    """Where a communicator's ranks sit: ``size`` ranks, ``ranks_per_node`` of them per node.

    ``intra`` is the link between members inside a node; ``inter`` is one rank's share of the
    network (the node's bandwidth over its GPUs) and the network's per-step latency.
    """

    size: int
    ranks_per_node: int
    intra: AlphaBeta
    inter: AlphaBeta
    num_nodes: int = 0     # nodes spanned; 0: ceil(size / ranks_per_node)
    # NVLink SHARP's all_reduce bus bandwidth over ``intra``'s (0: the switches cannot reduce;
    # ``ClusterSpec`` intra_node.nvls_busbw_ratio)
    nvls_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.size < 1 or not 1 <= self.ranks_per_node <= self.size:
            raise ValueError(f"need 1 <= ranks_per_node <= size, got {self}")

    @property
    def nodes(self) -> int:
        return self.num_nodes or math.ceil(self.size / self.ranks_per_node)

    @property
    def tier(self) -> Tier:
        return "intra_node" if self.nodes == 1 else "inter_node"

    @property
    def flat_link(self) -> AlphaBeta:
        """The link a flat (single-level) algorithm sees: its slowest hop."""
        if self.nodes == 1:
            return self.intra
        bandwidth = min(self.intra.bandwidth, self.ranks_per_node * self.inter.bandwidth)
        if self.ranks_per_node == 1:
            bandwidth = self.inter.bandwidth
        return AlphaBeta(max(self.intra.alpha_s, self.inter.alpha_s), bandwidth)


@dataclass(frozen=True)
class CollectiveCost:
    op: str
    algorithm: str
    message_bytes: float
    group_size: int
    tier: Tier
    time_s: float
    source: str = "preset"   # "preset" (the cluster spec's links) or a calibration id

    @property
    def algbw_gb_per_s(self) -> float:
        return alg_bandwidth(self.message_bytes, self.time_s) / 1e9

    @property
    def busbw_gb_per_s(self) -> float:
        return bus_bandwidth(self.op, self.message_bytes, self.group_size, self.time_s) / 1e9


# --- nccl-tests units ----------------------------------------------------------------------

def bus_factor(op: str, p: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor."""
    _check_op(op)
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("reduce_scatter", "all_gather", "all_to_all", "scatter", "gather"):
        return (p - 1) / p
    return 1.0  # broadcast, reduce, send_recv


def alg_bandwidth(message_bytes: float, time_s: float) -> float:
    """nccl-tests algbw, bytes/s: the full buffer size over the time."""
    return message_bytes / time_s


def bus_bandwidth(op: str, message_bytes: float, p: int, time_s: float) -> float:
    """nccl-tests busbw, bytes/s: algbw times the collective's bus factor."""
    return alg_bandwidth(message_bytes, time_s) * bus_factor(op, p)


# --- flat algorithms on one link -----------------------------------------------------------

def _lg(p: int) -> int:
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def _fold(p: int, a: float, nb: float) -> float:
    """Extra cost of recursive doubling/halving when p is not a power of two (MPICH)."""
    return 0.0 if p & (p - 1) == 0 else 2 * (a + nb)


def _pipelined_chain(p: int, a: float, nb: float) -> float:
    """Pipelined chain (ring) broadcast/reduce in k chunks: (p - 2 + k)(a + nb/k), best k."""
    if p == 2:
        return a + nb
    k_star = math.sqrt((p - 2) * nb / a) if a > 0 else 1e9
    best = math.inf
    for k in {1, max(1, math.floor(k_star)), max(1, math.ceil(k_star))}:
        best = min(best, (p - 2 + k) * (a + nb / k))
    return best


def flat_time(op: str, algorithm: str, n: float, p: int, link: AlphaBeta) -> float:
    """Time of ``op`` over ``p`` ranks on one link (formulas in the module docstring)."""
    if p == 1:
        return 0.0
    a, b = link.alpha_s, link.beta
    nb = n * b
    lg = _lg(p)
    frac = (p - 1) / p
    key = (op, algorithm)
    if key == ("send_recv", "direct"):
        return a + nb
    if op in ("broadcast", "reduce"):
        if algorithm == "tree":
            return lg * (a + nb)
        if algorithm == "ring":
            return _pipelined_chain(p, a, nb)
        if algorithm == "halving_doubling":
            return 2 * lg * a + 2 * frac * nb + _fold(p, a, nb)
    if op == "all_reduce":
        if algorithm == "ring":
            return 2 * (p - 1) * a + 2 * frac * nb
        if algorithm == "tree":
            return 2 * lg * a + 2 * nb
        if algorithm == "recursive_doubling":
            return lg * (a + nb) + _fold(p, a, nb)
        if algorithm == "halving_doubling":
            return 2 * lg * a + 2 * frac * nb + _fold(p, a, nb)
    if op in ("reduce_scatter", "all_gather"):
        if algorithm == "ring":
            return (p - 1) * a + frac * nb
        if (op, algorithm) in (("reduce_scatter", "halving_doubling"),
                               ("all_gather", "recursive_doubling")):
            return lg * a + frac * nb
    if op in ("scatter", "gather"):
        if algorithm == "tree":
            return lg * a + frac * nb
        if algorithm == "direct":
            return (p - 1) * a + frac * nb
    if op == "all_to_all":
        if algorithm == "direct":
            return (p - 1) * a + frac * nb
        if algorithm == "recursive_doubling":
            return lg * a + (n / 2) * lg * b
    raise ValueError(f"algorithm {algorithm!r} is not available for {op}; "
                     f"choose one of {', '.join(ALGORITHMS[op])}")


# --- topology-aware entry point ------------------------------------------------------------

def _check_op(op: str) -> None:
    if op not in ALGORITHMS:
        raise ValueError(f"unknown collective {op!r}; choose one of {', '.join(COLLECTIVES)}")


def _best_flat(op: str, n: float, p: int, link: AlphaBeta) -> float:
    return min(flat_time(op, alg, n, p, link) for alg in ALGORITHMS[op] if alg != "hierarchical")


def spread_transfer(n: float, group: GroupTopology, share: float = 1.0) -> float:
    """Bandwidth term of a direct exchange across nodes: the intra-node and network parts of
    each rank's buffer move at once, on NVLink and on its rail (module docstring)."""
    p, g = group.size, group.ranks_per_node
    return max((g - 1) / p * n / (group.intra.bandwidth * share),
               (p - g) / p * n / (group.inter.bandwidth * share))


DIRECT_OPS = ("all_to_all", "scatter", "gather")


def _algorithm_time(op: str, algorithm: str, n: float, group: GroupTopology) -> float:
    p = group.size
    if algorithm == "direct" and op in DIRECT_OPS and group.nodes > 1:
        return (p - 1) * group.flat_link.alpha_s + spread_transfer(n, group)
    if algorithm == "hierarchical":
        g, nodes = group.ranks_per_node, group.nodes
        if nodes == 1 or g == 1:
            raise ValueError("hierarchical needs a group with several ranks on each of "
                             "several nodes")
        if op == "all_reduce":
            return (flat_time("reduce_scatter", "ring", n, g, group.intra)
                    + _best_flat("all_reduce", n / g, nodes, group.inter)
                    + flat_time("all_gather", "ring", n, g, group.intra))
        if op == "reduce_scatter":
            return (flat_time("reduce_scatter", "ring", n, g, group.intra)
                    + _best_flat("reduce_scatter", n / g, nodes, group.inter))
        if op == "all_gather":
            return (_best_flat("all_gather", n / g, nodes, group.inter)
                    + flat_time("all_gather", "ring", n, g, group.intra))
        raise ValueError(f"algorithm 'hierarchical' is not available for {op}")
    if algorithm == "tree" and op == "all_reduce" and group.nodes > 1:
        # NCCL's multi-node tree: a chain inside each node, a double binary tree across nodes
        # (latency 2((g-1) a_intra + lg N a_inter); NCCL src/graph/tuning.cc).
        g = group.ranks_per_node
        latency = 2 * ((g - 1) * group.intra.alpha_s + _lg(group.nodes) * group.inter.alpha_s)
        return latency + 2 * n * group.flat_link.beta
    return flat_time(op, algorithm, n, p, group.flat_link)


# The algorithms each torch.distributed backend implements (NCCL: ring and tree, direct
# point-to-point for send/recv and all_to_all; gloo: ring all_reduce/all_gather/reduce,
# binomial-tree broadcast, direct gather/scatter/all_to_all; research/collectives.md section 4).
BACKEND_ALGORITHMS: dict[str, frozenset[str]] = {
    "nccl": frozenset({"ring", "tree", "direct"}),
    "gloo": frozenset({"ring", "tree", "direct"}),
    "mpi": frozenset({"ring", "tree", "recursive_doubling", "halving_doubling", "direct",
                      "hierarchical"}),
}


def collective_time(
    op: str,
    message_bytes: float,
    group: GroupTopology,
    algorithm: str = "auto",
    *,
    allowed: frozenset[str] | None = None,
) -> CollectiveCost:
    """Predicted time of one collective; ``algorithm="auto"`` takes the cheapest applicable
    algorithm (among ``allowed``, e.g. ``BACKEND_ALGORITHMS["nccl"]``), as NCCL's tuner picks
    the fastest (algorithm, protocol) pair."""
    _check_op(op)
    if message_bytes < 0:
        raise ValueError(f"message_bytes must be >= 0, got {message_bytes}")
    if op == "send_recv" and group.size != 2:
        raise ValueError(f"send_recv is between 2 ranks, got a group of {group.size}")
    if group.size == 1:
        return CollectiveCost(op, "none", message_bytes, 1, "intra_node", 0.0)
    if algorithm == "auto":
        candidates = [alg for alg in ALGORITHMS[op]
                      if (alg != "hierarchical" or (group.nodes > 1 and group.ranks_per_node > 1))
                      and (allowed is None or alg in allowed)]
        if not candidates:
            raise ValueError(f"no allowed algorithm for {op} among {sorted(allowed or [])}")
    elif algorithm not in ALGORITHMS[op]:
        raise ValueError(f"algorithm {algorithm!r} is not available for {op}; "
                         f"choose one of {', '.join(ALGORITHMS[op])} or 'auto'")
    else:
        candidates = [algorithm]
    best_alg, best_t = candidates[0], math.inf
    for alg in candidates:
        t = _algorithm_time(op, alg, message_bytes, group)
        if t < best_t:
            best_alg, best_t = alg, t
    return CollectiveCost(op, best_alg, message_bytes, group.size, group.tier, best_t)


# --- NCCL: algorithm x protocol, as its tuner costs them ---------------------------------------
#
# NCCL picks, per call, the (algorithm, protocol) its tuner predicts fastest
# (src/graph/tuning.cc, NCCL 2.30): time = base latency + steps x per-step latency + bytes over
# the bus bandwidth, per protocol. LL moves 8 bytes of data per 16-byte line (flag + data: half
# the bandwidth, lowest latency), LL128 120 of every 128 bytes, Simple all of them with the
# highest latency. Ring steps inside a node pay the NVLink latency, those between nodes the
# network's; the tree's latency is 2 ((g - 1) intra + lg N inter) (reduce up, broadcast down).
# The per-step latencies scale with the links' ``latency_us`` as tuning.cc's Simple ring step
# (3.4 us NVLink, 14 us network) does to the other protocols' and algorithms'; the base latency
# per call does not. (The presets' steps, 1.0 us NVLink and 5.0 us network, sit inside the
# ranges tuning.cc gives per protocol, below its Simple values; calibration replaces them.)

PROTOCOLS = ("LL", "LL128", "Simple")
# NVLS (NVLink SHARP) all_reduce inside one node, Simple protocol only (tuning.cc): no base
# latency, one NVLink hop of 25 us where the Simple ring step is 3.4 us (hwLat), so it scales
# with the link's latency like the other per-step latencies. Its algorithm bandwidth grows
# slowly with the group and saturates: measured on 8 H100 SXM with NCCL_ALGO=NVLS (NVIDIA/nccl
# issue 1455), busbw 365-370 GB/s at 2 to 4 GPUs (the ring's) and 420 / 440 / 460 / 480 at 5 to
# 8, algbw 258 / 265 / 270 / 273; algbw(p) = algbw(8) (1 - c / p) / (1 - c / 8) with c = 0.65
# gives all four within 1% (and 249 at 4 GPUs, the 247 that 370 GB/s busbw means). Past 8
# GPUs (an NVL72 rack's groups) it is extrapolated: 1.079 times the 8-GPU figure at 72.
# ``GroupTopology.nvls_ratio`` is the bus bandwidth at 8 GPUs over the ring's
# (``ClusterSpec`` intra_node.nvls_busbw_ratio): algbw(8) = ratio x B x 8 / 14.
NVLS_STEP_RATIO = 25.0 / 3.4
NVLS_GROUP_SHAPE = 0.65


def nvls_algbw(p: int, link_bandwidth: float, ratio: float) -> float:
    """NVLS all_reduce's algorithm bandwidth (bytes/s) over ``p`` GPUs of one node whose link's
    ring bus bandwidth is ``link_bandwidth`` and NVLS's bus bandwidth at 8 GPUs ``ratio``
    times that (module comment above)."""
    c = NVLS_GROUP_SHAPE
    return ratio * link_bandwidth * 8 / 14 * (1 - c / p) / (1 - c / 8)
NCCL_BASE_LATENCY_S = {"ring": (6.6e-6, 14.0e-6, 8.4e-6), "tree": (6.8e-6, 14.0e-6, 8.4e-6),
                       "direct": (6.6e-6, 14.0e-6, 8.4e-6)}
# Per-step latency of each protocol relative to Simple's, per algorithm and tier (tuning.cc
# hwLat: NVLink ring 0.6 / 1.9 / 3.4 us, tree 0.6 / 1.25 / 4.0; network ring 2.7 / 4.0 / 14,
# tree 5.0 / 8.5 / 14).
NCCL_STEP_RATIO = {
    ("ring", "intra"): (0.6 / 3.4, 1.9 / 3.4, 1.0), ("ring", "inter"): (2.7 / 14, 4.0 / 14, 1.0),
    ("tree", "intra"): (0.6 / 4.0, 1.25 / 4.0, 1.0), ("tree", "inter"): (5.0 / 14, 8.5 / 14, 1.0),
}
NCCL_BANDWIDTH_SHARE = (0.5, 120 / 128, 1.0)


def _nccl_shape(op: str, algorithm: str, p: int, nodes: int, g: int
                ) -> tuple[float, float, float] | None:
    """(intra-node steps, inter-node steps, bytes factor) of one algorithm, or None."""
    inter_ar = 2 * nodes if nodes > 1 else 0
    if algorithm == "ring":
        if op == "all_reduce":
            return 2 * (p - 1) - inter_ar, inter_ar, 2 * (p - 1) / p
        if op in ("all_gather", "reduce_scatter"):
            return p - nodes, nodes - 1, (p - 1) / p
        if op in ("broadcast", "reduce"):
            return p - nodes, nodes - 1, 1.0
        return None
    if algorithm == "tree":
        if op != "all_reduce":
            return None
        return 2 * (g - 1), 2 * _lg(nodes), 2.0
    if algorithm == "direct":
        if op == "send_recv":
            return (1, 0, 1.0) if nodes == 1 else (0, 1, 1.0)
        if op in ("all_to_all", "scatter", "gather"):
            return p - nodes, nodes - 1 if nodes > 1 else 0, (p - 1) / p
    return None


def nccl_time(op: str, message_bytes: float, group: GroupTopology) -> CollectiveCost:
    """Predicted time of one NCCL collective: the fastest algorithm and protocol."""
    _check_op(op)
    if message_bytes < 0:
        raise ValueError(f"message_bytes must be >= 0, got {message_bytes}")
    p = group.size
    if p == 1:
        return CollectiveCost(op, "none", message_bytes, 1, "intra_node", 0.0)
    nodes, g = group.nodes, group.ranks_per_node
    link = group.flat_link
    best = (math.inf, "")
    for alg in ("ring", "tree", "direct"):
        shape = _nccl_shape(op, alg, p, nodes, g)
        if shape is None:
            continue
        intra_steps, inter_steps, factor = shape
        lat_key = "tree" if alg == "tree" else "ring"
        bw = group.intra.bandwidth if nodes == 1 else link.bandwidth
        spread = alg == "direct" and op in DIRECT_OPS and nodes > 1
        for k, proto in enumerate(PROTOCOLS):
            share = NCCL_BANDWIDTH_SHARE[k]
            transfer = (spread_transfer(message_bytes, group, share) if spread
                        else factor * message_bytes / (bw * share))
            t = (NCCL_BASE_LATENCY_S[alg][k]
                 + intra_steps * group.intra.alpha_s * NCCL_STEP_RATIO[(lat_key, "intra")][k]
                 + inter_steps * group.inter.alpha_s * NCCL_STEP_RATIO[(lat_key, "inter")][k]
                 + transfer)
            if t < best[0]:
                best = (t, f"{alg}/{proto}")
    if op == "all_reduce" and nodes == 1 and group.nvls_ratio > 0:
        t = (group.intra.alpha_s * NVLS_STEP_RATIO
             + message_bytes / nvls_algbw(p, group.intra.bandwidth, group.nvls_ratio))
        if t < best[0]:
            best = (t, "nvls/Simple")
    return CollectiveCost(op, best[1], message_bytes, p, group.tier, best[0])
