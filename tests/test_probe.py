"""Probe jobs for real on this machine: a 4-rank gloo sweep, failures, timeouts, a trace."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.calibration.trace import calibration_from_trace, read_trace
from planner.cli.main import app
from planner.probe.local import ProbeError, run_module

runner = CliRunner()
GLOO_OPS = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
            "scatter", "gather", "send_recv"}


def test_four_rank_gloo_sweep_of_every_collective(tmp_path):
    plot = tmp_path / "fits.svg"
    res = runner.invoke(app, ["calibrate", "run", "--nproc", "4", "--backend", "gloo",
                              "--timeout", "110", "--budget-s", "0", "--min-batch-ms", "2",
                              "--repeats", "5", "--json", "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert cal["source"] == "sweep" and cal["backend"] == "gloo"
    fitted = {(f["op"], f["group_size"]) for f in cal["fits"]}
    # Every collective gloo supports, on the world (4) and on 2 ranks (send_recv: 2 only).
    assert {op for op, _ in fitted} | {u.split()[0] for u in cal["unsupported"]} == GLOO_OPS
    assert ("all_reduce", 4) in fitted and ("all_reduce", 2) in fitted
    for f in cal["fits"]:
        assert f["quality"] in ("good", "poor") and f["samples"] >= 3
        assert f["latency_us"] >= 0 and f["bandwidth_gb_per_s"] > 0
        assert 0 <= f["median_rel_err"] <= f["max_rel_err"]
    assert all(s["predicted_us"] > 0 for s in cal["samples"])
    assert plot.read_text().startswith("<svg")


def test_adaptive_passes_report_the_median_and_its_interval():
    """With a budget the sweep makes several passes over the sizes (shuffled), keeps the
    median of every batch of a size, and reports its 95% interval; within the budget."""
    from planner.probe.sweep import run_sweep

    cal = run_sweep(2, ops=["all_reduce"], group_sizes=[2], sizes=(4096, 262144, 4194304),
                    repeats=2, budget_s=6, min_batch_ms=5, timeout_s=120)
    assert [f.op for f in cal.fits] == ["all_reduce"]
    for smp in cal.samples:
        assert smp.repeats >= 4                    # at least two passes of two batches
        assert smp.ci_low_us <= smp.time_us <= smp.ci_high_us
    took = float(cal.notes[-1].split(" took ")[1].split(" s")[0])
    assert took < 6 + 10


def test_a_failing_rank_is_reported_with_its_message():
    with pytest.raises(ProbeError, match="rank one cannot find its GPU"):
        run_module(2, "tests.probe_workers.crash", [], timeout_s=60)


def test_a_hanging_job_is_killed_at_its_timeout(tmp_path):
    with pytest.raises(ProbeError, match="timed out after 8 s"):
        run_module(2, "tests.probe_workers.hang", [], timeout_s=8,
                   env={"PROBE_PID_DIR": str(tmp_path)})
    pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid")]
    assert len(pids) == 2                       # both ranks had started
    for pid in pids:                            # and the launcher killed them all
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_trace_reader_on_a_real_gloo_step(tmp_path):
    # The same step, keeping the trace: run the worker with an --out of our own.
    import subprocess
    import sys

    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         "--max-restarts=0", "-m", "tests.probe_workers.traced_step", "--out", str(out)],
        capture_output=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = Path(json.loads(out.read_text())["trace"])
    summary = read_trace(trace.read_bytes())
    assert summary.backend == "gloo" and summary.world_size == 2
    assert summary.compute_us > 0 and summary.comm_us > 0
    assert 0.0 <= summary.overlap_fraction <= 1.0
    assert set(summary.comm_by_op_us) == {"all_reduce"}
    sizes = sorted({s.message_bytes for s in summary.samples})
    assert sizes == [4.0 * n for n in (2**12, 2**14, 2**16, 2**18)]
    cal = calibration_from_trace(summary)
    (fit,) = cal.fits
    assert fit.op == "all_reduce" and fit.group_size == 2 and fit.samples == 8
    res = runner.invoke(app, ["calibrate", "import-trace", str(trace), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["source"] == "trace"


def test_nccl_trace_kernels_sizes_and_overlap():
    events = [
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)",
         "ts": 50, "dur": 100},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(x)",
         "ts": 300, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 40, "dur": 2,
         "args": {"Collective name": "allreduce", "In msg nelems": 1048576,
                  "Out msg nelems": 1048576, "Group size": 8, "dtype": "BFloat16"}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 290, "dur": 2,
         "args": {"Collective name": "_allgather_base", "In msg nelems": 131072,
                  "Out msg nelems": 1048576, "Group size": 8, "dtype": "BFloat16"}},
    ]
    s = read_trace({"traceEvents": events, "distributedInfo": {"backend": "nccl",
                                                               "world_size": 8}})
    assert s.compute_us == 100 and s.comm_us == 140
    assert s.overlap_fraction == pytest.approx(50 / 140)
    assert [(x.op, x.group_size, x.message_bytes, x.time_us) for x in s.samples] == [
        ("all_reduce", 8, 2097152.0, 100), ("all_gather", 8, 2097152.0, 40)]


def test_import_nccl_tests_cli(tmp_path):
    from tests.nccl_logs import make_log

    text, _, _ = make_log()
    log = tmp_path / "all_reduce.log"
    log.write_text(text)
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(log), "--json"])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert cal["source"] == "nccl-tests" and cal["fits"][0]["op"] == "all_reduce"
    assert cal["fits"][0]["segments"]
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(log)])
    assert res.exit_code == 0 and "all_reduce" in res.stdout
    log.write_text(text.replace("  1024  ", "  1024 oops "))
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(log)])
    assert res.exit_code == 2 and "line" in res.stderr
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(tmp_path / "none.log")])
    assert res.exit_code == 2 and "cannot read" in res.stderr
    res = runner.invoke(app, ["calibrate", "run", "--nproc", "2", "--ops", "allreduce"])
    assert res.exit_code == 2 and "unknown collective" in res.stderr


def test_cli_lists_calibrate_commands():
    res = runner.invoke(app, ["calibrate", "--help"])
    assert res.exit_code == 0
    for cmd in ("run", "import-nccl-tests", "import-trace"):
        assert cmd in res.stdout


def test_cluster_sweep_jobs_are_written_and_submitted(tmp_path, monkeypatch):
    import subprocess

    import yaml

    from planner.launch.context import LaunchShape
    from planner.probe.remote import submit, write_sweep_job
    from planner.probe.sweep import sweep_args

    shape = LaunchShape(nnodes=3, nproc_per_node=8, job_name="planner-sweep")
    args = sweep_args(backend="nccl", sizes=(1024, 1048576))
    sb = write_sweep_job("slurm", shape, args, "/shared/result.json", tmp_path)
    subprocess.run(["bash", "-n", str(sb)], check=True, timeout=30)
    text = sb.read_text()
    assert "#SBATCH --nodes=3" in text and "#SBATCH --gpus-per-node=8" in text
    assert "-m planner.probe.sweep_worker --backend nccl --sizes 1024,1048576" in text
    assert text.rstrip().endswith("--out /shared/result.json")
    pj = yaml.safe_load(write_sweep_job("kubernetes", shape, args, "/shared/r.json",
                                        tmp_path).read_text())
    assert pj["kind"] == "PyTorchJob" and pj["apiVersion"] == "kubeflow.org/v1"
    specs = pj["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    c = specs["Worker"]["template"]["spec"]["containers"][0]
    assert c["name"] == "pytorch" and c["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "--nnodes=3" in c["command"] and "planner.probe.sweep_worker" in c["command"]
    # Without sbatch on PATH: instructions; with one: its job id.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "not installed" in submit("slurm", sb)
    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\necho 4242\n")
    fake.chmod(0o755)
    assert submit("slurm", sb) == "submitted: 4242"


def test_import_sweep_cli(tmp_path):
    raw = {"backend": "nccl", "world_size": 8, "hosts": ["a"], "unsupported": [],
           "seconds": 12.0,
           "samples": [{"op": "all_reduce", "group_size": 8, "tier": "intra_node",
                        "message_bytes": m, "time_us": 10 + m / 100e3}
                       for m in (4096, 65536, 1048576, 16777216)]}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(raw))
    res = runner.invoke(app, ["calibrate", "import-sweep", str(path), "--json"])
    assert res.exit_code == 0, res.output
    fit = json.loads(res.stdout)["fits"][0]
    assert fit["latency_us"] == pytest.approx(10, rel=0.01)
    assert fit["bandwidth_gb_per_s"] == pytest.approx(100, rel=0.01)
    path.write_text("{}")
    res = runner.invoke(app, ["calibrate", "import-sweep", str(path)])
    assert res.exit_code == 2 and "not a sweep result" in res.stderr


def test_step_worker_groups_come_from_named_mesh_dimensions():
    """The step worker's groups (a dense (pp, dp, cp, tp) mesh and an expert (pp, edp, ep,
    etp) mesh on 4 gloo ranks) are the groups ``rank_groups`` lists in Megatron's order, the
    folded expert groups included, under hybrid sharding one replica's shard groups and the
    replicas' groups, and under hierarchical context parallelism the all-to-all's groups of
    consecutive CP ranks and the ring's strided ones; a group of one rank has no process
    group."""
    from planner.validation.schedule import rank_groups

    got = run_module(4, "tests.probe_workers.mesh_groups", [], timeout_s=90)
    for i, plan in enumerate(got["plans"]):
        want = rank_groups(*plan)
        for rank, per_plan in enumerate(got["ranks"]):
            mine = per_plan[i]
            for kind, ranks in mine["groups"].items():
                assert ranks == next(g for g in want[kind] if rank in g), (plan, rank, kind)
                assert mine["handles"][kind] == (len(ranks) > 1)
            assert mine["pp"] == next(g for g in want["pp"] if rank in g)
