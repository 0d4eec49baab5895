"""Pipeline schedules: the order of each stage's work, an event simulation of one step, and
the closed form the search uses.

Orders (Narayanan et al. SC'21 section 2.2; Megatron-Core ``schedules.py``):
- 1F1B (``vpp = 1``): stage s runs min(p - s - 1, m) warm-up forwards, then one forward and one
  backward in turn, then the remaining backwards. Fewer micro-batches than stages is allowed
  (everything is warm-up and cool-down, as in GPipe).
- Interleaved 1F1B (``vpp = v > 1``): each stage holds v model chunks; micro-batches go through
  the chunks in groups of g = ``group`` (Megatron's ``microbatch_group_size_per_vp_stage``,
  default p): the forward table runs, group by group, every chunk over the group's
  micro-batches (the last group may be short); backwards follow the same table with the chunks
  reversed. Stage s runs min((p - s - 1) * 2 + (v - 1) * g, m * v) warm-up forwards.

Dependencies: the forward of chunk c of micro-batch i on stage s waits for it on stage s - 1
(and stage 0's chunk c for chunk c - 1 on the last stage), each hop adding one send/recv; the
backward the other way round; the last chunk's backward on the last stage follows its forward.
``simulate`` runs these dependencies event by event. In 1F1B a stage's send blocks it for the
transfer (Megatron's ``send_forward_recv_backward`` and ``send_backward_recv_forward`` wait for
their batched isend/irecv); interleaved schedules overlap their sends with compute
(``overlap_p2p_comm``), so there a send does not block the sender. Without that option
(``TrainingSpec.overlap_p2p_comm`` false) Megatron-Core's interleaved schedule
(``forward_backward_pipelining_with_interleaving``) waits for one batched exchange after each
warm-up forward (``send_forward_recv_forward``), one after each forward-and-backward pair of
the steady phase (``send_forward_backward_recv_forward_backward``) and one after each
cool-down backward (``send_backward_recv_backward``): m v + w exchanges on a stage with w
warm-up forwards (``exchanges``).

``makespan`` is the closed form used for every plan: with the per-micro-batch time t_s = f_s +
b_s of each stage (all its chunks) and p2p time c per hop,

    T = m (t_max + 2 c) + (sum_s t_s - t_max) / v + 2 (p - 1) c / v ...  (1F1B, m >= p)

i.e. the bottleneck stage runs every micro-batch and the others' fill and drain is the bubble,
v times smaller with interleaving ((p - 1)/(v m) of the step for equal stages, SC'21). With
m < p the pipeline never fills: the bubble is then (p - 1) t for every v. The tests check the
closed form against ``simulate`` (exact for equal stages).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def warmup_forwards(pp, stage, m, vpp=1, group=None):
    """Warm-up forwards of ``stage`` (scalars or numpy arrays): min(p - s - 1, m) in 1F1B,
    min((p - s - 1) * 2 + (v - 1) * g, m v) interleaved with micro-batch groups of g (default
    p; Megatron-Core ``get_pp_rank_microbatches``)."""
    g = pp if group is None else group
    return np.where(np.asarray(vpp) == 1, np.minimum(pp - stage - 1, m),
                    np.minimum((pp - stage - 1) * 2 + (np.asarray(vpp) - 1) * g,
                               np.asarray(m) * vpp))


def exchanges(m, vpp, pp, group=None, overlap=True):
    """Send/recv exchanges on the critical path of a step (scalars or numpy arrays), each one
    hop's transfer: 1F1B's two per micro-batch and the fill, 2 (m + p - 1); an interleaved
    schedule that overlaps its sends only its fill, 2 (p v - 1); one that does not, stage 0's
    m v + w (its w warm-up forwards, ``warmup_forwards``)."""
    pp, vpp = np.asarray(pp), np.asarray(vpp)
    blocking = np.asarray(m) * vpp + warmup_forwards(pp, 0, m, vpp, group)
    hops = np.where(vpp == 1, 2 * (np.asarray(m) + pp - 1),
                    2 * (pp * vpp - 1) if overlap else blocking)
    return np.where(pp > 1, hops, 0)


def schedule(pp: int, stage: int, m: int, vpp: int = 1, group: int | None = None
             ) -> list[tuple[str, int, int]]:
    """The ops of ``stage`` in order, as ("F" or "B", model chunk, micro-batch)."""
    if vpp == 1:
        warm = int(warmup_forwards(pp, stage, m))
        order = [("F", 0, i) for i in range(warm)]
        f_next = warm
        for b in range(m):
            if f_next < m:
                order.append(("F", 0, f_next))
                f_next += 1
            order.append(("B", 0, b))
        return order
    g = group or pp
    table: list[tuple[int, int]] = []          # (micro-batch, chunk) in forward order
    for lo in range(0, m, g):
        table += [(i, c) for c in range(vpp) for i in range(lo, min(lo + g, m))]
    total = m * vpp
    warm = int(warmup_forwards(pp, stage, m, vpp, g))
    fwd = [("F", c, i) for i, c in table]
    bwd = [("B", vpp - 1 - c, i) for i, c in table]
    order = fwd[:warm]
    for k in range(total - warm):
        order += [fwd[warm + k], bwd[k]]
    return order + bwd[total - warm:]


@dataclass(frozen=True)
class Timeline:
    """Every op of every stage: (kind, chunk, micro-batch, start, end), in execution order; and
    every send/recv exchange a stage starts: (start, seconds, whether the stage waits for it)."""

    ops: list[list[tuple[str, int, int, float, float]]]
    exchanges: list[list[tuple[float, float, bool]]]

    @property
    def makespan(self) -> float:
        return max((o[4] for stage in self.ops for o in stage), default=0.0)


def simulate(fwd: list[list[float]], bwd: list[list[float]], m: int, p2p_s: float,
             group: int | None = None, overlap: bool = True) -> Timeline:
    """Run the schedule of ``len(fwd)`` stages, ``len(fwd[0])`` chunks each, whose forward and
    backward of one micro-batch take ``fwd[s][c]`` and ``bwd[s][c]`` seconds; ``overlap``
    false: an interleaved stage waits for its exchange after each warm-up forward and each
    backward (``TrainingSpec.overlap_p2p_comm``)."""
    p, v = len(fwd), len(fwd[0])
    orders = [schedule(p, s, m, v, group) for s in range(p)]
    warm = [int(warmup_forwards(p, s, m, v, group)) for s in range(p)]
    end: dict[tuple[str, int, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    out: list[list[tuple[str, int, int, float, float]]] = [[] for _ in range(p)]
    sent: list[list[tuple[float, float, bool]]] = [[] for _ in range(p)]
    blocking = v > 1 and not overlap
    left = sum(len(o) for o in orders)
    while left:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, c, i = orders[s][pos[s]]
                ready = _ready(kind, s, c, i, p, v, end, p2p_s)
                if ready is None:
                    break
                start = max(free[s], ready)
                dur = fwd[s][c] if kind == "F" else bwd[s][c]
                end[kind, s, c, i] = start + dur
                sends = (s < p - 1 or c < v - 1) if kind == "F" else (s > 0 or c > 0)
                waits = sends if v == 1 else (blocking and (kind == "B" or pos[s] < warm[s]))
                free[s] = start + dur + (p2p_s if waits else 0.0)
                out[s].append((kind, c, i, start, start + dur))
                # Without overlap an interleaved stage's steady-phase forward sends nothing of
                # its own: its activations go in the batched exchange after the backward.
                if p2p_s and (waits if blocking else sends):
                    sent[s].append((start + dur, p2p_s, waits))
                pos[s] += 1
                left -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked")   # not for a valid order
    return Timeline(out, sent)


def _ready(kind, s, c, i, p, v, end, c_s):
    """When the inputs of an op are there, or None if its producer has not run yet."""
    if kind == "F":
        if s > 0:
            dep = end.get(("F", s - 1, c, i))
        elif c > 0:
            dep = end.get(("F", p - 1, c - 1, i))
        else:
            return 0.0
        return None if dep is None else dep + c_s
    if s < p - 1:
        dep = end.get(("B", s + 1, c, i))
    elif c < v - 1:
        dep = end.get(("B", 0, c + 1, i))
    else:
        return end.get(("F", s, c, i))
    return None if dep is None else dep + c_s


def makespan(t_max, t_sum, m, v, p, p2p_s):
    """(step, bubble) of the closed form for arrays (or scalars) of plans: ``t_max`` the
    slowest stage's time per micro-batch (forward + backward, all chunks), ``t_sum`` all stages'
    together, ``p2p_s`` one send/recv. The bubble is the time the slowest stage is idle."""
    m = np.asarray(m, dtype=float)
    v = np.asarray(v, dtype=float)
    fill = np.where(m >= p, (t_sum - t_max) / v, t_sum - t_max)
    hops = np.where(np.asarray(p) > 1, 2 * m * p2p_s + 2 * (np.asarray(p) - 1) * p2p_s / v, 0.0)
    return m * t_max + fill + hops, fill


def chunk_times(detail: dict[str, float], layout) -> tuple[list[list[float]], list[list[float]]]:
    """(forward[s][c], backward[s][c]) of one micro-batch per stage and model chunk, from one
    plan's step-model components (``batch.compose``'s ``detail``) and its ``Layout``: a
    chunk's layers' periods, the embedding in the first chunk, the MTP modules in the last
    chunk of their stage, the head and loss (once per prediction depth) in the last chunk of
    the last stage, and each chunk's share of the micro-batch's fixed costs."""
    p, v = layout.pp, layout.vpp
    fwd = [[0.0] * v for _ in range(p)]
    bwd = [[0.0] * v for _ in range(p)]
    d = detail
    for s in range(p):
        for c in range(v):
            n = layout.chunks[s][c]
            f, b = n * d["layer_fwd"], n * d["layer_bwd"]
            if s == 0 and c == 0:     # (CPU offloading's exposed copies: pp 1 plans only)
                f = f + d["embed"] + d["offload_fwd"]
                b = b + d["embed"] + d["embed_rerun"] + d["copy_first"] + d["offload_bwd"]
            if s == layout.mtp_rank and c == v - 1:
                f, b = f + d["mtp_fwd"], b + d["mtp_bwd"]
                if s not in (0, p - 1):         # its parameters' gradient copy (standalone)
                    b = b + d["copy_mtp"]
            if s == p - 1 and c == v - 1:
                f = f + d["head_fwd"] + d["mtp_heads_fwd"]
                b = b + d["head_bwd"] + d["mtp_heads_bwd"] + d["copy_last"]
            fixed = d["microbatch_fixed"] / v       # host work, ZeRO edges: per chunk share
            fwd[s][c], bwd[s][c] = f + fixed / 2, b + fixed / 2
    return fwd, bwd
