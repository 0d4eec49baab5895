"""Launch renderers: golden files for six plans, every artifact read back into the plan it
runs (which must be the predicted plan), refusals for frameworks that cannot run a plan."""

import json
import os
import random
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from planner.cost import estimate
from planner.cost.layers import distributes_saved_input
from planner.frameworks import FRAMEWORKS, capability_matrix
from planner.launch import FORMATS, NotRunnable, render, with_launch
from planner.request import EstimateRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import plan_violations
from tests.launch_readers import deepspeed_plan, megatron_plan, torchtitan_plan

DATA = Path(__file__).parent / "data" / "launch"
GOLDEN = DATA / "golden"
PLANS = json.loads((DATA / "plans.json").read_text())
UPDATE = os.environ.get("PLANNER_UPDATE_GOLDEN") == "1"
KEYS = ("dp", "tp", "pp", "cp", "vpp", "zero_stage", "micro_batch_size", "grad_accum_steps",
        "layers_per_stage", "ep", "etp", "cpu_offload_layers", "dp_replicate")


def launched(name):
    req = EstimateRequest.model_validate(PLANS[name])
    return req, estimated(req.model, req.cluster, req.training, req.plan)


def estimated(model, cluster, training, plan):
    """The plan's estimate with its launch object, as the service and the CLI give it."""
    return with_launch(estimate(model, cluster, training, plan), model, cluster, training)


def artifacts(est):
    out = {}
    for fmt in FORMATS:
        try:
            out[fmt] = render(est.launch, fmt)
        except NotRunnable as exc:
            out[fmt] = f"NOT RUNNABLE: {exc}\n"
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


def test_golden_capability_matrix():
    # The matrix is data: a change to what a framework supports shows up here.
    path = DATA / "capabilities.json"
    text = json.dumps(capability_matrix(), indent=1, sort_keys=True) + "\n"
    if UPDATE:
        path.write_text(text)
    assert path.read_text() == text
    matrix = capability_matrix()
    assert set(matrix["zero_1"]) == set(FRAMEWORKS)
    assert matrix["zero_1"]["megatron"]["how"] == "--use-distributed-optimizer"
    assert matrix["context_parallel"]["deepspeed"]["status"] == "no"


def check_same_plan(got: dict, est, keys=KEYS):
    for k in keys:
        want = getattr(est, k)
        if k == "zero_stage" and got[k] is None:
            continue                          # dp == 1: every stage is the same plan
        assert got[k] == (list(want) if isinstance(want, list) else want), (k, got[k], want)


def read_back(est, req) -> dict:
    """Every framework artifact of the plan, read back with the frameworks' own names."""
    out = {}
    if "megatron" in est.frameworks:
        out["megatron"] = megatron_plan(est.launch.megatron_args, est.gpus_used)
    if "torchtitan" in est.frameworks:
        out["torchtitan"] = torchtitan_plan(est.launch.torchtitan_toml, req.model.num_layers)
    if "deepspeed" in est.frameworks:
        out["deepspeed"] = deepspeed_plan(est.launch.deepspeed_config, est.gpus_used,
                                          req.model.num_layers)
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_artifacts_read_back_to_the_plan(name):
    req, est = launched(name)
    assert est.frameworks, "every golden plan runs on some framework"
    got = read_back(est, req)
    assert set(got) == set(est.frameworks)
    for fw, plan in got.items():
        check_same_plan(plan, est)
        if fw != "deepspeed":
            assert plan["sequence_parallel"] == est.sequence_parallel
            assert plan["recompute"] == est.recompute
    if "megatron" in got:
        assert got["megatron"]["layers_per_chunk"] == (est.layers_per_chunk or
                                                       [[n] for n in est.layers_per_stage])


