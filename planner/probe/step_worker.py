"""A torch.distributed program that runs one plan's training-step pattern and times it.

Groups are built in Megatron-LM's order (tp innermost, then cp, dp, pp). Each stage runs the
1F1B schedule: warm-up forwards, one forward / one backward, drain; a forward receives the
previous stage's activations and sends its own on, a backward the same for gradients; every
layer runs its compute (the linear GEMMs and the attention core's batched GEMMs with the
plan's per-GPU shapes; backward twice the forward, plus the forward again under full
recompute), its TP collectives and its context-parallel ring exchanges with the plan's message
sizes, and ZeRO-3's gathers (the next layer's prefetched while this one computes) and
gradient reduce-scatters (asynchronous); after the micro-batches, the data-parallel buckets.

Compute: first a micro-benchmark times every GEMM shape of the plan (the device's achieved
matmul rate on these shapes). ``gemm`` then runs the GEMMs in the step, so overlap with
communication is real; ``emulate`` sleeps for their benchmarked time instead, which keeps the
step's timing (pipeline waits, bubbles) without the ranks fighting for CPU cores when more
ranks than cores share one host (then the benchmark runs one rank at a time, as each rank
would own its own device); ``auto`` picks ``emulate`` exactly in that case.

Every communication call is recorded (entry and exit on a clock aligned to rank 0's) so that
``planner.validation.transfers`` can split it into the transfer and the wait for peers. Rank 0
writes every rank's numbers, the per-collective samples and, on request, a torch.profiler
Chrome trace of the measured steps.

Fault injection, for testing the launchers and the service: ``PLANNER_PROBE_FAULT=crash:R``
makes rank R exit with an error after its warm-up step, ``hang:R`` makes it sleep forever;
with ``PLANNER_PROBE_PID_DIR`` set, every rank writes its pid there.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import queue
import socket
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from planner.probe.worker_exit import leave
from planner.validation.schedule import pipeline_order, rank_groups
from planner.validation.transfers import mean_samples, pipeline_transfer, transfers

if TYPE_CHECKING:   # the ranks read the JSON; the cost model is not imported at run time
    from planner.validation.pattern import StepPattern


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--compute", choices=["auto", "gemm", "emulate"], default="auto")
    ap.add_argument("--trace", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--progress", default="")
    return ap.parse_args(argv)


def compute_mode(asked: str, local_world: int, backend: str = "gloo") -> str:
    if asked != "auto":
        return asked
    if backend == "nccl":
        return "gemm"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "emulate" if local_world > (cores or 1) else "gemm"


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    args = parse_args(argv)
    with open(args.pattern) as fh:
        pat: StepPattern = json.load(fh)   # written by planner.validation.pattern
    dist.init_process_group(args.backend, timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if args.backend == "nccl":
        # On GPUs every call is synchronised before its exit is stamped, so host clocks time
        # kernels (overlap between compute and communication streams is not measured).
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    tp, cp, dp, pp, m = pat["tp"], pat.get("cp", 1), pat["dp"], pat["pp"], pat["m"]
    if tp * cp * dp * pp != world:
        raise SystemExit(f"the plan needs {tp * cp * dp * pp} ranks, this job has {world}")
    mode = compute_mode(args.compute, int(os.environ.get("LOCAL_WORLD_SIZE", world)),
                        args.backend)
    stage = rank // (tp * cp * dp)
    ep, etp = pat.get("ep", 1), pat.get("etp", 1)
    layout = rank_groups(tp, cp, dp, pp, ep, etp)
    # Every rank creates every group, in the same order; it keeps the ones it belongs to.
    mine: dict[str, tuple] = {}
    for kind in ("tp", "cp", "dp", "ep", "etp", "edp"):
        for ranks in layout[kind]:
            g = dist.new_group(ranks) if len(ranks) > 1 else None
            if rank in ranks:
                mine[kind] = (g, len(ranks), "g:" + ",".join(map(str, ranks)), ranks)
    chain = next(c for c in layout["pp"] if rank in c)
    layers = pat["layers"][stage]

    offset = _clock_offset(torch, dist, rank, world, device)
    clock = time.perf_counter
    events: list[list] = []
    seq: dict[str, int] = defaultdict(int)
    rec = {"on": False}
    compute_s = {"t": 0.0}
    tracing = rank == 0 and bool(args.trace)

    def span(name: str):
        """A named range in the measured trace (rank 0, when tracing)."""
        if tracing and rec["on"]:
            from torch.profiler import record_function

            return record_function(name)
        return contextlib.nullcontext()

    def ticket(key: str) -> int:
        """The call's number on its group or pair (every member counts the same calls)."""
        seq[key] += 1
        return seq[key] - 1

    def record(component, op, nbytes, key, role, t0, t1) -> None:
        n = ticket(key)
        if rec["on"]:
            events.append([rank, component, op, nbytes, key, n, role, t0 - offset, t1 - offset])

    # -- compute ----------------------------------------------------------------------------
    # Kernels: callables on preallocated tensors; the layer's are its GEMMs, its attention
    # core and one streaming add moving its memory-bound kernels' bytes; the head's, its GEMM.
    # MoE layers have their own GEMMs (attention, router, shared and local experts).
    shapes = [(1, mm, n, k) for mm, n, k in pat["gemms"]] + [tuple(b) for b in
                                                               pat.get("attn_bmm", [])]
    moe_shapes = ([(1, mm, n, k) for mm, n, k in pat.get("moe_gemms", [])]
                  + [tuple(b) for b in pat.get("attn_bmm", []) + pat.get("expert_bmm", [])])
    flops, stream = 0.0, 0.0
    layer_k: list[Callable[[], object]] = []
    moe_k: list[Callable[[], object]] = []
    head_k: list[Callable[[], object]] = []
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(pat.get("dtype", "fp32"),
                                                               torch.float32)
    size = torch.tensor([], dtype=dtype).element_size()
    for kernels, kind_shapes in ((layer_k, shapes), (moe_k, moe_shapes)):
        for b, mm, n, k in kind_shapes:
            x = torch.randn(b, mm, k, device=device, dtype=dtype)
            w = torch.randn(b, k, n, device=device, dtype=dtype)
            kernels.append(functools.partial(torch.bmm, x, w))
            flops += 2 * b * mm * n * k
    if pat.get("elementwise"):
        x, y, z = (torch.randn(pat["elementwise"], device=device, dtype=dtype)
                   for _ in range(3))
        layer_k.append(functools.partial(torch.add, x, y, out=z))
        stream = 3 * size * float(pat["elementwise"])
    head = pat.get("head_gemm")
    if stage == pp - 1 and head:
        hm, hn, hk = head
        x = torch.randn(hm, hk, device=device, dtype=dtype)
        w = torch.randn(hk, hn, device=device, dtype=dtype)
        head_k.append(functools.partial(torch.mm, x, w))
        flops += 2 * hm * hn * hk
    bench = _benchmark(layer_k + moe_k + head_k, rank, world, serial=(mode == "emulate"),
                       sync=sync)
    nl, nm = len(layer_k), len(moe_k)
    layer_s, head_s = sum(bench[:nl]), sum(bench[nl + nm:])
    stream_s = bench[nl - 1] if stream else 0.0
    if moe_k and stream:           # the memory-bound kernels run in every layer
        moe_k.append(layer_k[-1])
    moe_s = sum(bench[nl:nl + nm]) + stream_s
    rate = flops / max(sum(bench) - stream_s, 1e-12)

    def compute(kernels, seconds: float, times: int) -> None:
        t0 = clock()
        with span("compute"):
            if mode == "emulate":
                time.sleep(seconds * times)
            else:
                for _ in range(times):
                    for kernel in kernels:
                        kernel()
                sync()
        compute_s["t"] += clock() - t0

    # -- communication -----------------------------------------------------------------------
    bufs: dict[tuple, torch.Tensor] = {}
    pairs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}   # all_to_all out / in

    def buf(nbytes: float, tag: str, div: int = 1) -> torch.Tensor:
        key = (int(nbytes), tag, div)
        if key not in bufs:
            bufs[key] = torch.ones(max(div, int(nbytes) // 4 // div * div) // div,
                                   device=device)
        return bufs[key]

    def issue(op: str, nbytes: float, group, size: int, ranks: list[int], async_op: bool):
        """Start ``op`` on the group; its works (None when synchronous). Each op has its own
        buffers, so asynchronous calls in flight never share one."""
        if op in ("all_gather", "reduce_scatter"):    # whole shards: a multiple of the group
            nbytes = 4 * size * max(1, int(nbytes) // 4 // size)
        if op == "all_reduce":
            return [dist.all_reduce(buf(nbytes, "ar"), group=group, async_op=async_op)]
        if op == "all_gather":
            return [dist.all_gather_into_tensor(buf(nbytes, "ag-full"),
                                                buf(nbytes, "ag-part", size), group=group,
                                                async_op=async_op)]
        if op == "reduce_scatter":
            return [dist.reduce_scatter_tensor(buf(nbytes, "rs-part", size),
                                               buf(nbytes, "rs-full"), group=group,
                                               async_op=async_op)]
        if op == "all_to_all":   # token dispatch or combine: an equal share to every member
            n = max(size, int(nbytes) // 4 // size * size)
            if n not in pairs:
                pairs[n] = (torch.ones(n, device=device), torch.empty(n, device=device))
            out, inp = pairs[n]
            return [dist.all_to_all_single(out, inp, group=group, async_op=async_op)]
        if op == "ring":      # one ring-attention step: K,V to the next, from the previous
            i = ranks.index(rank)
            return dist.batch_isend_irecv([
                dist.P2POp(dist.isend, buf(nbytes, "ring-out"), ranks[(i + 1) % size], group),
                dist.P2POp(dist.irecv, buf(nbytes, "ring-in"), ranks[(i - 1) % size], group)])
        raise ValueError(f"unknown collective {op!r}")

    def collective(component: str, op: str, nbytes: float, kind: str) -> None:
        group, size, key, ranks = mine[kind]
        if size == 1:
            return
        with span(f"{component} {op}"):
            t0 = clock()
            for work in issue(op, nbytes, group, size, ranks, async_op=False):
                if work is not None:
                    work.wait()
            sync()
            record(component, "send_recv" if op == "ring" else op, float(int(nbytes) // 4 * 4),
                   key, "c", t0, clock())

    def launch(component: str, op: str, nbytes: float, kind: str):
        """Start a collective without waiting (ZeRO-3's prefetched gathers and its gradient
        reduce-scatters, as DeepSpeed and FSDP issue them); its completion is stamped when it
        happens, so its transfer is measured while compute runs beside it. Returns something
        to wait on."""
        group, size, key, ranks = mine[kind]
        if size == 1:
            return None
        n, recording, t0 = ticket(key), rec["on"], clock()
        (work,) = issue(op, nbytes, group, size, ranks, async_op=True)

        def done(_fut) -> None:
            if recording:
                events.append([rank, component, op, float(int(nbytes) // 4 * 4), key, n, "c",
                               t0 - offset, clock() - offset])

        try:   # the chained future completes once the stamp is taken
            return work.get_future().then(done)
        except RuntimeError:   # gloo's tensor collectives have no future: a watcher stamps
            watching.put((work, done))
            return work

    watching: queue.Queue = queue.Queue()

    def watcher() -> None:
        while (item := watching.get()) is not None:
            work, done = item
            work.wait()
            done(None)
            watching.task_done()

    threading.Thread(target=watcher, daemon=True).start()

    zero: dict[str, list] = {"gather": [], "scatters": []}
    # [op, bytes, component(, group)]: the dense weights over "dp", a MoE model's experts over
    # "edp" (older patterns name no group: "dp").
    z3 = [(op, nbytes, comp, kind[0] if kind else "dp")
          for op, nbytes, comp, *kind in pat["zero3"]]

    def start(op_name: str) -> list:
        return [launch(comp, op, nbytes, kind) for op, nbytes, comp, kind in z3
                if op == op_name]

    def gathered_weights(prefetch_next: bool) -> None:
        """Wait for this layer's weights (gathered now, or prefetched by the previous layer),
        then start gathering the next layer's."""
        works = zero["gather"] or start("all_gather")
        with span("zero_comm wait"):
            for work in works:
                if work is not None:
                    work.wait()
        zero["gather"] = start("all_gather") if prefetch_next else []

    share = pat.get("moe_share", 0.0)

    def layer(kind: str, index: int, prefetch_next: bool = False) -> None:
        # The stage's MoE layers: round(share * layers) of them, spread evenly (the same on
        # every rank of a stage, so the EP groups' calls match).
        moe = math.floor((index + 1) * share + 1e-9) > math.floor(index * share + 1e-9)
        if pat["zero3"]:   # the layer's weights (forward, and again for backward)
            gathered_weights(prefetch_next)
        times = 1 if kind == "F" else (3 if pat["recompute"] == "full" else 2)
        compute(moe_k, moe_s, times) if moe else compute(layer_k, layer_s, times)
        if moe:
            for op, nbytes, calls, group_kind in (pat["ep_fwd"] if kind == "F"
                                                  else pat["ep_bwd"]):
                for _ in range(calls):
                    collective("ep_comm", op, nbytes, group_kind)
        for op, nbytes, calls in (pat["tp_fwd"] if kind == "F" else pat["tp_bwd"]):
            for _ in range(calls):
                collective("tp_comm", op, nbytes, "tp")
        for nbytes, calls in (pat.get("cp_fwd", []) if kind == "F" else pat.get("cp_bwd", [])):
            for _ in range(calls):
                collective("cp_comm", "ring", nbytes, "cp")
        if kind == "B" and pat["zero3"]:
            zero["scatters"] += start("reduce_scatter")

    act = torch.ones(max(1, int(pat["pp_bytes"]) // 4), device=device)
    recv_act = torch.empty_like(act)
    pp_bytes = float(act.numel() * 4)
    vpp = pat.get("vpp", 1)
    order = pipeline_order(pp, stage, m, vpp)
    # Virtual stage i = chunk * pp + stage; its neighbours i - 1 and i + 1 wrap around the
    # pipeline's ranks (the last stage's chunk c feeds the first stage's chunk c + 1).
    chunk_layers = layers // vpp
    last = pp * vpp - 1

    def step() -> None:
        pending = []
        for kind, chunk, _ in order:
            v = chunk * pp + stage
            up, down = (v - 1, v + 1) if kind == "F" else (v + 1, v - 1)
            tag = 0 if kind == "F" else 1          # activations and gradients never mix
            if 0 <= up <= last:
                src = chain[up % pp]
                t0 = clock()
                with span("pp_comm recv"):
                    dist.recv(recv_act, src=src, tag=tag)
                    sync()
                record("pp_comm", "send_recv", pp_bytes, f"p:{src}>{rank}:{tag}", "r", t0,
                       clock())
            for i in range(chunk_layers):
                layer(kind, chunk * chunk_layers + i, prefetch_next=i < chunk_layers - 1)
            if head_k and v == last:
                compute(head_k, head_s, 1 if kind == "F" else 2)
            if 0 <= down <= last:
                dst = chain[down % pp]
                t0 = clock()
                pending.append(dist.isend(act, dst=dst, tag=tag))
                record("pp_comm", "send_recv", pp_bytes, f"p:{rank}>{dst}:{tag}", "s", t0, t0)
        for w in [*pending, *(w for w in zero["scatters"] if w is not None)]:
            w.wait()
        zero["scatters"].clear()
        watching.join()                            # every asynchronous call is stamped
        for op, nbytes, calls, comp, *group_kind in pat["dp_ops"]:
            for _ in range(calls):
                collective(comp, op, nbytes, group_kind[0] if group_kind else "dp")

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
    compute_s["t"] = 0.0
    rec["on"] = True
    steps = []
    prof = None
    if rank == 0 and args.trace:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU])
    with prof if prof is not None else contextlib.nullcontext():
        for i in range(args.steps):
            dist.barrier()
            t0 = clock()
            step()
            steps.append(clock() - t0)
            if rank == 0 and args.progress:
                with open(args.progress, "w") as fh:
                    json.dump({"done": i + 1, "total": args.steps}, fh)
    if prof is not None:
        prof.export_chrome_trace(args.trace)
    n = len(steps)
    row = {"rank": rank, "stage": stage, "step_time_s": sum(steps) / n,
           "compute": compute_s["t"] / n, "matmul_flops_per_s": rate,
           "memory_bytes_per_s": stream / stream_s if stream_s else None,
           "host": socket.gethostname()}
    gathered: list | None = [None] * world if rank == 0 else None
    dist.gather_object((row, events), gathered, dst=0)
    if gathered is not None:
        rows = [r for r, _ in gathered]
        tr = transfers([e for _, evs in gathered for e in evs])
        for r in rows:
            comm = tr.per_rank.get(r["rank"], {})
            for part in ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "zero_comm"):
                r[part] = comm.get(part, 0.0) / n
            r["pp_received"] = comm.get("pp_comm", 0.0) / n
            r["wait"] = tr.wait.get(r["rank"], 0.0) / n
        result = {"ranks": rows, "steps": n, "compute_mode": mode,
                  "pp_comm": pipeline_transfer(tr.per_rank, layout["pp"], vpp) / n,
                  "samples": mean_samples(tr.by_op), "clock_offset_s": offset}
        with open(args.out + ".tmp", "w") as fh:
            json.dump(result, fh)
        os.replace(args.out + ".tmp", args.out)
    dist.destroy_process_group()
    return 0


def _benchmark(kernels, rank: int, world: int, serial: bool, sync) -> list[float]:
    """Seconds per call of each kernel: the median of timed repeats after a warm-up.
    ``serial``: ranks take turns (each alone on the host, as each would own a device)."""
    import torch.distributed as dist

    def run() -> list[float]:
        out = []
        for kernel in kernels:
            kernel()
            sync()
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                kernel()
                sync()
                ts.append(time.perf_counter() - t0)
            out.append(statistics.median(ts))
        return out

    if not serial:
        return run()
    result: list[float] = []
    for turn in range(world):
        dist.barrier()
        if turn == rank:
            result = run()
    dist.barrier()
    return result


def _clock_offset(torch, dist, rank: int, world: int, device) -> float:
    """This rank's monotonic clock minus rank 0's. Ranks on one host share the clock (0); across
    hosts, each rank plays ping-pong with rank 0 and keeps the round trip with the least delay
    (offset = remote time - midpoint of rank 0's send and receive, as NTP does)."""
    hosts: list = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    if len(set(hosts)) == 1 and not os.environ.get("PLANNER_PROBE_ALIGN_CLOCKS"):
        return 0.0
    msg = torch.zeros(1, dtype=torch.float64, device=device)
    offsets = torch.zeros(world, dtype=torch.float64, device=device)
    for peer in range(1, world):
        best = (float("inf"), 0.0)
        for _ in range(8):
            if rank == 0:
                t_a = time.perf_counter()
                dist.send(msg, dst=peer)
                dist.recv(msg, src=peer)
                t_b = time.perf_counter()
                best = min(best, (t_b - t_a, msg.item() - (t_a + t_b) / 2))
            elif rank == peer:
                dist.recv(msg, src=0)
                msg.fill_(time.perf_counter())
                dist.send(msg, dst=0)
        if rank == 0:
            offsets[peer] = best[1]
    dist.broadcast(offsets, src=0)
    return float(offsets[rank])


if __name__ == "__main__":
    leave(main())
