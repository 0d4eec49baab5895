"""A rank's time inside a collective is the transfer plus the wait for peers still busy
elsewhere (computing, or in an earlier pipeline stage). The alpha-beta model predicts only the
transfer, so the probe records when each rank entered and left every call, and the transfer is
what the call took once its last member had arrived, the quantity a barrier-fenced sweep
(nccl-tests, ``planner calibrate run``) measures:

    transfer = max(exit over members) - max(entry over members, the group's previous exit)

(the previous exit matters for asynchronous calls, ZeRO-3's prefetched gathers and its
reduce-scatters, issued while the group is still busy).

For a point-to-point message, the sender's ``isend`` marks its arrival and the receiver's exit
the completion. Clocks are the ranks' monotonic clocks, already aligned to rank 0's (one host
shares one clock; across hosts the worker estimates the offsets first).

Imported by the probe worker: keep this module free of torch and of the cost model.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import NamedTuple


class Event(NamedTuple):
    rank: int
    component: str     # tp_comm, cp_comm, pp_comm, dp_comm, zero_comm
    op: str            # all_reduce, all_gather, reduce_scatter, send_recv
    nbytes: float      # full-buffer size (nccl-tests convention), or the message
    key: str           # the group ("g:0,1") or the directed pair ("p:0>2")
    seq: int           # n-th call on that group / pair, per rank
    role: str          # "c" collective member, "s" sender, "r" receiver
    t0: float
    t1: float


class Transfers(NamedTuple):
    per_rank: dict[int, dict[str, float]]            # rank -> component -> transfer seconds
    wait: dict[int, float]                           # rank -> seconds waited inside calls
    by_op: dict[tuple[str, float, int], list[float]]  # (op, bytes, group size) -> transfers


def transfers(events: list[Event] | list[list]) -> Transfers:
    """Split every recorded call into transfer and waiting. A point-to-point transfer counts on
    the receiving rank (each message once); a collective's on every member."""
    calls: dict[tuple[str, int], list[Event]] = defaultdict(list)
    for e in events:
        e = Event(*e)
        calls[(e.key, e.seq)].append(e)
    per_rank: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    wait: dict[int, float] = defaultdict(float)
    by_op: dict[tuple[str, float, int], list[float]] = defaultdict(list)
    group_free: dict[str, float] = {}
    for (key, _), evs in sorted(calls.items()):
        start = max(e.t0 for e in evs)
        if not key.startswith("p:"):
            # An asynchronous call issued while the group is still busy with the previous one
            # waits in its queue: its transfer starts when the group is free.
            start = max(start, group_free.get(key, start))
            group_free[key] = max(e.t1 for e in evs)
        if key.startswith("p:"):
            done = [e for e in evs if e.role == "r"]
            if not done:
                continue                    # the receive was not recorded (not measured)
            end, size = done[0].t1, 2
            owners = done
        else:
            # A ring exchange is a pairwise send/recv per rank, whatever the ring's size.
            end, size = max(e.t1 for e in evs), 2 if evs[0].op == "send_recv" else len(evs)
            owners = evs
        t = max(0.0, end - start)
        for e in owners:
            per_rank[e.rank][e.component] += t
        for e in evs:
            if e.role != "s":               # an isend returns at once: no time inside it
                wait[e.rank] += max(0.0, (e.t1 - e.t0) - t)
        by_op[(evs[0].op, evs[0].nbytes, size)].append(t)
    return Transfers({r: dict(c) for r, c in per_rank.items()}, dict(wait), dict(by_op))


def pipeline_transfer(per_rank: dict[int, dict[str, float]], chains: list[list[int]],
                      vpp: int = 1) -> float:
    """Pipeline send/recv time per rank: a pipeline's messages (each counted once, on its
    receiver) over its p * v - 1 (virtual) stage boundaries, times the v boundaries a rank's
    chunks sit on, for the slowest pipeline. Per micro-batch a boundary carries one activation
    forward and one gradient back, which is what the cost model counts per rank (two send/recv
    per micro-batch and model chunk)."""
    worst = 0.0
    for chain in chains:
        if len(chain) > 1:
            total = sum(per_rank.get(r, {}).get("pp_comm", 0.0) for r in chain)
            worst = max(worst, total / (len(chain) * vpp - 1) * vpp)
    return worst


def mean_samples(by_op: dict[tuple[str, float, int], list[float]]) -> list[dict]:
    """One calibration sample per distinct (op, size, group size): the mean transfer. The
    mean, not the median: a step's communication is the sum of its calls, and transfer times
    are skewed to the right (a late wake-up, a congested link), so the median would predict
    sums too small; a sweep's batch averages are means too."""
    return [{"op": op, "message_bytes": nbytes, "group_size": size,
             "time_us": statistics.fmean(ts) * 1e6, "calls": len(ts)}
            for (op, nbytes, size), ts in sorted(by_op.items()) if statistics.fmean(ts) > 0]