@pytest.mark.parametrize("name", sorted(PLANS))
def test_frameworks_that_cannot_run_a_plan_are_refused_with_reasons(name):
    _, est = launched(name)
    for fw in FRAMEWORKS:
        if fw in est.frameworks:
            render(est.launch, fw)
            continue
        with pytest.raises(NotRunnable) as info:
            render(est.launch, fw)
        assert info.value.reasons and info.value.reasons == est.launch.not_runnable[fw]
        assert getattr(est.launch, {"megatron": "megatron_args", "torchtitan": "torchtitan_toml",
                                    "deepspeed": "deepspeed_config"}[fw]) is None


def random_plan(rng: random.Random):
    """A random valid plan of a random small model on a random cluster."""
    while True:
        heads = rng.choice([8, 16, 32])
        layers = rng.randint(2, 40)
        model = ModelSpec(name="m", num_layers=layers, hidden_size=heads * 64,
                          num_attention_heads=heads, num_kv_heads=rng.choice([heads, heads // 4]),
                          ffn_type=rng.choice(["gelu", "swiglu"]), vocab_size=32000)
        gpn = rng.choice([2, 4, 6, 8])
        nodes = rng.randint(1, 6)
        cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=nodes, gpus_per_node=gpn)
        training = TrainingSpec(global_batch_size=rng.choice([16, 32, 48, 64, 96, 128]),
                                seq_length=rng.choice([1024, 2048, 4096]),
                                precision=rng.choice(["bf16", "bf16", "fp8", "fp16"]))
        # A third train with dropout (chosen without a draw: the plans stay those of the seed).
        training = training.model_copy(update={
            "dropout": training.global_batch_size in (48, 96)})
        # DeepSpeed's bf16 optimizer copies every micro-batch's gradients into fp32 and
        # all-reduces them after the backward: half the bf16 models train that way, and a
        # quarter of the models keep bf16 gradients and all-reduce them, as DeepSpeed's ZeRO
        # optimizer does; both gather the updated weights after the optimizer step, as
        # DeepSpeed does.
        # ... and its AutoTP all-reduces the backward's input gradients synchronously: a third
        # of the models are costed with that blocking all-reduce.
        # Half the models shard with FSDP2's per-parameter copies (torchtitan's FSDP), and half
        # the fp8 ones scale per tensor by the current amax (torchao's float8, Megatron-LM's
        # tensorwise recipe); a third keep 1/tp of each checkpointed input where that applies.
        # A third of the models reduce a pipeline's gradients after each stage's last backward
        # (how torchtitan's and DeepSpeed's pipelines run; Megatron-LM refuses it), and a
        # quarter of the bf16 ones keep no master copy (torchtitan's training.dtype bfloat16,
        # what it needs to train TP or PP plans without FSDP in bf16).
        copy = layers % 2 == 0 and training.precision == "bf16"
        pure = heads == 32 and layers % 2 == 1 and training.precision == "bf16"
        training = training.model_copy(update={
            "microbatch_grad_copy": copy, "zero_grad_allreduce": copy or layers % 4 == 1,
            "overlap_grad_reduce": not copy, "overlap_param_gather": layers % 4 != 1 and not copy,
            "grad_dtype": "bf16" if layers % 4 == 1 else "fp32",
            "async_tensor_model_parallel_allreduce": layers % 3 != 0,
            "zero3_per_parameter": heads != 16,
            "fp8_recipe": "tensorwise" if layers % 2 else "delayed",
            "distribute_saved_activations": layers % 3 == 1,
            "grad_reduce_after_last_backward": layers % 3 == 2})
        if pure:
            training = training.model_copy(update={
                "master_weights": False, "grad_dtype": "bf16", "grad_reduce_dtype": "fp32",
                "optimizer_state_dtype": "bf16", "zero3_per_parameter": True})
        tp, pp, cp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 1, 2])
        n = cluster.num_gpus
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        vpp = rng.choice([1, 1, 2, 3]) if pp > 1 else 1
        recompute = rng.choice(["none", "selective", "full"])
        plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp,
                            micro_batch_size=rng.choice([1, 2]), recompute=recompute,
                            recompute_num_layers=rng.choice([None, None, 1, 2])
                            if recompute == "full" else None,
                            zero_stage=rng.choice([0, 1, 2, 3]) if dp * cp > 1 else 0,
                            sequence_parallel=tp > 1 and rng.random() < 0.7)
        if layers % 4 == 1 and tp > 1:
            # As DeepSpeed's AutoTP runs TP: every rank's loss over the whole logits.
            training = training.model_copy(update={"vocab_parallel_loss": False})
        if heads == 16 and layers % 3 == 0 and pp == 1 and cp == 1 and dp > 1:
            # A ninth of the models run as DeepSpeed runs a plan: bf16 gradients all-reduced
            # by its ZeRO optimizer, the weights gathered after the step, AutoTP's whole
            # logits, no sequence parallelism, full recompute (its checkpoints partitioned
            # over the TP ranks) or none.
            training = training.model_copy(update={
                "precision": "bf16", "grad_dtype": "bf16", "zero_grad_allreduce": True,
                "overlap_param_gather": False, "microbatch_grad_copy": False,
                "vocab_parallel_loss": False, "zero3_per_parameter": False,
                "distribute_saved_activations": tp > 1,
                "tp_column_parallel_inputs": 5 if model.ffn_type == "swiglu" else 2})
            plan = plan.model_copy(update={
                "zero_stage": max(1, plan.zero_stage), "sequence_parallel": False,
                "recompute": "full" if recompute != "none" else "none",
                "recompute_num_layers": None})
            plan = ParallelPlan.model_validate(plan.model_dump())
        if heads == 8 and layers % 2 == 0 and dp * cp > 1:
            # A sixth of the models run as torchtitan runs a plan: bf16 under FSDP2 (ZeRO-3,
            # ZeRO-1 under a pipeline, accumulated in fp32 and reduced after each stage's last
            # backward), DTensor's
            # sequence-parallel TP, PyTorch's ring, recompute none or full.
            training = training.model_copy(update={
                "precision": "bf16", "zero3_per_parameter": True,
                "async_tensor_model_parallel_allreduce": False,
                "ring_attention": "torch_allgather",
                "grad_reduce_after_last_backward": True, "microbatch_grad_copy": False,
                "microbatch_grad_upcast": True, "zero_grad_allreduce": False,
                "grad_dtype": "fp32"})
            plan = plan.model_copy(update={
                "zero_stage": 3 if pp == 1 else 1, "sequence_parallel": tp > 1,
                "recompute": "none" if recompute == "selective" else recompute,
                "recompute_num_layers": None})
            plan = ParallelPlan.model_validate(plan.model_dump())
        if not plan_violations(plan, model, cluster, training):
            return model, cluster, training, plan


