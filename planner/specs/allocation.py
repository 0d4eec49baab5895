"""Fragmented allocations: which of a scheduler's free GPUs a plan runs on.

A scheduler offers what is free (``ClusterSpec.free_gpus_per_node`` or ``free_gpus``).
torchrun starts the same number of processes on every node (``--nproc-per-node``), as do
Slurm's ``--gpus-per-node`` and a Kubernetes job of identical pods, and the GPUs of an
NVSwitch node are interchangeable; so a plan uses g GPUs on each of n nodes that have at least
g free, and its cost depends on (g, n) only: it is the cost on a homogeneous cluster of n nodes
of g GPUs. The plans of an allocation are therefore the union, over g, of the plans of the
homogeneous cluster made of the N_g nodes with at least g free GPUs (``uniform_clusters``),
each searched exactly. Of those N_g nodes a plan takes the ones with the fewest free GPUs
first (best fit: the larger fragments stay free for other jobs), and on each its lowest free
GPU indices (``placement``).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerInputError
from planner.specs.cluster import ClusterSpec
from planner.specs.placement import launch_layout


@dataclass(frozen=True)
class UniformSlice:
    """g GPUs on each of the allocation's nodes that have that many free (their indices)."""

    gpus_per_node: int
    nodes: tuple[int, ...]
    cluster: ClusterSpec        # the homogeneous cluster it is costed as


def uniform_clusters(cluster: ClusterSpec) -> list[UniformSlice]:
    """One slice per g, from the largest g down (the allocation must have free nodes)."""
    free = cluster.free_nodes or ()
    counts = [len(n.gpus) for n in free]
    out = []
    for g in range(max(counts, default=0), 0, -1):
        nodes = tuple(j for j, c in enumerate(counts) if c >= g)
        virtual = cluster.model_copy(update={"num_nodes": len(nodes), "gpus_per_node": g,
                                             "free_gpus_per_node": None, "free_gpus": None})
        out.append(UniformSlice(g, nodes, virtual))
    return out


def placement(cluster: ClusterSpec, part: UniformSlice, world: int
              ) -> list[tuple[int, str | None, list[int]]]:
    """(node index in the allocation, its name, the local GPUs used) of each node a plan of
    ``world`` ranks uses on this slice, in node-rank order."""
    free = cluster.free_nodes or ()
    lay = launch_layout(world, part.gpus_per_node)
    chosen = sorted(sorted(part.nodes, key=lambda j: (len(free[j].gpus), j))[:lay.nnodes])
    return [(j, free[j].name, sorted(free[j].gpus)[:lay.nproc_per_node]) for j in chosen]


def slice_for(cluster: ClusterSpec, world: int, tp: int) -> UniformSlice:
    """The slice a given plan (``world`` ranks, TP groups of ``tp``) runs on: the most GPUs
    per node that place its ranks evenly on enough free nodes without splitting a TP group."""
    for part in uniform_clusters(cluster):
        g = part.gpus_per_node
        if world % g == 0 and world // g <= len(part.nodes) and g % tp == 0:
            return part
    counts = [len(n.gpus) for n in cluster.free_nodes or ()]
    raise PlannerInputError(
        "plan", f"{world} ranks do not fit the allocation evenly: with free GPUs per node "
        f"{counts}, no g that is a multiple of tp({tp}) puts g ranks on each of {world} / g "
        "nodes with g free (torchrun starts the same number of processes on every node)")
