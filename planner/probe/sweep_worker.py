"""A torch.distributed program that times every collective over a sweep of message sizes.

A group size smaller than the world is measured with the world cut into disjoint groups of that
size, all running at once, as every TP or DP group of a training step does.

Run under torchrun (``python -m torch.distributed.run ... -m planner.probe.sweep_worker``).
Backend ``nccl`` on GPUs, ``gloo`` on CPU. For each group size (the whole world and smaller
groups of the first ranks) and each collective: warm-up calls per size, then passes over all
the sizes in a shuffled order (the same on every rank), each pass timing ``--repeats`` batches
per size between barriers (device synchronised on GPUs), each batch long enough to dwarf the
timer, the time of a call taken as the slowest rank's. Passes spread slow phases of a shared
machine over every size instead of one. Per size the batches beyond Tukey's far fence (Q3 +
3 IQR: a descheduled rank, a page fault) are dropped and the median kept, with its 95%
confidence interval from order statistics; with ``--budget-s``, passes go on until every
size's interval is within ``--target-ci`` of its median or the budget is spent (rank 0
decides, all ranks follow). Sizes are full buffers (nccl-tests convention). A collective the
backend lacks is reported as unsupported, not faked. Rank 0 writes the result JSON and a
progress file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import time
from datetime import timedelta

from planner.probe.worker_exit import leave
from planner.vocabulary import COLLECTIVES

OPS = COLLECTIVES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default="4096,16384,65536,262144,1048576,4194304",
                    help="comma-separated message sizes in bytes (full buffers)")
    ap.add_argument("--group-sizes", default="", help="comma-separated; default: world and 2")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="batches per size per pass")
    ap.add_argument("--min-batch-ms", type=float, default=2.0)
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="seconds in all for more passes (shared by the group sizes and "
                         "collectives); 0: one pass each")
    ap.add_argument("--target-ci", type=float, default=0.05,
                    help="stop when every median's 95%% interval is within this fraction")
    ap.add_argument("--out", required=True)
    ap.add_argument("--progress", default="")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    args = parse_args(argv)
    dist.init_process_group(args.backend, timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    hosts: list[str] = [""] * world
    dist.all_gather_object(hosts, socket.gethostname())
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ops = [o for o in args.ops.split(",") if o]
    gsizes = sorted({int(g) for g in args.group_sizes.split(",") if g} or {world, 2}, reverse=True)
    gsizes = [g for g in gsizes if 2 <= g <= world]
    # Groups smaller than the world run side by side (the world cut into disjoint groups, as
    # every TP or DP group of a training step runs at once), when the size divides the world.
    groups, members = {}, {}
    for g in gsizes:
        if g == world:
            groups[g], members[g] = dist.group.WORLD, True
        elif world % g == 0:
            for k in range(world // g):
                chunk = list(range(k * g, (k + 1) * g))
                grp = dist.new_group(chunk)
                if rank in chunk:
                    groups[g] = grp
            members[g] = True
        else:
            groups[g], members[g] = dist.new_group(list(range(g))), rank < g
    samples, unsupported = [], []
    total = len(gsizes) * len(ops) * len(sizes)
    done, t_start = 0, time.perf_counter()

    def progress() -> None:
        if rank == 0 and args.progress:
            with open(args.progress + ".tmp", "w") as fh:
                json.dump({"done": done, "total": total}, fh)
            os.replace(args.progress + ".tmp", args.progress)

    for p in gsizes:
        group = groups[p]
        member = members[p]
        tier = "inter_node" if len(set(hosts[:p])) > 1 else "intra_node"
        for op in ops:
            if op == "send_recv" and p != 2:
                done += len(sizes)
                continue
            failed = None
            timers = {}
            for size in sizes:
                dist.barrier()
                if member and failed is None:
                    try:
                        timers[size] = _timer(op, size, p, group, device, sync, args, torch,
                                              dist)
                    except (RuntimeError, ValueError) as exc:   # the backend lacks it
                        failed = f"{op} ({args.backend}): {str(exc).splitlines()[0][:200]}"
            if member and failed is None:
                share = args.budget_s / max(1, len(gsizes) * len(ops))
                times = _passes(timers, sizes, group, args, share, torch, dist, device)
                if rank == 0:
                    for size in sizes:
                        med, lo, hi, n = summarize(times[size])
                        samples.append({"op": op, "group_size": p, "tier": tier,
                                        "message_bytes": _full_bytes(op, size, p),
                                        "time_us": med * 1e6, "ci_low_us": lo * 1e6,
                                        "ci_high_us": hi * 1e6, "repeats": n})
            done += len(sizes)
            progress()
            if rank == 0 and failed and failed not in unsupported:
                unsupported.append(failed)
    dist.barrier()
    if rank == 0:
        result = {"backend": args.backend, "world_size": world, "hosts": sorted(set(hosts)),
                  "samples": samples, "unsupported": unsupported,
                  "seconds": time.perf_counter() - t_start}
        with open(args.out + ".tmp", "w") as fh:
            json.dump(result, fh)
        os.replace(args.out + ".tmp", args.out)
    dist.destroy_process_group()
    return 0


def _elems(size: int, p: int) -> int:
    """float32 elements of a full buffer, rounded down to a multiple of p (nccl-tests)."""
    return max(p, (size // 4) // p * p)


def _full_bytes(op: str, size: int, p: int) -> int:
    return _elems(size, p) * 4


def summarize(times: list[float]) -> tuple[float, float, float, int]:
    """(median, 95% interval low, high, batches kept) after dropping the batches beyond
    Tukey's far fence; the interval of the median from order statistics: the j-th and k-th
    smallest, j = floor(n/2 - 1.96 sqrt(n)/2), k = ceil(1 + n/2 + 1.96 sqrt(n)/2) (1-based;
    Conover, Practical Nonparametric Statistics, section 3.2)."""
    xs = sorted(times)
    n = len(xs)
    q1, q3 = xs[(n - 1) // 4], xs[(3 * (n - 1)) // 4]
    xs = [x for x in xs if x <= q3 + 3 * (q3 - q1)] or xs
    n = len(xs)
    med = statistics.median(xs)
    half = 1.96 * math.sqrt(n) / 2
    lo = xs[max(0, math.floor(n / 2 - half) - 1)]
    hi = xs[min(n - 1, math.ceil(1 + n / 2 + half) - 1)]
    return med, min(lo, med), max(hi, med), n


def _passes(timers: dict, sizes: list[int], group, args, budget_s: float, torch, dist,
            device) -> dict:
    """Batch times per size over passes in shuffled order until the intervals are tight or
    the budget is spent (one pass without a budget)."""
    import random

    times: dict[int, list[float]] = {s: [] for s in sizes}
    t0 = time.perf_counter()
    for n_pass in range(10_000):
        order = list(sizes)
        random.Random(n_pass).shuffle(order)
        for size in order:
            times[size] += timers[size](args.repeats)
        more = 0.0
        if budget_s > 0 and dist.get_rank() == 0:
            tight = all(hi - lo <= 2 * args.target_ci * med
                        for med, lo, hi, _ in map(summarize, times.values()))
            more = float(n_pass < 1 or (not tight and time.perf_counter() - t0 < budget_s))
        flag = torch.tensor([more], dtype=torch.float64, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        if flag.item() == 0:
            return times
    return times


def _timer(op, size, p, group, device, sync, args, torch, dist):
    """Warm ``op`` at ``size`` up and return a function timing n batches of it (seconds per
    call, the slowest rank's)."""
    n = _elems(size, p)
    full = torch.ones(n, device=device)
    part = torch.ones(n // p, device=device)
    out_full = torch.empty(n, device=device)
    out_part = torch.empty(n // p, device=device)
    rank = dist.get_rank()

    def call() -> None:
        if op == "all_reduce":
            dist.all_reduce(full, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out_full, part, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out_part, full, group=group)
        elif op == "broadcast":
            dist.broadcast(full, src=0, group=group)
        elif op == "reduce":
            dist.reduce(full, dst=0, group=group)
        elif op == "all_to_all":
            dist.all_to_all_single(out_full, full, group=group)
        elif op == "scatter":
            chunks = list(full.chunk(p)) if rank == 0 else None
            dist.scatter(out_part, chunks, src=0, group=group)
        elif op == "gather":
            bufs = list(out_full.chunk(p)) if rank == 0 else None
            dist.gather(part, bufs, dst=0, group=group)
        elif op == "send_recv":
            peer = rank ^ 1                      # the other rank of this pair
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, full, peer, group),
                                           dist.P2POp(dist.irecv, out_full, peer, group)])
            for r in reqs:
                r.wait()
        else:
            raise ValueError(f"unknown op {op}")

    for _ in range(args.warmup):
        call()
    sync()
    # Calls per batch: enough for min_batch_ms, agreed by all ranks (the slowest decides).
    dist.barrier(group=group)
    t0 = time.perf_counter()
    call()
    sync()
    one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
    dist.all_reduce(one, op=dist.ReduceOp.MAX, group=group)
    k = max(1, min(50, math.ceil(args.min_batch_ms / 1e3 / max(one.item(), 1e-9))))

    def batches(n: int) -> list[float]:
        out = []
        for _ in range(n):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            for _ in range(k):
                call()
            sync()
            t = torch.tensor([(time.perf_counter() - t0) / k], dtype=torch.float64,
                             device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            out.append(t.item())
        return out

    return batches


if __name__ == "__main__":
    leave(main())