def test_random_plans_artifacts_describe_exactly_the_plan():
    rng = random.Random(11)
    runnable = {fw: 0 for fw in FRAMEWORKS}
    deepspeed_tp = distributed = dropouts = 0
    for _ in range(1500):
        model, cluster, training, plan = random_plan(rng)
        est = estimated(model, cluster, training, plan)
        req = EstimateRequest(model=model, cluster=cluster, training=training, plan=plan)
        for fw, got in read_back(est, req).items():
            runnable[fw] += 1
            deepspeed_tp += fw == "deepspeed" and plan.tp > 1
            check_same_plan(got, est)
            if fw in ("megatron", "deepspeed"):
                applies = distributes_saved_input(training, est)
                assert got["distribute_saved_activations"] is applies
                distributed += applies
            if fw == "megatron":
                assert got["recompute"] == est.recompute
                assert got["recompute_num_layers"] == est.recompute_num_layers
                assert got["dropout"] is training.dropout     # masks stored as costed
                dropouts += training.dropout
            if fw == "megatron" and est.vpp > 1:
                assert got["microbatch_group_size"] == est.microbatch_group_size
                assert got["layers_per_chunk"] == est.layers_per_chunk
        for fw in set(FRAMEWORKS) - set(est.frameworks):
            with pytest.raises(NotRunnable):
                render(est.launch, fw)
    assert all(n > 10 for n in runnable.values()), runnable
    assert deepspeed_tp >= 10, deepspeed_tp     # AutoTP plans (26 with this seed; a golden too)
    assert distributed >= 10, distributed       # (24 with this seed)
    assert dropouts >= 10, dropouts


