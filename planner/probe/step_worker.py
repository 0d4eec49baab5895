"""A torch.distributed program that runs one plan's training-step pattern and times it.

Groups are built in Megatron-LM's order (tp innermost, then dp, then pp). Each stage runs the
1F1B schedule: warm-up forwards, one forward / one backward, drain; a forward receives the
previous stage's activations and sends its own on, a backward the same for gradients; every
layer runs its GEMMs (float32, the plan's per-GPU shapes; backward twice the forward's FLOPs,
plus the forward again under full recompute) and its TP collectives with the plan's message
sizes; after the micro-batches, the data-parallel buckets. Time is split into compute, TP,
PP (waiting for and sending activations), DP and ZeRO, the rest of the step being idle
(the bubble). Rank 0 writes every rank's numbers, the achieved matmul rate and, on request,
a torch.profiler Chrome trace of the measured steps.

Fault injection, for testing the launchers and the service: ``PLANNER_PROBE_FAULT=crash:R``
makes rank R exit with an error after its warm-up step, ``hang:R`` makes it sleep forever;
with ``PLANNER_PROBE_PID_DIR`` set, every rank writes its pid there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from datetime import timedelta

from planner.validation.schedule import one_f_one_b_order, rank_groups


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    ap = argparse.ArgumentParser()
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--trace", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--progress", default="")
    args = ap.parse_args(argv)
    with open(args.pattern) as fh:
        pat = json.load(fh)
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    tp, dp, pp, m = pat["tp"], pat["dp"], pat["pp"], pat["m"]
    if tp * dp * pp != world:
        raise SystemExit(f"the plan needs {tp * dp * pp} ranks, this job has {world}")
    stage = rank // (tp * dp)
    # Every rank creates every group, in the same order; it keeps the ones it belongs to.
    tp_groups, dp_groups = rank_groups(tp, dp, pp)
    tp_group = dp_group = None
    for ranks in tp_groups + dp_groups:
        g = dist.new_group(ranks)
        if rank in ranks:
            if ranks in tp_groups:
                tp_group = g
            else:
                dp_group = g
    prev_rank = rank - tp * dp if stage > 0 else None
    next_rank = rank + tp * dp if stage < pp - 1 else None
    layers = pat["layers"][stage]
    timers: dict[str, float] = defaultdict(float)
    flops = {"n": 0.0}
    mats = [(torch.randn(mm, k), torch.randn(k, n)) for mm, n, k in pat["gemms"]]
    head = None
    if stage == pp - 1:
        hm, hn, hk = pat["head_gemm"]
        head = (torch.randn(hm, hk), torch.randn(hk, hn))
    bufs: dict[tuple, torch.Tensor] = {}

    def buf(nbytes: float, tag: str, div: int = 1) -> torch.Tensor:
        key = (int(nbytes), tag, div)
        if key not in bufs:
            bufs[key] = torch.ones(max(div, int(nbytes) // 4 // div * div) // div)
        return bufs[key]

    def collective(op: str, nbytes: float, group, size: int) -> None:
        if size == 1:
            return
        if op == "all_reduce":
            dist.all_reduce(buf(nbytes, "full"), group=group)
        elif op == "all_gather":
            out = buf(nbytes, "full")
            dist.all_gather_into_tensor(out, buf(nbytes, "part", size), group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(buf(nbytes, "part", size), buf(nbytes, "full"),
                                       group=group)

    def timed(name: str, fn, *a) -> None:
        t0 = time.perf_counter()
        fn(*a)
        timers[name] += time.perf_counter() - t0

    def gemms(times: int) -> None:
        for a, b in mats:
            for _ in range(times):
                torch.mm(a, b)
                flops["n"] += 2 * a.shape[0] * a.shape[1] * b.shape[1]

    def layer(kind: str) -> None:
        if pat["zero3"]:   # gather the layer's weights (forward, and again for backward)
            timed("zero", collective, "all_gather", pat["zero3"][0][1], dp_group, dp)
        timed("compute", gemms, 1 if kind == "F" else (3 if pat["recompute"] == "full"
                                                         else 2))
        for op, nbytes, calls in (pat["tp_fwd"] if kind == "F" else pat["tp_bwd"]):
            for _ in range(calls):
                timed("tp", collective, op, nbytes, tp_group, tp)
        if kind == "B" and pat["zero3"]:
            timed("zero", collective, "reduce_scatter", pat["zero3"][1][1], dp_group, dp)

    act = torch.ones(max(1, int(pat["pp_bytes"]) // 4))
    recv_act = torch.empty_like(act)

    order = one_f_one_b_order(pp, stage, m)

    def step() -> None:
        pending = []
        for kind, _ in order:
            src = prev_rank if kind == "F" else next_rank
            dst = next_rank if kind == "F" else prev_rank
            if src is not None:
                t0 = time.perf_counter()
                dist.recv(recv_act, src=src)
                timers["pp"] += time.perf_counter() - t0
            for _ in range(layers):
                layer(kind)
            if head is not None:
                def head_mm(times: int) -> None:
                    for _ in range(times):
                        torch.mm(*head)
                        flops["n"] += 2 * head[0].shape[0] * head[0].shape[1] * head[1].shape[1]
                timed("compute", head_mm, 1 if kind == "F" else 2)
            if dst is not None:
                t0 = time.perf_counter()
                pending.append(dist.isend(act, dst=dst))
                timers["pp"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        for w in pending:
            w.wait()
        timers["pp"] += time.perf_counter() - t0
        for op, nbytes, calls in pat["dp_ops"]:
            for _ in range(calls):
                timed("dp", collective, op, nbytes, dp_group, dp)

    if os.environ.get("PLANNER_PROBE_PID_DIR"):
        with open(os.path.join(os.environ["PLANNER_PROBE_PID_DIR"], f"rank{rank}.pid"), "w") as fh:
            fh.write(str(os.getpid()))
    for _ in range(args.warmup):
        step()
    fault, _, fault_rank = os.environ.get("PLANNER_PROBE_FAULT", "").partition(":")
    if fault and fault_rank == str(rank):
        if fault == "crash":
            print(f"injected fault: rank {rank} crashes", file=sys.stderr, flush=True)
            os._exit(7)
        if fault == "hang":
            time.sleep(10**6)
    dist.barrier()
    timers.clear()
    flops["n"] = 0.0
    steps = []
    prof = None
    if rank == 0 and args.trace:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    for i in range(args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        steps.append(time.perf_counter() - t0)
        if rank == 0 and args.progress:
            with open(args.progress, "w") as fh:
                json.dump({"done": i + 1, "total": args.steps}, fh)
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.trace)
    n = len(steps)
    mine = {"rank": rank, "stage": stage, "step_time_s": sum(steps) / n,
            "compute": timers["compute"] / n, "tp_comm": timers["tp"] / n,
            "pp_comm": timers["pp"] / n, "dp_comm": timers["dp"] / n,
            "zero_comm": timers["zero"] / n,
            "matmul_flops_per_s": flops["n"] / max(timers["compute"], 1e-9)}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        with open(args.out + ".tmp", "w") as fh:
            json.dump({"ranks": everyone, "steps": n}, fh)
        os.replace(args.out + ".tmp", args.out)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
