"""Launch renderers: golden files for five plans, and every artifact parsed back."""

import argparse
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml

from planner.cost import estimate
from planner.launch import FORMATS, render
from planner.request import EstimateRequest

DATA = Path(__file__).parent / "data" / "launch"
GOLDEN = DATA / "golden"
PLANS = json.loads((DATA / "plans.json").read_text())
UPDATE = os.environ.get("PLANNER_UPDATE_GOLDEN") == "1"


def launched(name):
    req = EstimateRequest.model_validate(PLANS[name])
    est = estimate(req.model, req.cluster, req.training, req.plan, req.efficiency)
    return req, est


def artifacts(est):
    out = {}
    for fmt in FORMATS:
        try:
            out[fmt] = render(est.launch, fmt)
        except ValueError as exc:
            out[fmt] = f"NOT EXPRESSIBLE: {exc}\n"
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_golden_files(name):
    _, est = launched(name)
    for fmt, text in artifacts(est).items():
        path = GOLDEN / f"{name}.{FORMATS[fmt][1]}"
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.read_text() == text, f"{path.name} changed; PLANNER_UPDATE_GOLDEN=1 rewrites"


def megatron_parser():
    # The flags as Megatron-LM's megatron/training/arguments.py defines them.
    ap = argparse.ArgumentParser()
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
                 "--seq-length", "--max-position-embeddings", "--num-query-groups",
                 "--kv-channels", "--tensor-model-parallel-size",
                 "--pipeline-model-parallel-size", "--context-parallel-size",
                 "--num-virtual-stages-per-pipeline-rank", "--decoder-first-pipeline-num-layers",
                 "--decoder-last-pipeline-num-layers", "--micro-batch-size",
                 "--global-batch-size", "--recompute-num-layers"):
        ap.add_argument(flag, type=int)
    for flag in ("--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
                 "--sequence-parallel", "--use-distributed-optimizer", "--bf16", "--fp16",
                 "--overlap-grad-reduce", "--grad-reduce-in-bf16"):
        ap.add_argument(flag, action="store_true")
    ap.add_argument("--recompute-granularity", choices=["full", "selective"])
    ap.add_argument("--recompute-method", choices=["uniform", "block"])
    ap.add_argument("--fp8-format", choices=["e4m3", "hybrid"])
    return ap


@pytest.mark.parametrize("name", sorted(PLANS))
def test_megatron_args_parse_back_to_the_plan(name):
    req, est = launched(name)
    a = megatron_parser().parse_args(est.launch.megatron_args)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
            a.context_parallel_size) == (est.tp, est.pp, est.cp)
    world = est.dp * est.tp * est.pp * est.cp
    assert world // (a.tensor_model_parallel_size * a.pipeline_model_parallel_size
                     * a.context_parallel_size) == est.dp
    assert a.micro_batch_size == est.micro_batch_size
    assert a.global_batch_size == req.training.global_batch_size
    assert a.global_batch_size == est.dp * est.micro_batch_size * est.grad_accum_steps
    assert (a.num_virtual_stages_per_pipeline_rank or 1) == est.vpp
    assert a.sequence_parallel == est.sequence_parallel
    assert (a.recompute_granularity or "none") == est.recompute
    assert a.use_distributed_optimizer == (est.zero_stage >= 1)
    assert a.num_layers == req.model.num_layers and a.hidden_size == req.model.hidden_size
    assert (a.num_query_groups or a.num_attention_heads) == req.model.kv_heads
    lay = est.layers_per_stage
    if a.decoder_first_pipeline_num_layers is not None:
        rest = a.num_layers - a.decoder_first_pipeline_num_layers - \
            a.decoder_last_pipeline_num_layers
        assert (a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers) == \
            (lay[0], lay[-1])
        assert all(n * (est.pp - 2) == rest for n in lay[1:-1])
    else:
        assert len(set(lay)) == 1


