"""What the log readers (``megatron_log``, ``torchtitan_run``) share: the steady step of a run
from the intervals its training log reports, how a value is echoed, the run's node count, and
the note on what no log says of a MoE run."""

from __future__ import annotations

import statistics

# Logged intervals that spread more than this around their median are said.
SPREAD = 0.1
# What no log says: how evenly the router spread the tokens.
MOE_BALANCE_NOTE = ("training.moe_load_imbalance keeps its default (the log does not measure "
                    "the routing's balance): set it in the run where you know it")


def steady_step(steps_s: list[float], skip: int) -> tuple[float, list[str]]:
    """The median of the logged intervals' step times (s) after the first ``skip`` (the
    warm-up: compilation, communicator set-up, the allocator's growth), and notes: the warm-up
    kept where nothing else was logged, a spread over 10% around the median."""
    notes = []
    kept = steps_s[skip:]
    if not kept:
        kept = steps_s[-1:]
        notes.append(f"only {len(steps_s)} logged interval(s): the step time includes the "
                     "warm-up (compilation, set-up); log more steps for a steady one")
    kept = sorted(kept)
    mid = statistics.median(kept)
    spread = (kept[-1] - kept[0]) / mid
    if spread > SPREAD:
        notes.append(f"the logged intervals spread {100 * spread:.0f}% around their median "
                     f"({kept[0]:.4g}-{kept[-1]:.4g} s): a straggler, a checkpoint or an "
                     "evaluation may be inside some; the median is used")
    return mid, notes


def shown(value: object, limit: int = 60) -> str:
    """A value read from a log or config, for an error message: its repr, cut at ``limit``
    characters (the input may be anything, of any length)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def with_world(cluster: dict, world: int) -> dict:
    """The cluster (as a request gives it: a spec, or a preset name) with the node count the
    run's world fills, where its nodes' GPUs divide the world (the request's own check
    names it otherwise)."""
    gpn = cluster.get("gpus_per_node")
    if gpn is None and isinstance(cluster.get("preset"), str):
        from planner.specs import ClusterSpec

        try:
            gpn = ClusterSpec.from_preset(cluster["preset"]).gpus_per_node
        except (ValueError, KeyError):
            return cluster               # an unknown preset: the request's validation says so
    if isinstance(gpn, int) and gpn > 0 and world % gpn == 0:
        return {**cluster, "num_nodes": world // gpn}
    return cluster
