"""Reader of Chrome traces exported by ``torch.profiler`` from a training step.

Communication events: NCCL kernels (``ncclDevKernel_AllReduce_...``, ``ncclKernel_...``) whose
sizes and group come from the matching ``record_param_comms`` CPU events (``In msg nelems``,
``Out msg nelems``, ``Group size``, ``dtype``), in order, per collective; and gloo's
``gloo:<op>`` annotations (the work on gloo's own thread, with the input shapes), sized with
the process group of the trace's ``distributedInfo``. Compute: the non-NCCL GPU kernels, or on
a CPU-only trace the outermost ``aten::`` operators of the training threads. The summary gives
compute and communication time, communication by collective, and the fraction of
communication that ran while compute did; the collectives become calibration samples (full
buffers, nccl-tests convention).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

from planner.calibration.fit import fit_samples
from planner.calibration.model import Calibration, Sample

DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::half": 2, "half": 2,
               "float16": 2, "c10::bfloat16": 2, "bfloat16": 2, "int": 4, "long int": 8,
               "int64": 8, "int32": 4, "c10::float8_e4m3fn": 1, "byte": 1, "unsigned char": 1}
NCCL_OPS = {"allreduce": "all_reduce", "allgather": "all_gather",
            "reducescatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
            "sendrecv": "send_recv", "alltoall": "all_to_all"}
PARAM_COMMS = {"allreduce": "all_reduce", "all_reduce": "all_reduce",
               "allgather": "all_gather", "_allgather_base": "all_gather",
               "all_gather_into_tensor": "all_gather", "allgather_into_tensor_coalesced":
               "all_gather", "reduce_scatter": "reduce_scatter", "_reduce_scatter_base":
               "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
               "broadcast": "broadcast", "reduce": "reduce", "all_to_all": "all_to_all",
               "all_to_allv": "all_to_all", "alltoall_base": "all_to_all", "send": "send_recv",
               "recv": "send_recv", "gather": "gather", "scatter": "scatter"}
GLOO_OPS = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
            "allgather": "all_gather", "reduce_scatter": "reduce_scatter",
            "broadcast": "broadcast", "reduce": "reduce", "all_to_all": "all_to_all",
            "alltoall": "all_to_all", "alltoall_base": "all_to_all", "scatter": "scatter",
            "gather": "gather", "send": "send_recv", "recv": "send_recv"}
_NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


class TraceFormatError(ValueError):
    pass


@dataclass
class TraceSummary:
    backend: str
    world_size: int
    compute_us: float
    comm_us: float
    overlap_fraction: float
    comm_by_op_us: dict[str, float]
    samples: list[Sample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(iv: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in iv)


def _intersection(x: list[tuple[float, float]], y: list[tuple[float, float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        total += max(0.0, b - a)
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


def _elements(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _outermost(events: list[dict]) -> list[dict]:
    """Events not nested inside another event of the same thread."""
    by_tid: dict = defaultdict(list)
    for e in events:
        by_tid[e.get("pid"), e.get("tid")].append(e)
    out = []
    for evs in by_tid.values():
        end = -1.0
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            if e["ts"] >= end:
                out.append(e)
                end = e["ts"] + e["dur"]
    return out


def read_trace(data: bytes | str | dict) -> TraceSummary:
    try:
        doc = data if isinstance(data, dict) else json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"not JSON: {exc}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceFormatError("no 'traceEvents' list: export the trace with "
                               "torch.profiler's export_chrome_trace")
    info = doc.get("distributedInfo") or {}
    world = int(info.get("world_size") or 1)
    backend = str(info.get("backend") or "unknown")
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"
             and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
    notes: list[str] = []
    comm: list[tuple[str, dict, int, float]] = []   # (op, event, group size, bytes)
    kernels = [e for e in spans if e.get("cat") == "kernel"]
    nccl = [e for e in kernels if _NCCL_KERNEL.match(e.get("name", ""))]
    params: dict[str, list[dict]] = defaultdict(list)
    for e in spans:
        if e.get("name") == "record_param_comms":
            a = e.get("args", {})
            op = PARAM_COMMS.get(str(a.get("Collective name", "")).lower())
            if op:
                params[op].append(a)
    used: dict[str, int] = defaultdict(int)
    for e in sorted(nccl, key=lambda e: e["ts"]):
        kernel = _NCCL_KERNEL.match(e["name"])
        op = NCCL_OPS.get(kernel.group(1).lower()) if kernel else None
        if op is None:
            continue
        k = used[op]
        used[op] += 1
        if k >= len(params[op]):
            notes.append(f"{e['name'][:60]}: no record_param_comms event gives its size")
            continue
        a = params[op][k]
        nbytes = DTYPE_BYTES.get(str(a.get("dtype", "float")).lower(), 4)
        elems = max(int(a.get("In msg nelems", 0)), int(a.get("Out msg nelems", 0)))
        if op == "send_recv":
            elems = int(a.get("In msg nelems", 0)) or int(a.get("Out msg nelems", 0))
        p = 2 if op == "send_recv" else int(a.get("Group size", world) or world)
        comm.append((op, e, p, float(elems * nbytes)))
    for e in spans:
        name = e.get("name", "")
        if name.startswith("gloo:"):
            op = GLOO_OPS.get(name[5:].lower())
            if op is None:
                continue
            a = e.get("args", {})
            dims = (a.get("Input Dims") or [[0]])[0]
            elems = _elements(dims)
            nbytes = DTYPE_BYTES.get(str((a.get("Input type") or ["float"])[0]).lower(), 4)
            p = 2 if op == "send_recv" else world
            full = elems * (p if op == "all_gather" else 1)
            comm.append((op, e, p, float(full * nbytes)))
    if nccl or kernels:
        compute = [e for e in kernels if not _NCCL_KERNEL.match(e.get("name", ""))]
    else:
        comm_tids = {(e.get("pid"), e.get("tid")) for _, e, _, _ in comm}
        compute = _outermost([e for e in spans if e.get("cat") == "cpu_op"
                              and e.get("name", "").startswith("aten::")
                              and (e.get("pid"), e.get("tid")) not in comm_tids])
    comp_iv = _merge([(e["ts"], e["ts"] + e["dur"]) for e in compute])
    comm_iv = _merge([(e["ts"], e["ts"] + e["dur"]) for _, e, _, _ in comm])
    by_op: dict[str, float] = defaultdict(float)
    samples = []
    for op, e, p, size in comm:
        by_op[op] += e["dur"]
        if size > 0 and e["dur"] > 0 and p >= 2:
            samples.append(Sample(op=op, group_size=p, message_bytes=size, time_us=e["dur"]))
    comm_total = _length(comm_iv)
    if not comm:
        notes.append("no collective found (NCCL kernels with record_param_comms, or gloo:* "
                     "events)")
    return TraceSummary(
        backend=backend, world_size=world, compute_us=_length(comp_iv), comm_us=comm_total,
        overlap_fraction=_intersection(comm_iv, comp_iv) / comm_total if comm_total else 0.0,
        comm_by_op_us=dict(sorted(by_op.items())), samples=samples, notes=notes)


def calibration_from_trace(summary: TraceSummary) -> Calibration:
    fits, fitted, notes = fit_samples(summary.samples)
    notes = summary.notes + notes + [
        f"compute {summary.compute_us:.0f} us, communication {summary.comm_us:.0f} us, "
        f"{100 * summary.overlap_fraction:.0f}% of it overlapped with compute"]
    return Calibration(source="trace", backend=summary.backend, fits=fits, samples=fitted,
                       notes=notes)