def launcher_program(est) -> list[str]:
    """What the scheduler artifacts start: the first framework that runs the plan."""
    fw = est.launch.launcher_framework
    assert fw == est.frameworks[0]
    if fw == "megatron":
        return ["pretrain_gpt.py", *est.launch.megatron_args]
    if fw == "deepspeed":
        return ["train.py", "--deepspeed_config", "ds_config.json"]
    return ["-m", "torchtitan.train", "--job.config_file", "plan.toml"]


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
    program = launcher_program(est)
    assert cmd[-len(program):] == program


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
    program = launcher_program(est)
    assert argv[-len(program):] == program
    assert f"--nproc-per-node={est.launch.nproc_per_node}" in argv


def _fsdp_tp_pp(zero_stage: int, **training):
    """Llama 3 8B on 16 H100s as dp4 tp2 pp2 with sequence parallelism and this ZeRO stage,
    costed with FSDP2's per-parameter copies (as torchtitan shards), DTensor's TP, which
    keeps the gathered input and reduce-scatters its gradient before going on, and the
    gradients accumulated in fp32 and reduced after each stage's last backward
    (torch.distributed.pipelining)."""
    return estimated(ModelSpec.from_preset("llama3-8b"),
                     ClusterSpec.from_preset("dgx-h100", num_nodes=2),
                     TrainingSpec(global_batch_size=64, seq_length=4096,
                                  zero3_per_parameter=True,
                                  async_tensor_model_parallel_allreduce=False,
                                  **{"grad_reduce_after_last_backward": True,
                                     "microbatch_grad_upcast": True, **training}),
                     ParallelPlan(dp=4, tp=2, pp=2, zero_stage=zero_stage,
                                  sequence_parallel=True, micro_batch_size=1))


def test_torchrun_starts_torchtitan_when_megatron_cannot_run_the_plan():
    # torchtitan's FSDP under a pipeline (ZeRO-1: not resharded after forward, reduced at
    # the last micro-batch) with DTensor's blocking TP: Megatron-Core overlaps its TP
    # collectives, so only torchtitan runs it and the scheduler artifacts start torchtitan.
    est = _fsdp_tp_pp(1)
    assert est.frameworks == ["torchtitan"]
    assert est.launch.launcher_framework == "torchtitan"
    assert est.launch.torchrun[-4:] == ["-m", "torchtitan.train", "--job.config_file",
                                        "plan.toml"]
    assert "blocking backward TP" in " ".join(est.launch.not_runnable["megatron"])
    # ZeRO-3 with the pipeline and 16 micro-batches: Megatron-FSDP is not documented with PP,
    # and torch.distributed.pipelining turns torchtitan's FSDP into ZeRO-1's traffic.
    z3 = _fsdp_tp_pp(3)
    assert z3.frameworks == []
    assert "last micro-batch" in " ".join(z3.launch.not_runnable["torchtitan"])


