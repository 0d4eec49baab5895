"""Jobs per second and submit-to-succeeded latency with 1 and 2 ``planner worker`` processes.

One API replica that only queues (``PLANNER_RUN_JOBS=false``) and N workers run as separate
processes on a fresh PostgreSQL database; the benchmark submits ``--jobs`` plan jobs (each a
distinct small search) as fast as one client can, waits for all of them, and reads the jobs'
own timestamps: throughput is jobs over the span from the first submission to the last
outcome, latency is each job's ``finished_at - created_at``. The machine's cores bound the
gain from a second worker (a plan search is CPU work): read the table with ``nproc`` beside it.

    python benchmarks/jobs_throughput.py [--server postgresql+psycopg://postgres@127.0.0.1/postgres]
        [--jobs 100] [--workers 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.db import jobs as jobs_table  # noqa: E402
from api.db import make_engine  # noqa: E402
from api.live import LiveServer  # noqa: E402
from api.store import ACTIVE_STATES, job_counts  # noqa: E402

DEFAULT_SERVER = os.environ.get("PLANNER_TEST_DATABASE_URL",
                                "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def plan_job(i: int) -> dict:
    return {"kind": "plan", "request": {
        "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
        "training": {"global_batch_size": 8 * (i + 1), "seq_length": 2048},
        "search": {"top_k": 1}}}


def _admin(server: str):
    import psycopg

    return psycopg.connect(server.replace("postgresql+psycopg://", "postgresql://"),
                           autocommit=True)


def fresh_database(server: str) -> tuple[str, str]:
    name = "planner_bench_" + uuid.uuid4().hex[:10]
    with _admin(server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server.rpartition('/')[0]}/{name}", name


def drop_database(server: str, name: str) -> None:
    with _admin(server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(server: str, workers: int, jobs: int, poll_s: float, logs: Path) -> dict:
    url, name = fresh_database(server)
    procs: list[LiveServer] = []
    try:
        api = LiveServer(url, env={"PLANNER_RUN_JOBS": "false"}, log=logs / "api.log").start()
        procs.append(api)
        for i in range(workers):
            procs.append(LiveServer(url, env={"PLANNER_JOB_POLL_S": str(poll_s)},
                                    log=logs / f"worker{i}.log", command="worker").start())
        engine = make_engine(url)
        with api.client() as c:
            for i in range(jobs):
                r = c.post("/v1/jobs", json=plan_job(i))
                r.raise_for_status()
        deadline = time.monotonic() + 30 + 5 * jobs
        while left := sum(job_counts(engine=engine).get(s, 0) for s in ACTIVE_STATES):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{left} jobs unfinished")
            time.sleep(0.2)
        with engine.connect() as conn:
            rows = conn.execute(sa.select(jobs_table.c.state, jobs_table.c.created_at,
                                          jobs_table.c.started_at, jobs_table.c.finished_at,
                                          jobs_table.c.owner)).all()
        engine.dispose()
    finally:
        for p in reversed(procs):
            p.stop()
        drop_database(server, name)
    created = [r.created_at for r in rows]
    finished = [r.finished_at for r in rows]
    latency = sorted((f - c).total_seconds() for c, f in zip(created, finished, strict=True))
    span = (max(finished) - min(created)).total_seconds()
    run = [(r.finished_at - r.started_at).total_seconds() for r in rows]
    # Per worker process (host:pid of the owner), from one job's end to its next job's start.
    by_worker: dict[str, list] = {}
    for r in rows:
        by_worker.setdefault(":".join(r.owner.split(":")[:2]), []).append(r)
    gaps = []
    for done in by_worker.values():
        order = sorted(done, key=lambda r: r.started_at)
        gaps += [(b.started_at - a.finished_at).total_seconds()
                 for a, b in zip(order, order[1:], strict=False)]
    return {
        "workers": workers, "jobs": len(rows),
        "succeeded": sum(r.state == "succeeded" for r in rows),
        "jobs_per_s": round(len(rows) / span, 2), "span_s": round(span, 2),
        "latency_p50_s": round(statistics.median(latency), 3),
        "latency_p95_s": round(latency[max(0, round(0.95 * len(latency)) - 1)], 3),
        "latency_max_s": round(latency[-1], 3),
        "run_p50_s": round(statistics.median(run), 3),
        "gap_p50_ms": round(1e3 * statistics.median(gaps), 1) if gaps else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=DEFAULT_SERVER,
                    help="PostgreSQL URL whose server gets a throw-away database per run")
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--poll-s", type=float, default=1.0,
                    help="the workers' PLANNER_JOB_POLL_S (the setting's default: 1.0)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as logs:
        for n in args.workers:
            results.append(run(args.server, n, args.jobs, args.poll_s, Path(logs)))
    print(f"{'workers':>7} {'jobs':>5} {'ok':>5} {'jobs/s':>7} {'p50 s':>7} {'p95 s':>7} "
          f"{'max s':>7} {'run s':>7} {'gap ms':>7}   (cpus: {os.cpu_count()}; latency is "
          f"submit to outcome, run one job's search, gap a worker's idle time between jobs)")
    for r in results:
        print(f"{r['workers']:>7} {r['jobs']:>5} {r['succeeded']:>5} {r['jobs_per_s']:>7} "
              f"{r['latency_p50_s']:>7} {r['latency_p95_s']:>7} {r['latency_max_s']:>7} "
              f"{r['run_p50_s']:>7} {r['gap_p50_ms']:>7}")
    if args.json:
        args.json.write_text(json.dumps({"cpus": os.cpu_count(), "poll_s": args.poll_s,
                                         "results": results}, indent=1))
    return 0 if all(r["succeeded"] == r["jobs"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
