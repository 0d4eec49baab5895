# ruff: noqa: E501  (nccl-tests rows are wider than our line length)
"""nccl-tests logs for the calibration tests, written in nccl-tests' own row format from a
model shaped like NCCL's (three protocol lines, smooth switch-overs, measurement noise)."""

from __future__ import annotations

import numpy as np

HEADER = """# nThread 1 nGpus 1 minBytes 8 maxBytes {maxb} step: 2(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0
#
# Using devices
{ranks}#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def _fmt(x: float) -> str:
    if x < 1e4:
        return f"{x:.2f}"
    if x < 1e5:
        return f"{x:.1f}"
    return f"{x:.0f}"


def nccl_like_time_us(m: np.ndarray, lines, sharpness: float = 6.0) -> np.ndarray:
    """A soft minimum of alpha-beta lines (NCCL switches protocols; near a switch the two
    compete), in microseconds."""
    t = np.array([a + m / b for a, b in lines])          # seconds
    soft = -np.log(np.sum(np.exp(-sharpness * np.log(t)), axis=0)) / sharpness
    return np.exp(soft) * 1e6


def make_log(op="all_reduce", ranks=8, hosts=1, lines=((12e-6, 8e9), (18e-6, 60e9),
             (35e-6, 135e9)), max_pow=33, noise=0.02, seed=0, prefix="", old_format=False,
             chatter=True) -> tuple[str, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = np.array([2**k for k in range(3, max_pow + 1)], dtype=float)
    truth = nccl_like_time_us(sizes, lines)
    bus = {"all_reduce": 2 * (ranks - 1) / ranks, "all_gather": (ranks - 1) / ranks,
           "reduce_scatter": (ranks - 1) / ranks, "all_to_all": (ranks - 1) / ranks}.get(op, 1.0)
    per_node = ranks // hosts
    rank_lines = "".join(
        f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on {f'dgx-{r // per_node:02d}':>10s} "
        f"device {r % per_node:2d} [0x{r:02x}] NVIDIA A100-SXM4-80GB\n" for r in range(ranks))
    text = HEADER.format(maxb=int(sizes[-1]), ranks=rank_lines)
    if old_format:
        text = text.replace("    root", "")
    rows = []
    t_out_all, t_in_all = [], []
    for m, t in zip(sizes, truth, strict=True):
        t_out = t * (1 + rng.normal(0, noise))
        t_in = t * (1 + rng.normal(0, noise))
        t_out_all.append(t_out)
        t_in_all.append(t_in)
        count = int(m // 4)
        halves = []
        for tt in (t_out, t_in):
            algbw = m / tt / 1e3
            wrong = f"{2e-7:.0e}" if old_format else "0"
            halves.append(f"{_fmt(tt):>8s} {algbw:7.2f} {algbw * bus:7.2f} {wrong:>6s}")
        redop = "sum" if op in ("all_reduce", "reduce", "reduce_scatter") else "none"
        root = "" if old_format else f"{(0 if op in ('broadcast', 'reduce') else -1):7d}"
        rows.append(f"{int(m):12d} {count:13d} {'float':>9s} {redop:>7s} {root} "
                    f"{halves[0]} {halves[1]}")
        if chatter and m == 2**20:
            rows.append("dgx-00:1234:1234 [0] NCCL INFO comm 0x55d0 rank 0 nranks 8 - Init COMPLETE")
    avg = np.mean([m / t / 1e3 * bus for m, t in zip(sizes, truth, strict=True)])
    text += "\n".join(rows) + f"\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:.4f}\n#\n"
    text = f"$ mpirun -np {ranks} ./build/{op.replace('all_to_all', 'alltoall').replace('send_recv', 'sendrecv')}_perf -b 8 -e 8G -f 2 -g 1\n" + text
    if prefix:
        text = "\n".join(prefix + ln for ln in text.splitlines()) + "\n"
    return text, sizes, (np.array(t_out_all) + np.array(t_in_all)) / 2