def test_torchtitan_runs_the_plan_compiled():
    """torchtitan v0.2.2 runs eager unless compile.enable (torchtitan/config/job_config.py,
    ``class Compile``: enable False, components ["model", "loss"]); the step model's memory-bound
    kernels are fused ones, so the artifact turns compilation on for the model and the loss."""
    import tomllib
    cfg = tomllib.loads(_fsdp_tp_pp(1).launch.torchtitan_toml)
    assert cfg["compile"] == {"enable": True, "components": ["model", "loss"]}
    assert "early_stop" not in cfg["activation_checkpoint"]
    # A plan costed with torchtitan's eager kernels runs its model uncompiled, with PyTorch's
    # eager loss as well uncompiled (training.loss_implementation); one costed with the
    # recompute's early stop (recompute full) sets activation_checkpoint.early_stop.
    eager = _fsdp_tp_pp(1, eager_elementwise=True, recompute_early_stop=True)
    assert eager.frameworks == ["torchtitan"]
    cfg = tomllib.loads(eager.launch.torchtitan_toml)
    assert cfg["compile"] == {"enable": True, "components": ["loss"]}
    assert "early_stop" not in cfg["activation_checkpoint"]      # no recompute in this plan
    eager_loss = _fsdp_tp_pp(1, eager_elementwise=True, loss_implementation="eager")
    assert tomllib.loads(eager_loss.launch.torchtitan_toml)["compile"] == {"enable": False}
    model_only = _fsdp_tp_pp(1, loss_implementation="eager")
    assert tomllib.loads(model_only.launch.torchtitan_toml)["compile"] == {
        "enable": True, "components": ["model"]}
    full = estimated(ModelSpec.from_preset("llama3-8b"),
                     ClusterSpec.from_preset("dgx-h100", num_nodes=1),
                     TrainingSpec(global_batch_size=8, seq_length=4096, zero3_per_parameter=True,
                                  recompute_early_stop=True),
                     ParallelPlan(dp=8, zero_stage=3, recompute="full"))
    cfg = tomllib.loads(full.launch.torchtitan_toml)
    assert cfg["activation_checkpoint"] == {"mode": "full", "early_stop": True}
    assert "dtype" not in cfg["training"]


def test_a_pure_bf16_plan_runs_torchtitan_in_bf16():
    """No master weights (training.master_weights false, bf16 gradients and states, fp32
    reduction) is torchtitan v0.2.2's training.dtype = "bfloat16" (torchtitan/config/
    job_config.py: "all parameters, gradients, and optimizer states in bfloat16, without an
    extra copy of fp32 weights"); the artifact sets it, and Megatron and DeepSpeed refuse it."""
    import tomllib
    est = estimated(ModelSpec.from_preset("llama3-8b"),
                    ClusterSpec.from_preset("dgx-h100", num_nodes=1),
                    TrainingSpec(global_batch_size=8, seq_length=4096, zero3_per_parameter=True,
                                 master_weights=False, grad_dtype="bf16",
                                 grad_reduce_dtype="fp32", optimizer_state_dtype="bf16"),
                    ParallelPlan(dp=8, zero_stage=3))
    assert est.frameworks == ["torchtitan"]
    # ZeRO-3 over 8: 2 bytes of weights, 2 of gradients and 4 of bf16 moments a parameter, each
    # an eighth a GPU (no 4-byte master copy).
    shard = ModelSpec.from_preset("llama3-8b").num_params / 8 / 2**30
    assert (est.memory.weights_gib, est.memory.gradients_gib, est.memory.optimizer_gib) == (
        pytest.approx(2 * shard), pytest.approx(2 * shard), pytest.approx(4 * shard))
    cfg = tomllib.loads(est.launch.torchtitan_toml)
    assert cfg["training"]["dtype"] == "bfloat16"
    assert cfg["training"]["mixed_precision_param"] == "bfloat16"
    assert any("master" in r for r in est.launch.not_runnable["megatron"])
    assert any("master" in r for r in est.launch.not_runnable["deepspeed"])


def test_a_plan_no_framework_runs_refuses_every_artifact():
    # ZeRO-2 with pipeline parallelism and several micro-batches: Megatron-FSDP is not
    # documented with PP, torchtitan's ZeRO-2 regathers every micro-batch, DeepSpeed's pipeline
    # engine refuses ZeRO-2.
    est = _fsdp_tp_pp(2)
    assert est.frameworks == []
    for fmt in FORMATS:
        with pytest.raises(NotRunnable):
            render(est.launch, fmt)


