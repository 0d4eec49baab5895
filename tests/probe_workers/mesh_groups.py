"""A probe worker that builds the step worker's device-mesh groups for several plans on 4
gloo ranks and writes, from rank 0, every rank's groups (gathered) for the test to compare with
``planner.validation.schedule.rank_groups``."""
import argparse
import json
from datetime import timedelta

import torch.distributed as dist

from planner.probe.step_worker import mesh_groups

# (tp, cp, dp, pp, ep, etp, dpr, cpa) on 4 ranks
PLANS = [(2, 1, 2, 1, 1, 1, 1, 1), (1, 2, 1, 2, 1, 1, 1, 1), (2, 1, 1, 2, 1, 1, 1, 1),
         (1, 1, 4, 1, 2, 1, 1, 1), (2, 1, 2, 1, 2, 2, 1, 1), (1, 1, 2, 2, 2, 1, 1, 1),
         (1, 2, 2, 1, 4, 1, 1, 1), (1, 1, 4, 1, 1, 1, 2, 1), (1, 1, 4, 1, 2, 1, 2, 1),
         (1, 2, 2, 1, 1, 1, 2, 1), (2, 1, 2, 1, 1, 1, 2, 1), (1, 4, 1, 1, 1, 1, 1, 2),
         (1, 4, 1, 1, 2, 1, 1, 2)]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--progress")
    args = ap.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    mine = []
    for plan in PLANS:
        groups, chain = mesh_groups(dist, "cpu", *plan)
        mine.append({"groups": {k: g.ranks for k, g in groups.items()}, "pp": chain,
                     "handles": {k: g.handle is not None for k, g in groups.items()}})
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    if dist.get_rank() == 0:
        with open(args.out, "w") as fh:
            json.dump({"plans": PLANS, "ranks": every}, fh)
    dist.destroy_process_group()
