"""A small 'training step' (matmuls and collectives of several sizes) under torch.profiler;
rank 0 exports the Chrome trace and writes its path to --out."""
import json
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from planner.probe.worker_exit import leave

if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--out") + 1]
    dist.init_process_group("gloo")
    a = torch.randn(192, 192)
    bufs = [torch.ones(n) for n in (2**12, 2**14, 2**16, 2**18)]
    for b in bufs:      # warm-up, outside the trace
        dist.all_reduce(b)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            for b in bufs:
                _ = a @ a
                dist.all_reduce(b)
    if dist.get_rank() == 0:
        path = out + ".trace.json"
        prof.export_chrome_trace(path)
        with open(out, "w") as fh:
            json.dump({"trace": path}, fh)
    dist.barrier()      # no rank leaves while another still uses the group
    dist.destroy_process_group()
    leave(0)
