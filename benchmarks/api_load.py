"""Load on the live service: requests/s and p50/p99 latency at 1, 16 and 64 concurrent clients.

Starts `planner serve` (SQLite in a temporary folder) in a child process, then drives it from
this process over loopback with asyncio clients for a fixed time per cell:
- GET /healthz (the floor: the framework and the network stack);
- POST /v1/estimates, rotating over 8 different plans of llama3-8b / llama3-70b (after the
  first round these are answered from the service's estimate cache, as repeated scheduler
  queries are);
- POST /v1/estimates, new requests every time (a fresh global batch each: computed);
- POST /v1/plans, new searches (every request differs: llama3-8b on 1 to 4 DGX H100 nodes,
  a fresh global batch each time);
- POST /v1/plans, repeated requests (answered from the store after the first).
Both processes share this machine's cores, so the numbers are a floor for a real deployment.

    python benchmarks/api_load.py [--seconds 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from api.live import live_server

CONCURRENCY = (1, 16, 64)

ESTIMATES = [
    {"model": {"preset": m}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
     "training": {"global_batch_size": 512, "seq_length": 4096},
     "plan": {"dp": 32 // (tp * pp), "tp": tp, "pp": pp, "micro_batch_size": 1,
              "recompute": "selective", "zero_stage": 1}}
    for m in ("llama3-8b", "llama3-70b") for tp, pp in ((8, 1), (8, 2), (4, 2), (8, 4))
]


def plan_body(i: int, repeat: bool) -> dict:
    nodes = 1 + i % 4
    gbs = 256 if repeat else 8 * nodes * (1 + i // 4)
    return {"model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
            "training": {"global_batch_size": gbs, "seq_length": 4096},
            "search": {"top_k": 3}}


async def drive(base: str, kind: str, clients: int, seconds: float, counter) -> dict:
    lat: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        async def worker():
            nonlocal errors
            while time.perf_counter() < stop:
                i = next(counter)
                t = time.perf_counter()
                if kind == "healthz":
                    r = await client.get("/healthz")
                elif kind == "estimates":
                    r = await client.post("/v1/estimates", json=ESTIMATES[i % len(ESTIMATES)])
                elif kind == "estimates-new":
                    body = ESTIMATES[i % len(ESTIMATES)]
                    body = {**body, "training": {**body["training"],
                                                 "global_batch_size": 64 * (1 + i % 100_000)}}
                    r = await client.post("/v1/estimates", json=body)
                else:
                    r = await client.post("/v1/plans", json=plan_body(i, kind == "plans-repeat"))
                lat.append(time.perf_counter() - t)
                if r.status_code >= 400:
                    errors += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    ms = np.array(lat) * 1e3
    return {"endpoint": kind, "clients": clients, "requests": len(lat), "errors": errors,
            "rps": round(len(lat) / wall, 1), "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each cell")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    counter = itertools.count()
    with tempfile.TemporaryDirectory() as tmp, \
            live_server(f"sqlite:///{tmp}/load.db", env={"PLANNER_MAX_CONCURRENT_SOLVES": "2"}) as srv:
        for kind in ("healthz", "estimates", "estimates-new", "plans-new", "plans-repeat"):
            asyncio.run(drive(srv.url, kind, 4, 0.5, counter))     # warm-up
            for clients in CONCURRENCY:
                rows.append(asyncio.run(drive(srv.url, kind, clients, args.seconds, counter)))
    head = f"{'endpoint':<14}{'clients':>8}{'requests':>10}{'errors':>8}{'req/s':>9}" \
           f"{'p50 ms':>9}{'p99 ms':>9}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['endpoint']:<14}{r['clients']:>8}{r['requests']:>10}{r['errors']:>8}"
              f"{r['rps']:>9.1f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
    by = {(r["endpoint"], r["clients"]): r for r in rows}
    ratios = {c: by["estimates", c]["rps"] / by["healthz", c]["rps"] for c in CONCURRENCY}
    print("\nestimates / healthz throughput: "
          + ", ".join(f"{c} clients {ratios[c]:.2f}" for c in CONCURRENCY))
    errors = sum(r["errors"] for r in rows)
    print(f"errors: {errors}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "estimate_to_healthz": ratios}, indent=1))
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