@pytest.mark.parametrize("name", sorted(PLANS))
def test_torchtitan_toml_parses_back_to_the_plan(name):
    req, est = launched(name)
    cfg = tomllib.loads(est.launch.torchtitan_toml)
    par, tr = cfg["parallelism"], cfg["training"]
    dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    assert (dp, par["tensor_parallel_degree"], par["pipeline_parallel_degree"],
            par["context_parallel_degree"]) == (est.dp, est.tp, est.pp, est.cp)
    assert (par["data_parallel_shard_degree"] > 1) == (est.zero_stage > 0 and est.dp > 1)
    assert tr["global_batch_size"] == req.training.global_batch_size
    assert tr["seq_len"] == req.training.seq_length
    per_rank = tr["local_batch_size"]
    if est.pp > 1:       # the whole per-rank batch, cut into pipeline micro-batches
        assert per_rank == est.micro_batch_size * est.grad_accum_steps
        assert par["pipeline_parallel_microbatch_size"] == est.micro_batch_size
        assert par["pipeline_parallel_schedule"] == ("Interleaved1F1B" if est.vpp > 1 else "1F1B")
    else:                # accumulation derived: global / (local * dp)
        assert tr["global_batch_size"] // (per_rank * dp) == est.grad_accum_steps
    assert cfg["activation_checkpoint"]["mode"] == est.recompute


@pytest.mark.parametrize("name", sorted(PLANS))
def test_deepspeed_config_parses_back_or_says_why_not(name):
    req, est = launched(name)
    cfg = est.launch.deepspeed_config
    if est.tp * est.pp * est.cp > 1:
        assert cfg is None
        assert any("Megatron" in n for n in est.launch.notes)
        with pytest.raises(ValueError, match="DeepSpeed"):
            render(est.launch, "deepspeed")
        return
    cfg = json.loads(render(est.launch, "deepspeed"))
    assert cfg["train_batch_size"] == req.training.global_batch_size == (
        cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * est.dp)
    assert cfg["zero_optimization"]["stage"] == est.zero_stage
    assert cfg["bf16"]["enabled"] is True


@pytest.mark.parametrize("name", sorted(PLANS))
def test_kubernetes_manifest_parses_back(name):
    _, est = launched(name)
    doc = yaml.safe_load(est.launch.kubernetes)
    assert doc["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and doc["kind"] == "JobSet"
    job = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
    nodes = est.launch.nnodes
    assert job["parallelism"] == job["completions"] == nodes and job["backoffLimit"] == 0
    container = job["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == est.launch.nproc_per_node
    assert nodes * est.launch.nproc_per_node == est.gpus_used
    cmd = container["command"]
    assert cmd[0] == "torchrun" and f"--nnodes={nodes}" in cmd
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    assert cmd[cmd.index("pretrain_gpt.py") + 1:] == est.launch.megatron_args


@pytest.mark.parametrize("name", sorted(PLANS))
def test_sbatch_script_is_valid_bash_with_the_plan_shape(name, tmp_path):
    _, est = launched(name)
    script = tmp_path / "job.sbatch"
    script.write_text(est.launch.slurm_sbatch)
    # argv only, bounded: `bash -n` parses without running anything.
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    text = est.launch.slurm_sbatch
    assert f"#SBATCH --nodes={est.launch.nnodes}" in text
    assert f"#SBATCH --gpus-per-node={est.launch.nproc_per_node}" in text
    srun = next(line for line in text.splitlines() if line.startswith("srun torchrun"))
    argv = shlex.split(srun)
    assert argv[argv.index("pretrain_gpt.py") + 1:] == est.launch.megatron_args
    assert f"--nproc-per-node={est.launch.nproc_per_node}" in argv


def test_uneven_stages_and_zero3_notes():
    _, est = launched("uneven-stages")
    a = megatron_parser().parse_args(est.launch.megatron_args)
    assert (a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers) == (24, 28)
    assert a.fp8_format == "hybrid" and a.bf16
    _, z3 = launched("zero3")
    assert any("zero_stage=3" in n for n in z3.launch.notes)
    assert json.loads(render(z3.launch, "deepspeed"))["zero_optimization"]["stage"] == 3
