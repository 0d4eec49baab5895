"""A torch.distributed program that runs one plan's training-step pattern and times it.

Groups are built in Megatron-LM's order (tp innermost, then cp, dp, pp). Each stage runs the
1F1B schedule: warm-up forwards, one forward / one backward, drain; a forward receives the
previous stage's activations and sends its own on, a backward the same for gradients; every
layer runs its compute (the linear GEMMs and the attention core's batched GEMMs with the
plan's per-GPU shapes; backward twice the forward, plus the forward again under full
recompute), its TP collectives (the share TP communication overlap hides started before the
compute and waited for after it, the rest after it) and its context-parallel ring
exchanges with the plan's message sizes, and ZeRO-3's gathers (the next layer's prefetched
while this one computes) and gradient reduce-scatters (asynchronous); after the
micro-batches, the data-parallel buckets.

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

The pieces: ``Kernels`` (the compute, built from the pattern and benchmarked), ``Comms`` (the
collectives on this rank's ``Group``s, with buffers of their true sizes), ``Recorder`` (the
calls' stamps) and ``ProbeStep`` (one step's schedule over them); ``main`` wires them, runs
the warm-up and the measured steps, and gathers the results on rank 0. The groups come from
named device-mesh dimensions (``mesh_groups``): a dense mesh (pp, dpr, dp, cp, tp) and an
expert mesh (pp, dpr, edp, ep, etp) over the same ranks, for the expert groups Megatron-Core
folds into dp x cp x tp (dpr: hybrid sharding's replicas, 1 without).

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
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

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


class Group(NamedTuple):
    """One process group this rank belongs to."""

    handle: Any              # the torch.distributed group; None for a group of one rank
    size: int
    key: str                 # "g:0,1,2,3": names the group in the recorded events
    ranks: list[int]


class Recorder:
    """Every communication call's entry and exit on a clock aligned to rank 0's, numbered per
    group or pair (every member counts the same calls), for ``planner.validation.transfers``;
    and, on rank 0 when tracing, named ranges in the measured trace."""

    def __init__(self, rank: int, offset: float, tracing: bool) -> None:
        self.rank, self.offset, self.tracing = rank, offset, tracing
        self.events: list[list] = []
        self.seq: dict[str, int] = defaultdict(int)
        self.on = False                       # off during warm-up

    def span(self, name: str):
        if self.tracing and self.on:
            from torch.profiler import record_function

            return record_function(name)
        return contextlib.nullcontext()

    def ticket(self, key: str) -> int:
        self.seq[key] += 1
        return self.seq[key] - 1

    def record(self, component: str, op: str, nbytes: float, key: str, role: str, t0: float,
               t1: float) -> None:
        n = self.ticket(key)
        if self.on:
            self.events.append([self.rank, component, op, nbytes, key, n, role,
                                t0 - self.offset, t1 - self.offset])


@dataclass
class Kernels:
    """The compute of a layer, of a MoE layer and of the output layer as callables on
    preallocated tensors, and their benchmarked seconds."""

    layer: list[Callable[[], object]]
    moe: list[Callable[[], object]]
    head: list[Callable[[], object]]
    flops: float                 # of the GEMMs benchmarked, to report the matmul rate
    stream_bytes: float          # moved by the memory-bound stand-in of a layer
    layer_s: float = 0.0
    moe_s: float = 0.0
    head_s: float = 0.0
    stream_s: float = 0.0
    rate: float = 0.0            # achieved matmul FLOP/s on these shapes

    @classmethod
    def of(cls, torch, pat: StepPattern, last_stage: bool, device) -> Kernels:
        """A layer's GEMMs, its attention core and one streaming add moving its memory-bound
        kernels' bytes; a MoE layer's own GEMMs (attention, router, shared and local experts);
        the head's GEMM on the last stage. Local experts launched one GEMM each
        (``expert_launch`` 'per_expert', Transformer Engine's GroupedLinear) run as that many
        GEMMs, else as one batched GEMM."""
        shapes = [(1, mm, n, k) for mm, n, k in pat["gemms"]] + [tuple(b) for b in
                                                                   pat.get("attn_bmm", [])]
        experts = [tuple(b) for b in pat.get("expert_bmm", [])]
        if pat.get("expert_launch") == "per_expert":
            experts = [(1, mm, n, k) for b, mm, n, k in experts for _ in range(b)]
        moe_shapes = ([(1, mm, n, k) for mm, n, k in pat.get("moe_gemms", [])]
                      + [tuple(b) for b in pat.get("attn_bmm", [])] + experts)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(pat.get("dtype", "fp32"),
                                                                   torch.float32)
        size = torch.tensor([], dtype=dtype).element_size()
        out = cls(layer=[], moe=[], head=[], flops=0.0, stream_bytes=0.0)
        for kernels, kind_shapes in ((out.layer, shapes), (out.moe, moe_shapes)):
            for b, mm, n, k in kind_shapes:
                x = torch.randn(b, mm, k, device=device, dtype=dtype)
                w = torch.randn(b, k, n, device=device, dtype=dtype)
                kernels.append(functools.partial(torch.bmm, x, w))
                out.flops += 2 * b * mm * n * k
        if pat.get("elementwise"):
            x, y, z = (torch.randn(pat["elementwise"], device=device, dtype=dtype)
                       for _ in range(3))
            out.layer.append(functools.partial(torch.add, x, y, out=z))
            out.stream_bytes = 3 * size * float(pat["elementwise"])
        head = pat.get("head_gemm")
        if last_stage and head:
            hm, hn, hk = head
            x = torch.randn(hm, hk, device=device, dtype=dtype)
            w = torch.randn(hk, hn, device=device, dtype=dtype)
            out.head.append(functools.partial(torch.mm, x, w))
            out.flops += 2 * hm * hn * hk
        return out

    def benchmark(self, rank: int, world: int, serial: bool, sync) -> None:
        """Time every kernel (``_benchmark``) and derive the per-layer seconds and rate."""
        bench = _benchmark(self.layer + self.moe + self.head, rank, world, serial=serial,
                           sync=sync)
        nl, nm = len(self.layer), len(self.moe)
        self.layer_s, self.head_s = sum(bench[:nl]), sum(bench[nl + nm:])
        self.stream_s = bench[nl - 1] if self.stream_bytes else 0.0
        if self.moe and self.stream_bytes:     # the memory-bound kernels run in every layer
            self.moe.append(self.layer[-1])
        self.moe_s = sum(bench[nl:nl + nm]) + self.stream_s
        self.rate = self.flops / max(sum(bench) - self.stream_s, 1e-12)


class Comms:
    """The plan's collectives on this rank's groups, with buffers of their true sizes (each op
    its own, so asynchronous calls in flight never share one), recorded as they run."""

    def __init__(self, torch, dist, rank: int, device, groups: dict[str, Group],
                 recorder: Recorder, sync: Callable[[], None]) -> None:
        self.torch, self.dist, self.rank, self.device = torch, dist, rank, device
        self.groups, self.rec, self.sync = groups, recorder, sync
        self.bufs: dict[tuple, Any] = {}
        self.pairs: dict[int, tuple[Any, Any]] = {}   # all_to_all out / in
        self.watching: queue.Queue = queue.Queue()
        threading.Thread(target=self._watcher, daemon=True).start()

    def buf(self, nbytes: float, tag: str, div: int = 1):
        key = (int(nbytes), tag, div)
        if key not in self.bufs:
            self.bufs[key] = self.torch.ones(max(div, int(nbytes) // 4 // div * div) // div,
                                             device=self.device)
        return self.bufs[key]

    def issue(self, op: str, nbytes: float, g: Group, async_op: bool) -> list:
        """Start ``op`` on the group; its works (None when synchronous)."""
        dist, group, size = self.dist, g.handle, g.size
        if op in ("all_gather", "reduce_scatter"):    # whole shards: a multiple of the group
            nbytes = 4 * size * max(1, int(nbytes) // 4 // size)
        if op == "all_reduce":
            return [dist.all_reduce(self.buf(nbytes, "ar"), group=group, async_op=async_op)]
        if op == "all_gather":
            return [dist.all_gather_into_tensor(self.buf(nbytes, "ag-full"),
                                                self.buf(nbytes, "ag-part", size), group=group,
                                                async_op=async_op)]
        if op == "reduce_scatter":
            return [dist.reduce_scatter_tensor(self.buf(nbytes, "rs-part", size),
                                               self.buf(nbytes, "rs-full"), group=group,
                                               async_op=async_op)]
        if op == "all_to_all":   # token dispatch or combine: an equal share to every member
            n = max(size, int(nbytes) // 4 // size * size)
            if n not in self.pairs:
                self.pairs[n] = (self.torch.ones(n, device=self.device),
                                 self.torch.empty(n, device=self.device))
            out, inp = self.pairs[n]
            return [dist.all_to_all_single(out, inp, group=group, async_op=async_op)]
        if op == "ring":      # one ring-attention step: K,V to the next, from the previous
            i = g.ranks.index(self.rank)
            return dist.batch_isend_irecv([
                dist.P2POp(dist.isend, self.buf(nbytes, "ring-out"), g.ranks[(i + 1) % size],
                           group),
                dist.P2POp(dist.irecv, self.buf(nbytes, "ring-in"), g.ranks[(i - 1) % size],
                           group)])
        raise ValueError(f"unknown collective {op!r}")

    def collective(self, component: str, op: str, nbytes: float, kind: str) -> None:
        """Run ``op`` on this rank's ``kind`` group and wait for it."""
        g = self.groups[kind]
        if g.size == 1:
            return
        with self.rec.span(f"{component} {op}"):
            t0 = time.perf_counter()
            for work in self.issue(op, nbytes, g, async_op=False):
                if work is not None:
                    work.wait()
            self.sync()
            self.rec.record(component, "send_recv" if op == "ring" else op,
                            float(int(nbytes) // 4 * 4), g.key, "c", t0, time.perf_counter())

    def launch(self, component: str, op: str, nbytes: float, kind: str):
        """Start a collective without waiting (ZeRO-3's prefetched gathers and its gradient
        reduce-scatters, as DeepSpeed and FSDP issue them); its completion is stamped when it
        happens, so its transfer is measured while compute runs beside it. Returns something
        to wait on."""
        g = self.groups[kind]
        if g.size == 1:
            return None
        rec = self.rec
        n, recording, t0 = rec.ticket(g.key), rec.on, time.perf_counter()
        (work,) = self.issue(op, nbytes, g, async_op=True)

        def done(_fut) -> None:
            if recording:
                rec.events.append([self.rank, component, op, float(int(nbytes) // 4 * 4), g.key,
                                   n, "c", t0 - rec.offset, time.perf_counter() - rec.offset])

        try:   # the chained future completes once the stamp is taken
            return work.get_future().then(done)
        except RuntimeError:   # gloo's tensor collectives have no future: a watcher stamps
            self.watching.put((work, done))
            return work

    def _watcher(self) -> None:
        while (item := self.watching.get()) is not None:
            work, done = item
            work.wait()
            done(None)
            self.watching.task_done()


class ProbeStep:
    """One training step of the plan on this rank: the pipeline schedule of its stage, each
    layer's compute and collectives, ZeRO-3's gathers and reduce-scatters, the pipeline
    send/recv, then the data-parallel buckets."""

    def __init__(self, torch, dist, pat: StepPattern, rank: int, stage: int, chain: list[int],
                 kernels: Kernels, comms: Comms, mode: str, sync: Callable[[], None],
                 device) -> None:
        self.dist, self.pat, self.rank, self.stage, self.chain = dist, pat, rank, stage, chain
        self.k, self.comms, self.rec, self.mode, self.sync = kernels, comms, comms.rec, mode, sync
        self.compute_s = 0.0
        self.pp, self.vpp = pat["pp"], pat.get("vpp", 1)
        self.order = pipeline_order(self.pp, stage, pat["m"], self.vpp)
        # Virtual stage i = chunk * pp + stage; its neighbours i - 1 and i + 1 wrap around the
        # pipeline's ranks (the last stage's chunk c feeds the first stage's chunk c + 1).
        self.chunk_layers = pat["layers"][stage] // self.vpp
        self.last = self.pp * self.vpp - 1
        self.act = torch.ones(max(1, int(pat["pp_bytes"]) // 4), device=device)
        self.recv_act = torch.empty_like(self.act)
        self.pp_bytes = float(self.act.numel() * 4)
        self.share = pat.get("moe_share", 0.0)
        # [op, bytes, component(, group)]: the dense weights over "dp", a MoE model's experts
        # over "edp" (older patterns name no group: "dp").
        self.z3 = [(op, nbytes, comp, kind[0] if kind else "dp")
                   for op, nbytes, comp, *kind in pat["zero3"]]
        self.gather: list = []           # the next layer's prefetched gathers
        self.scatters: list = []         # gradient reduce-scatters in flight

    def compute(self, kernels: list[Callable[[], object]], seconds: float, times: int) -> None:
        t0 = time.perf_counter()
        with self.rec.span("compute"):
            if self.mode == "emulate":
                time.sleep(seconds * times)
            else:
                for _ in range(times):
                    for kernel in kernels:
                        kernel()
                self.sync()
        self.compute_s += time.perf_counter() - t0

    def _start(self, op_name: str) -> list:
        return [self.comms.launch(comp, op, nbytes, kind) for op, nbytes, comp, kind in self.z3
                if op == op_name]

    def gathered_weights(self, prefetch_next: bool) -> None:
        """Wait for this layer's weights (gathered now, or prefetched by the previous layer),
        then start gathering the next layer's."""
        works = self.gather or self._start("all_gather")
        with self.rec.span("zero_comm wait"):
            for work in works:
                if work is not None:
                    work.wait()
        self.gather = self._start("all_gather") if prefetch_next else []

    def layer(self, kind: str, index: int, prefetch_next: bool = False) -> None:
        pat, comms = self.pat, self.comms
        # The stage's MoE layers: round(share * layers) of them, spread evenly (the same on
        # every rank of a stage, so the EP groups' calls match).
        moe = (math.floor((index + 1) * self.share + 1e-9)
               > math.floor(index * self.share + 1e-9))
        if pat["zero3"]:   # the layer's weights (forward, and again for backward)
            self.gathered_weights(prefetch_next)
        times = 1 if kind == "F" else (3 if pat["recompute"] == "full" else 2)
        # The TP calls TP communication overlap hides (pattern "tp_beside": per op, the first so
        # many of the pass's) start before the compute and are waited for after it; the rest
        # after it.
        tp_ops = [(op, nbytes) for op, nbytes, calls in
                  (pat["tp_fwd"] if kind == "F" else pat["tp_bwd"]) for _ in range(calls)]
        left = dict(pat.get("tp_beside", {}).get(kind, {}))
        beside: list[tuple[str, float]] = []
        after: list[tuple[str, float]] = []
        for op, nbytes in tp_ops:
            (beside if left.get(op, 0) > 0 else after).append((op, nbytes))
            left[op] = left.get(op, 0) - 1
        works = [comms.launch("tp_comm", op, nbytes, "tp") for op, nbytes in beside]
        if moe:
            self.compute(self.k.moe, self.k.moe_s, times)
            for op, nbytes, calls, group_kind in (pat["ep_fwd"] if kind == "F"
                                                  else pat["ep_bwd"]):
                for _ in range(calls):
                    comms.collective("ep_comm", op, nbytes, group_kind)
        else:
            self.compute(self.k.layer, self.k.layer_s, times)
        with self.rec.span("tp_comm wait"):
            for work in works:
                if work is not None:
                    work.wait()
        for op, nbytes in after:
            comms.collective("tp_comm", op, nbytes, "tp")
        for entry in (pat.get("cp_fwd", []) if kind == "F" else pat.get("cp_bwd", [])):
            # [bytes, calls]: ring steps; [op, bytes, calls]: all-to-all context parallelism;
            # [op, bytes, calls, group]: the hierarchy's all-to-alls ("cpa") and ring ("cpr").
            op, nbytes, calls, group = (entry if len(entry) == 4 else (*entry, "cp")
                                        if len(entry) == 3 else ("ring", *entry, "cp"))
            for _ in range(calls):
                comms.collective("cp_comm", op, nbytes, group)
        if kind == "B" and pat["zero3"]:
            self.scatters += self._start("reduce_scatter")

    def run(self) -> None:
        dist, pp, rec = self.dist, self.pp, self.rec
        pending = []
        for kind, chunk, _ in self.order:
            v = chunk * pp + self.stage
            up, down = (v - 1, v + 1) if kind == "F" else (v + 1, v - 1)
            tag = 0 if kind == "F" else 1          # activations and gradients never mix
            if 0 <= up <= self.last:
                src = self.chain[up % pp]
                t0 = time.perf_counter()
                with rec.span("pp_comm recv"):
                    dist.recv(self.recv_act, src=src, tag=tag)
                    self.sync()
                rec.record("pp_comm", "send_recv", self.pp_bytes, f"p:{src}>{self.rank}:{tag}",
                           "r", t0, time.perf_counter())
            for i in range(self.chunk_layers):
                self.layer(kind, chunk * self.chunk_layers + i,
                           prefetch_next=i < self.chunk_layers - 1)
            if self.k.head and v == self.last:
                self.compute(self.k.head, self.k.head_s,
                             1 if kind == "F" else self.pat.get("head_bwd_passes", 2))
            if 0 <= down <= self.last:
                dst = self.chain[down % pp]
                t0 = time.perf_counter()
                pending.append(dist.isend(self.act, dst=dst, tag=tag))
                rec.record("pp_comm", "send_recv", self.pp_bytes, f"p:{self.rank}>{dst}:{tag}",
                           "s", t0, t0)
        for w in [*pending, *(w for w in self.scatters if w is not None)]:
            w.wait()
        self.scatters.clear()
        self.comms.watching.join()                 # every asynchronous call is stamped
        for op, nbytes, calls, comp, *group_kind in self.pat["dp_ops"]:
            for _ in range(calls):
                self.comms.collective(comp, op, nbytes, group_kind[0] if group_kind else "dp")


def mesh_groups(dist, device_type: str, tp: int, cp: int, dp: int, pp: int, ep: int = 1,
                etp: int = 1, dpr: int = 1, cpa: int = 1) -> tuple[dict[str, Group], list[int]]:
    """This rank's groups from named device-mesh dimensions (``init_device_mesh``), and its
    pipeline (the ranks of its (d, c, t) in every stage, first stage first).

    The dense mesh is (pp, dp, cp, tp) in Megatron-LM's order, tp innermost; the gradient
    reduction runs over dp and cp together (Megatron's dp-cp group), the mesh's (dp, cp)
    flattened as torchtitan's ParallelDims flattens it. The experts fold into each stage's
    tp * cp * dp ranks in Megatron-Core's expert order, which a second mesh over the same ranks
    names: (pp, edp, ep, etp), etp innermost (torchtitan also builds its MoE groups on a second
    mesh). Hybrid sharding splits dp into (dpr, dp / dpr), the replicas outermost, as
    torchtitan's HSDP mesh does (dp_replicate outside dp_shard): "dp" and "edp" are then one
    replica's ranks and "dpr" the replicas'. ``planner.validation.schedule.rank_groups`` lists
    the same groups (a test checks that they agree). Hierarchical context parallelism
    (``cpa`` > 1) splits cp into (cpr, cpa), cpa consecutive CP ranks innermost as
    Megatron-Core's ``create_hierarchical_groups`` groups them: "cpa" is the all-to-all's
    group, "cpr" the ring's, "cp" both flattened."""
    from torch.distributed.device_mesh import init_device_mesh

    dense = init_device_mesh(device_type, (pp, dpr, dp // dpr, cp // cpa, cpa, tp),
                             mesh_dim_names=("pp", "dpr", "dp", "cpr", "cpa", "tp"))
    fold = tp * cp * dp
    experts = init_device_mesh(device_type, (pp, dpr, fold // (ep * etp * dpr), ep, etp),
                               mesh_dim_names=("pp", "dpr", "edp", "ep", "etp"))
    handles = {"tp": dense.get_group("tp"),
               "cp": dense["cpr", "cpa"]._flatten("cp").get_group(),
               "cpa": dense.get_group("cpa"), "cpr": dense.get_group("cpr"),
               "dp": dense["dp", "cpr", "cpa"]._flatten("dp_cp").get_group(),
               "dpr": dense.get_group("dpr"),
               "ep": experts.get_group("ep"), "etp": experts.get_group("etp"),
               "edp": experts.get_group("edp")}
    mine: dict[str, Group] = {}
    for kind, handle in handles.items():
        ranks = dist.get_process_group_ranks(handle)
        mine[kind] = Group(handle if len(ranks) > 1 else None, len(ranks),
                           "g:" + ",".join(map(str, ranks)), ranks)
    return mine, dist.get_process_group_ranks(dense.get_group("pp"))


def _inject_fault(rank: int) -> None:
    fault, _, fault_rank = os.environ.get("PLANNER_PROBE_FAULT", "").partition(":")
    if fault and fault_rank == str(rank):
        if fault == "crash":
            print(f"injected fault: rank {rank} crashes", file=sys.stderr, flush=True)
            os._exit(7)
        if fault == "hang":
            time.sleep(10**6)


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

    tp, cp, dp, pp = pat["tp"], pat.get("cp", 1), pat["dp"], pat["pp"]
    if tp * cp * dp * pp != world:
        raise SystemExit(f"the plan needs {tp * cp * dp * pp} ranks, this job has {world}")
    mode = compute_mode(args.compute, int(os.environ.get("LOCAL_WORLD_SIZE", world)),
                        args.backend)
    stage = rank // (tp * cp * dp)
    groups, chain = mesh_groups(dist, device.type, tp, cp, dp, pp, pat.get("ep", 1),
                                pat.get("etp", 1), int(pat.get("dpr", 1)),
                                int(pat.get("cpa", 1)))

    recorder = Recorder(rank, _clock_offset(torch, dist, rank, world, device),
                        tracing=rank == 0 and bool(args.trace))
    kernels = Kernels.of(torch, pat, stage == pp - 1, device)
    kernels.benchmark(rank, world, serial=(mode == "emulate"), sync=sync)
    comms = Comms(torch, dist, rank, device, groups, recorder, sync)
    probe = ProbeStep(torch, dist, pat, rank, stage, chain, kernels, comms, mode, sync, device)

    if os.environ.get("PLANNER_PROBE_PID_DIR"):
        with open(os.path.join(os.environ["PLANNER_PROBE_PID_DIR"], f"rank{rank}.pid"), "w") as fh:
            fh.write(str(os.getpid()))
    for _ in range(args.warmup):
        probe.run()
    _inject_fault(rank)
    dist.barrier()
    probe.compute_s = 0.0
    recorder.on = True
    steps = []
    prof = None
    if rank == 0 and args.trace:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU])
    with prof if prof is not None else contextlib.nullcontext():
        for i in range(args.steps):
            dist.barrier()
            t0 = time.perf_counter()
            probe.run()
            steps.append(time.perf_counter() - t0)
            if rank == 0 and args.progress:
                with open(args.progress, "w") as fh:
                    json.dump({"done": i + 1, "total": args.steps}, fh)
    if prof is not None:
        prof.export_chrome_trace(args.trace)
    n = len(steps)
    row = {"rank": rank, "stage": stage, "step_time_s": sum(steps) / n,
           "compute": probe.compute_s / n, "matmul_flops_per_s": kernels.rate,
           "memory_bytes_per_s": (kernels.stream_bytes / kernels.stream_s
                                  if kernels.stream_s else None),
           "host": socket.gethostname()}
    gathered: list | None = [None] * world if rank == 0 else None
    dist.gather_object((row, recorder.events), gathered, dst=0)
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
                  "pp_comm": pipeline_transfer(tr.per_rank, rank_groups(tp, cp, dp, pp)["pp"],
                                               probe.vpp) / n,
                  "samples": mean_samples(tr.by_op), "clock_offset_s": recorder.offset}
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