def test_megatron_arguments_carry_the_selective_recompute_modules():
    # Megatron-LM's default selective recompute is the attention core; other modules are
    # passed as --recompute-modules, and under fp8 moe_act / layernorm need current scaling
    # (TransformerConfig refuses them with the default delayed recipe).
    model = ModelSpec.from_preset("mixtral-8x7b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    plan = ParallelPlan(dp=8, ep=8, recompute="selective")
    default = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096),
                        plan).launch.megatron_args
    assert "--recompute-modules" not in default and "selective" in default
    tr = TrainingSpec(global_batch_size=8, seq_length=4096, precision="fp8",
                      recompute_modules=("moe_act", "layernorm"))
    # TransformerConfig refuses them under the default delayed scaling: Megatron-LM does not
    # run that plan as costed.
    delayed = estimated(model, cluster, tr, plan)
    assert "megatron" not in delayed.frameworks
    assert "delayed scaling" in " ".join(delayed.launch.not_runnable["megatron"])
    tr = tr.model_copy(update={"fp8_recipe": "tensorwise"})
    args = estimated(model, cluster, tr, plan).launch.megatron_args
    i = args.index("--recompute-modules")
    assert args[i + 1:i + 3] == ["layernorm", "moe_act"]
    assert args[args.index("--fp8-recipe") + 1] == "tensorwise"
    assert "--moe-grouped-gemm" in args       # moe_act recompute needs grouped GEMM
    read = megatron_plan(args, 8)
    assert read["recompute"] == "selective"


def test_per_op_selective_recompute_runs_on_torchtitan_not_megatron():
    model = ModelSpec.from_preset("llama3-8b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    plan = ParallelPlan(dp=8, zero_stage=3, recompute="selective")
    per_op = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096,
                                                    selective_recompute="per_op",
                                                    zero3_per_parameter=True), plan)
    assert "torchtitan" in per_op.frameworks and "megatron" not in per_op.frameworks
    assert 'selective_ac_option = "op"' in per_op.launch.torchtitan_toml
    assert "per-op" in " ".join(per_op.launch.not_runnable["megatron"])
    modules = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096),
                        plan)
    assert "megatron" in modules.frameworks and "torchtitan" not in modules.frameworks


def test_megatron_refuses_pipeline_sends_split_without_sequence_parallelism():
    # Megatron-Core has no scatter/gather of pipeline sends: a plan costed with them split
    # over the TP ranks (2021 Megatron-LM) does not run on it as predicted.
    model = ModelSpec.from_preset("llama3-70b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    plan = ParallelPlan(tp=8, pp=2, recompute="full")
    split = estimated(model, cluster, TrainingSpec(global_batch_size=16, seq_length=4096,
                                                   p2p_scatter_gather=True), plan)
    assert "megatron" not in split.frameworks
    assert "scatter_gather" in " ".join(split.launch.not_runnable["megatron"])
    whole = estimated(model, cluster, TrainingSpec(global_batch_size=16, seq_length=4096), plan)
    assert "megatron" in whole.frameworks


def test_no_framework_runs_the_2021_per_rank_zero3_gathers():
    # Today's Megatron-FSDP, FSDP2 and DeepSpeed gather into one flat buffer: a plan costed
    # with DeepSpeed-2021's per-rank copies runs faster on them than predicted, so none is
    # listed and the artifacts are refused with the reason.
    model = ModelSpec.from_preset("llama3-8b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    plan = ParallelPlan(dp=8, zero_stage=3)
    old = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096,
                                                 zero3_per_rank_copies=True), plan)
    assert old.frameworks == []
    assert all("per-rank views" in " ".join(old.launch.not_runnable[f]) for f in FRAMEWORKS)
    flat = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096), plan)
    assert "megatron" in flat.frameworks
    fsdp2 = estimated(model, cluster, TrainingSpec(global_batch_size=8, seq_length=4096,
                                                   zero3_per_parameter=True), plan)
    assert "torchtitan" in fsdp2.frameworks
