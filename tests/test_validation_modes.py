"""Sampled validation, cluster validation jobs (written, then read back) and the calibration a
validation feeds back."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from planner.search import PlanRequest
from planner.validation.sampled import measured_step, sampled_runs, stage_to_sample

ROOT = Path(__file__).resolve().parents[1]
# Two nodes of four: a dp=2, tp=2, pp=2 plan needs 8 ranks; the probe has 4.
EIGHT = {"model": {"name": "tiny-gpt", "num_layers": 4, "hidden_size": 128,
                   "num_attention_heads": 4, "vocab_size": 2048, "ffn_type": "gelu"},
         "cluster": {"preset": "local-cpu", "num_nodes": 2},
         "training": {"global_batch_size": 8, "seq_length": 128, "precision": "fp32"},
         "search": {"dp": 2, "tp": 2, "pp": 2, "cp": 1, "vpp": 1, "zero_stage": 1,
                    "recompute": "none", "micro_batch_size": 1, "top_k": 1}}

PATTERN = {"tp": 2, "cp": 1, "dp": 4, "pp": 2, "m": 4, "layers": [3, 2], "recompute": "none",
           "gemms": [[8, 8, 8]], "attn_bmm": [], "head_gemm": [8, 16, 8],
           "tp_fwd": [["all_reduce", 1024.0, 2]], "tp_bwd": [["all_reduce", 1024.0, 2]],
           "cp_fwd": [], "cp_bwd": [], "zero3": [],
           "dp_ops": [["reduce_scatter", 4096.0, 1, "dp_comm"]], "pp_bytes": 512.0}


def test_sampled_runs_one_group_per_strategy():
    runs, notes = sampled_runs(PATTERN, stage=0, nproc=4)
    assert set(runs) == {"stage", "pipeline", "data"} and notes == []
    st = runs["stage"]   # one TP group, the sampled stage's layers, no neighbours, no DP
    assert (st["tp"], st["dp"], st["pp"], st["layers"]) == (2, 1, 1, [3])
    assert st["dp_ops"] == [] and st["pp_bytes"] == 0.0 and st["head_gemm"] is None
    pl = runs["pipeline"]  # two ranks passing the plan's activations, no compute
    assert (pl["tp"], pl["dp"], pl["pp"], pl["pp_bytes"], pl["gemms"]) == (1, 1, 2, 512.0, [])
    da = runs["data"]      # the data-parallel group's buckets
    assert (da["tp"], da["dp"], da["pp"], da["dp_ops"]) == (1, 4, 1, PATTERN["dp_ops"])
    assert runs["stage"]["m"] == 4
    # Too few ranks for the data-parallel group: left to the prediction, and said.
    runs, notes = sampled_runs(PATTERN, stage=1, nproc=2)
    assert set(runs) == {"stage", "pipeline"} and "predicted, not measured" in notes[0]
    assert runs["stage"]["head_gemm"] == [8, 16, 8]   # the last stage carries the head


def test_sampled_runs_of_a_hierarchical_context_parallel_plan():
    """The stage run keeps the hierarchy's all-to-all groups; the pipeline and data runs, which
    drop context parallelism, drop them too (a mesh of cp 1 cannot hold groups of 2)."""
    hier = {**PATTERN, "tp": 1, "cp": 4, "cpa": 2, "dp": 1,
            "cp_fwd": [["all_to_all", 512.0, 1, "cpa"], ["ring", 1024.0, 1, "cpr"]],
            "cp_bwd": [["all_to_all", 512.0, 1, "cpa"], ["ring", 2048.0, 1, "cpr"]]}
    runs, _ = sampled_runs(hier, stage=0, nproc=4)
    assert (runs["stage"]["cp"], runs["stage"]["cpa"]) == (4, 2)
    assert runs["stage"]["cp_fwd"] == hier["cp_fwd"]
    for name in ("pipeline", "data"):
        assert (runs[name]["cp"], runs[name]["cpa"], runs[name]["cp_fwd"]) == (1, 1, [])


def test_sampled_runs_of_an_expert_parallel_plan():
    moe = {**PATTERN, "ep": 2, "etp": 1, "ep_fwd": [["all_to_all", 2048.0, 2, "ep"]],
           "ep_bwd": [["all_to_all", 2048.0, 2, "ep"]],
           "dp_ops": PATTERN["dp_ops"] + [["reduce_scatter", 1024.0, 1, "dp_comm", "edp"]]}
    runs, notes = sampled_runs(moe, stage=0, nproc=4)
    # EP folds inside the TP group (ep * etp = tp = 2): the stage run measures it.
    assert (runs["stage"]["ep"], runs["stage"]["ep_fwd"]) == (2, moe["ep_fwd"])
    # The data run has no TP ranks: the experts' reduction is left to the prediction.
    assert runs["data"]["dp_ops"] == PATTERN["dp_ops"] and runs["data"]["ep"] == 1
    assert any("expert data parallel" in n for n in notes)
    wide = {**moe, "ep": 4}
    runs, notes = sampled_runs(wide, stage=0, nproc=4)
    assert runs["stage"]["ep"] == 1 and runs["stage"]["ep_fwd"] == []
    assert any("all-to-alls are predicted" in n for n in notes)
    raws = {"stage": {"ranks": [{"step_time_s": 2.0, "compute": 1.0, "ep_comm": 0.3}],
                      "pp_comm": 0.0, "steps": 1}}
    out, kept = measured_step(raws, {"ep_comm": 0.5}, m=4, pp=1, ep_measured=False)
    assert out["ep_comm"] == 0.5 and "ep_comm" in kept
    out, kept = measured_step(raws, {"ep_comm": 0.5}, m=4, pp=1)
    assert out["ep_comm"] == 0.3 and "ep_comm" not in kept


def test_the_measured_step_charges_the_1f1b_bubble():
    def raw(**c):
        row = {"step_time_s": 9.0, "compute": 0.0, **c}
        return {"ranks": [row], "pp_comm": c.get("pp", 0.0), "steps": 1}

    raws = {"stage": raw(compute=1.0, tp_comm=0.2), "pipeline": raw(pp=0.05),
            "data": raw(dp_comm=0.1, zero_comm=0.02)}
    out, kept = measured_step(raws, {}, m=4, pp=2)
    assert kept == []
    assert out["pipeline_bubble"] == pytest.approx((2 - 1) / 4 * 1.2)
    assert out["step_time_s"] == pytest.approx(1.2 + 0.3 + 0.05 + 0.1 + 0.02)
    assert out["communication"] == pytest.approx(0.2 + 0.05 + 0.1 + 0.02)
    # The data-parallel group was not run: its prediction stays, and is listed.
    out, kept = measured_step({"stage": raws["stage"]}, {"dp_comm": 0.4, "pp_comm": 0.01}, m=4, pp=2)
    assert out["dp_comm"] == 0.4 and sorted(kept) == ["dp_comm", "pp_comm"]
    assert stage_to_sample([3, 2], [1.0, 1.5]) == 1


@pytest.mark.slow
def test_sampled_validation_of_an_eight_rank_plan_on_four(tmp_path):
    from planner.probe.validate import validate
    from planner.validation.evaluate import as_calibration

    res = validate(PlanRequest.model_validate(EIGHT), nproc=4, top_k=1, steps=2,
                   timeout_s=120)
    assert res.status == "succeeded" and res.mode == "sampled"
    (p,) = res.plans
    assert p.mode == "sampled" and (p.plan["dp"], p.plan["tp"], p.plan["pp"]) == (2, 2, 2)
    assert "stage on 2 ranks" in p.note and "pipeline on 2 ranks" in p.note
    assert "data on 2 ranks" in p.note
    meas = p.measured["breakdown"]
    for key in ("compute", "tp_comm", "pp_comm", "dp_comm", "zero_comm"):
        assert meas[key] > 0, key
    assert meas["pipeline_bubble"] == pytest.approx(meas["compute"] / 4 + meas["tp_comm"] / 4)
    assert "step_time_s" in p.rel_err and p.measured["matmul_tflops"] > 0
    # What the probes measured comes back as calibration samples, fitted like a sweep.
    ops = {(s.op, s.group_size) for s in res.samples}
    # (TP with sequence parallelism: all_gather + reduce_scatter; ZeRO-1: the same over DP.)
    assert {("send_recv", 2), ("reduce_scatter", 2), ("all_gather", 2)} <= ops
    cal = as_calibration(res)
    assert cal.source == "validation" and cal.matmul_tflops == res.matmul_tflops
    assert len(cal.samples) == len(res.samples)


@pytest.mark.slow
def test_sampled_validation_of_a_hierarchical_context_parallel_plan_on_four():
    """cp 4 = 2 all-to-all ranks x a ring of 2, over 2 pipeline stages: 8 ranks on a 4-rank
    probe. The stage run measures the all-to-alls in pairs and the ring between them; the
    pipeline run, without context parallelism, its sends."""
    from planner.probe.validate import validate

    req = {**EIGHT, "training": {**EIGHT["training"], "ring_attention": "a2a+p2p",
                                 "cp_a2a_size": 2},
           "search": {**EIGHT["search"], "dp": 1, "tp": 1, "cp": 4}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1,
                   timeout_s=120)
    assert res.status == "succeeded" and res.mode == "sampled"
    (p,) = res.plans
    assert (p.plan["cp"], p.plan["pp"]) == (4, 2) and p.mode == "sampled", p.note
    assert p.measured["breakdown"]["cp_comm"] > 0
    ops = {(s.op, s.group_size) for s in res.samples}
    assert {("all_to_all", 2), ("send_recv", 2)} <= ops
    assert not any(op == "all_to_all" and size == 4 for op, size in ops)


def test_full_mode_refuses_a_plan_larger_than_the_ranks():
    from planner.validation.evaluate import prepare

    (probe,) = prepare(PlanRequest.model_validate(EIGHT), nproc=4, top_k=1, mode="full")
    assert probe.skipped and "needs 8 ranks" in probe.skipped and probe.runs == {}


@pytest.mark.slow
def test_cluster_validation_jobs_take_the_clusters_hosts_by_default(tmp_path):
    """Without --gpus-per-node the jobs place ranks as the request's cluster hosts them:
    gpus_per_host 2 (an NVLink domain of 4 over hosts of 2) runs the 4-rank TP stage probe
    on 2 hosts of 2 (the old default, 8 a node, put it on one)."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps({**EIGHT, "cluster": {**EIGHT["cluster"], "gpus_per_host": 2},
                               "search": {**EIGHT["search"], "tp": 4, "pp": 1}}))
    job = tmp_path / "job"
    proc = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate", str(req),
                           "--nproc", "4", "--top-k", "1", "--launcher", "slurm",
                           "--job-dir", str(job)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={"PATH": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (job / "plan1-stage.sbatch").read_text()
    assert "#SBATCH --gpus-per-node=2" in text and "#SBATCH --nodes=2" in text


@pytest.mark.parametrize("launcher", ["slurm", "kubernetes"])
def test_cluster_validation_written_then_imported(tmp_path, launcher):
    """The CLI writes one job per probe run (the worker on nccl); results a cluster would
    write (here: the same patterns run on local gloo ranks) are read back and compared."""
    from planner.probe.validate import run_pattern

    req = tmp_path / "req.json"
    req.write_text(json.dumps(EIGHT))
    job = tmp_path / "job dir"            # a space: paths must survive quoting
    # PATH: a stand-in sbatch that prints a job id; no kubectl.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 4242\n")
    (bin_dir / "sbatch").chmod(0o755)
    proc = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate", str(req),
                           "--nproc", "4", "--top-k", "1", "--launcher", launcher,
                           "--job-dir", str(job), "--gpus-per-node", "4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "validate-import" in proc.stdout
    assert ("submitted: 4242" if launcher == "slurm" else "not installed here") in proc.stdout
    manifest = json.loads((job / "validation.json").read_text())
    runs = manifest["probes"][0]["runs"]
    assert set(runs) == {"stage", "pipeline", "data"}
    ext = ".sbatch" if launcher == "slurm" else "-pytorchjob.yaml"
    text = (job / f"plan1-stage{ext}").read_text()
    assert "planner.probe.step_worker" in text and "nccl" in text
    if launcher == "slurm":
        line = next(ln for ln in text.splitlines() if ln.startswith("srun "))
        words = shlex.split(line.replace('"$head_node_ip', '"HEAD'))
        assert str((job / "plan1-stage.pattern.json").resolve()) in words
    # Nothing measured yet: the import says which results are missing.
    out = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate-import",
                          str(job), "--json"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["status"] == "nothing-validated" and len(doc["missing"]) == 3
    if launcher == "kubernetes":
        return
    results = Path(manifest["result_dir"])
    results.mkdir(parents=True)
    for name, pattern in runs.items():
        world = pattern["tp"] * pattern["cp"] * pattern["dp"] * pattern["pp"]
        raw = run_pattern(pattern, world, steps=1, timeout_s=120, compute="auto")
        (results / f"plan1-{name}.json").write_text(json.dumps(raw))
    cal = tmp_path / "cal.json"
    out = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate-import",
                          str(job), "--json", "--calibration-out", str(cal)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["status"] == "succeeded" and doc["missing"] == [] and doc["backend"] == "nccl"
    assert doc["plans"][0]["measured"]["breakdown"]["tp_comm"] > 0
    assert json.loads(cal.read_text())["source"] == "validation"


@pytest.mark.slow
def test_validate_import_of_a_folder_without_a_job_fails_cleanly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate-import",
                          str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "validation.json" in out.stderr
    assert "Traceback" not in out.stderr
    (tmp_path / "validation.json").write_text("{not json")
    out = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate-import",
                          str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "unreadable" in out.stderr and "Traceback" not in out.stderr
    for manifest in ('{"request": {}, "probes": []}', "[1, 2]"):   # wrong fields, wrong shape
        (tmp_path / "validation.json").write_text(manifest)
        out = subprocess.run([sys.executable, "-m", "planner.cli.main", "validate-import",
                              str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode != 0 and "unreadable" in out.stderr, out.stderr[-500:]
        assert "Traceback" not in out.stderr


def test_interleaved_order_by_hand():
    from planner.validation.schedule import one_f_one_b_order, pipeline_order

    # p=2, v=2, m=2 (Megatron's interleaved schedule): stage 0 warms up with
    # (2-0-1)*2 + (2-1)*2 = 4 forwards, i.e. all of them; stage 1 with 2.
    assert pipeline_order(2, 0, 2, 2) == [("F", 0, 0), ("F", 0, 1), ("F", 1, 0), ("F", 1, 1),
                                          ("B", 1, 0), ("B", 1, 1), ("B", 0, 0), ("B", 0, 1)]
    assert pipeline_order(2, 1, 2, 2) == [("F", 0, 0), ("F", 0, 1), ("F", 1, 0), ("B", 1, 0),
                                          ("F", 1, 1), ("B", 1, 1), ("B", 0, 0), ("B", 0, 1)]
    # One chunk is plain 1F1B.
    assert pipeline_order(3, 0, 4) == [(k, 0, i) for k, i in one_f_one_b_order(3, 0, 4)]
    for stage in range(4):               # every (chunk, micro-batch) forward and backward once
        order = pipeline_order(4, stage, 8, 2)
        assert sorted(order) == sorted((k, c, i) for k in "FB" for c in range(2)
                                       for i in range(8))


@pytest.mark.slow
def test_interleaved_plan_runs_end_to_end():
    """A vpp=2 plan on 4 gloo ranks: the interleaved schedule runs to completion (messages
    wrap from the last stage back to the first) and its pipeline traffic is measured."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    req = {**TINY, "search": {**TINY["search"], "pp": 2, "vpp": 2, "tp": 1, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert p.plan["vpp"] == 2 and p.mode == "full", p.note
    meas = p.measured["breakdown"]
    assert meas["pp_comm"] > 0 and meas["pipeline_bubble"] >= 0
    assert "pp_comm" in p.predicted["breakdown"]


@pytest.mark.slow
def test_context_parallel_plan_runs_its_ring_exchanges():
    """A cp=2 plan: the probe runs ring attention's K,V exchanges per layer (forward, and K,V
    with their gradients backward) in Megatron's group order, and measures them as CP."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    req = {**TINY, "search": {**TINY["search"], "cp": 2, "tp": 1, "pp": 1, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert p.plan["cp"] == 2 and p.mode == "full", p.note
    assert p.measured["breakdown"]["cp_comm"] > 0 and p.predicted["breakdown"]["cp_comm"] > 0
    assert "cp_comm" in p.rel_err
    # Forward K,V and backward K,V + gradients: two message sizes of pairwise exchanges.
    sizes = sorted(s.message_bytes for s in res.samples if s.op == "send_recv")
    assert len(sizes) == 2 and sizes[1] == 2 * sizes[0]


@pytest.mark.slow
def test_all_to_all_context_parallel_plan_runs_its_all_to_alls():
    """A cp=2 plan under all-to-all context parallelism (training.ring_attention 'a2a'): the
    probe runs the all-to-alls of Q, K, V and O (their gradients backward) over the CP group
    instead of ring exchanges, and measures them as CP."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    req = {**TINY, "training": {**TINY["training"], "ring_attention": "a2a"},
           "search": {**TINY["search"], "cp": 2, "tp": 1, "pp": 1, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert p.plan["cp"] == 2 and p.mode == "full", p.note
    assert p.measured["breakdown"]["cp_comm"] > 0 and p.predicted["breakdown"]["cp_comm"] > 0
    ops = {s.op for s in res.samples}
    assert "all_to_all" in ops and "send_recv" not in ops
    # One micro-batch of 128 local tokens x 256 wide in fp32: Q, K, V and O alike.
    sizes = {s.message_bytes for s in res.samples if s.op == "all_to_all"}
    assert sizes == {128 * 256 * 4}


def test_validation_table_for_people():
    from rich.console import Console

    from planner.cli.render import validation_table
    from planner.validation.evaluate import ValidatedPlan, ValidationResult

    plan = {"dp": 2, "tp": 2, "pp": 2, "cp": 1, "vpp": 1, "micro_batch_size": 1,
            "zero_stage": 1}
    res = ValidationResult(
        status="succeeded", mode="sampled", compute="emulate", tolerance=0.5,
        reranked=[0], kendall_tau=None,
        plans=[ValidatedPlan(plan=plan, mode="sampled", predicted={"step_time_s": 0.1},
                             measured={"step_time_s": 0.2}, flagged=True,
                             rel_err={"step_time_s": -0.5, "communication": 0.25},
                             note="sampled: stage on 2 ranks"),
               ValidatedPlan(plan={**plan, "pp": 4}, predicted={}, measured=None,
                             note="needs 16 ranks; 4 were given (use sampled mode)")])
    console = Console(width=200, record=True)
    console.print(validation_table(res))
    text = console.export_text()
    assert "sampled, gloo, compute emulate" in text
    assert "-50%" in text and "+25%" in text and "!" in text
    assert "needs 16 ranks" in text and "sampled: stage on 2 ranks" in text


@pytest.mark.slow
def test_expert_parallel_plan_runs_its_all_to_alls():
    """A MoE plan (ep=2, etp=2 on 4 gloo ranks): the probe runs the MoE layers' dispatch and
    combine all-to-alls over the EP groups and the ETP all-gather / reduce-scatter, in
    Megatron-Core's expert rank order, and measures them as EP."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    moe = {**TINY["model"], "ffn_type": "swiglu", "num_experts": 4, "moe_top_k": 2,
           "moe_ffn_hidden_size": 256, "first_k_dense_layers": 2}
    req = {**TINY, "model": moe,
           "search": {**TINY["search"], "tp": 2, "dp": 2, "pp": 1, "ep": 2, "etp": 2,
                      "zero_stage": 1, "sequence_parallel": True, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert (p.plan["ep"], p.plan["etp"], p.mode) == (2, 2, "full"), p.note
    assert p.measured["breakdown"]["ep_comm"] > 0 and p.predicted["breakdown"]["ep_comm"] > 0
    assert "ep_comm" in p.rel_err
    ops = {s.op for s in res.samples}
    assert {"all_to_all", "all_gather", "reduce_scatter"} <= ops


@pytest.mark.slow
def test_zero3_moe_plan_gathers_experts_over_their_own_group():
    """ZeRO-3 of a MoE plan (dp=4, ep=2): the probe gathers the dense weights over the four
    data-parallel ranks and the experts over the two that hold the same experts."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    moe = {**TINY["model"], "ffn_type": "swiglu", "num_experts": 4, "moe_top_k": 2,
           "moe_ffn_hidden_size": 256}
    req = {**TINY, "model": moe,
           "search": {**TINY["search"], "tp": 1, "dp": 4, "pp": 1, "ep": 2, "etp": 1,
                      "zero_stage": 3, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert (p.plan["ep"], p.plan["zero_stage"], p.mode) == (2, 3, "full"), p.note
    assert p.measured["breakdown"]["zero_comm"] > 0 and p.measured["breakdown"]["ep_comm"] > 0
    gathers = {s.group_size for s in res.samples if s.op == "all_gather"}
    assert gathers == {2, 4}


def test_the_probe_reruns_the_head_where_full_recompute_does():
    """With ``training.recompute_head`` and full recompute the step pattern runs the output
    layer's GEMM three times in each backward (the rerun and its two gradient GEMMs), as the
    plan is costed; twice otherwise."""
    from planner.cost import estimate
    from planner.cost.efficiency import EfficiencyModel
    from planner.cost.tables import CostTables
    from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
    from planner.validation.pattern import step_pattern

    model = ModelSpec(name="tiny", num_layers=2, hidden_size=64, num_attention_heads=4,
                      ffn_hidden_size=128, ffn_type="swiglu", vocab_size=128)
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    passes = {}
    for rerun in (False, True):
        for rec in ("none", "full"):
            training = TrainingSpec(global_batch_size=8, seq_length=64, recompute_head=rerun)
            est = estimate(model, cluster, training,
                           ParallelPlan(dp=8, zero_stage=1, recompute=rec))
            pat = step_pattern(est, CostTables(model, cluster, training, EfficiencyModel()))
            passes[rerun, rec] = pat["head_bwd_passes"]
    assert passes == {(False, "none"): 2, (False, "full"): 2, (True, "none"): 2,
                      (True, "full"): 3}


def test_the_probe_launches_local_experts_as_the_plan_costs_them():
    """The step pattern says how the local experts' GEMMs launch (``moe_expert_gemm``): the
    probe runs 'per_expert' as one GEMM per expert (Transformer Engine's GroupedLinear) and
    'grouped' as one batched GEMM, with the same FLOPs."""
    import torch

    from planner.cost import estimate
    from planner.cost.efficiency import EfficiencyModel
    from planner.cost.tables import CostTables
    from planner.probe.step_worker import Kernels
    from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
    from planner.validation.pattern import step_pattern

    model = ModelSpec(name="tiny-moe", num_layers=2, hidden_size=64, num_attention_heads=4,
                      ffn_hidden_size=128, ffn_type="swiglu", vocab_size=128, num_experts=4,
                      moe_top_k=2, moe_ffn_hidden_size=32)
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    counts, flops = {}, {}
    for launch in ("per_expert", "grouped"):
        training = TrainingSpec(global_batch_size=8, seq_length=64, moe_expert_gemm=launch)
        est = estimate(model, cluster, training, ParallelPlan(dp=8, zero_stage=1))
        pat = step_pattern(est, CostTables(model, cluster, training, EfficiencyModel()))
        assert pat["expert_launch"] == launch
        assert [b[0] for b in pat["expert_bmm"]] == [4, 4]      # up/gate and down, 4 experts
        k = Kernels.of(torch, pat, last_stage=False, device="cpu")
        counts[launch], flops[launch] = len(k.moe), k.flops
    assert counts["per_expert"] - counts["grouped"] == 2 * (4 - 1)
    assert flops["per_expert"] == flops["grouped"]
