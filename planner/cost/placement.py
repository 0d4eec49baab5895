"""Where each parallel group's ranks sit, from Megatron-LM's rank order.

Ranks are numbered tp innermost, then cp, dp, pp (Narayanan et al. SC'21 section 3.3; Megatron
``RankGenerator`` order "tp-cp-ep-dp-pp"), filling node after node. A group of ``size`` ranks
whose members are ``stride`` apart has ``min(size, gpus_per_node // stride)`` members in a node
when stride < gpus_per_node, else one per node.
"""

from __future__ import annotations

from planner.collectives import AlphaBeta, GroupTopology
from planner.specs import ClusterSpec, ParallelPlan


def group_topology(cluster: ClusterSpec, size: int, stride: int) -> GroupTopology:
    G = cluster.gpus_per_node
    per_node = max(1, min(size, G // stride)) if stride < G else 1
    intra = AlphaBeta(cluster.intra_node.alpha_s, cluster.intra_node.effective_bandwidth)
    inter = AlphaBeta(cluster.inter_node.alpha_s,
                      cluster.inter_node.effective_bandwidth / G)
    return GroupTopology(size=size, ranks_per_node=per_node, intra=intra, inter=inter)


def plan_groups(cluster: ClusterSpec, plan: ParallelPlan) -> dict[str, GroupTopology]:
    """The communicators of a plan: TP, CP, DP (gradients reduce over dp x cp), PP."""
    tp, cp, dp = plan.tp, plan.cp, plan.dp
    return {
        "TP": group_topology(cluster, tp, 1),
        "CP": group_topology(cluster, cp, tp),
        "DP": group_topology(cluster, dp * cp, tp),
        "PP": group_topology(cluster, plan.pp, tp * cp * dp),
    }
