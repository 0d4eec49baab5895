"""Measured runs read from a torchtitan job config and its log (planner.calibration.
torchtitan_run): the config and log of any plan torchtitan runs read back into the same request
(the same prediction to the last bit), Llama 3's flavors are torchtitan's, a log as torchtitan
prints it (ANSI colours and all) gives the step worked out by hand, what the request cannot
cost is refused by name, and `planner calibrate torchtitan-run` pipes into the anchor."""

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.calibration.anchor import AnchorRequest, TorchtitanRun, fit_anchor
from planner.calibration.torchtitan_run import (
    LLAMA3_FLAVORS,
    QWEN3_MOE_FLAVORS,
    anchor_run,
    llama3_model,
    qwen3_moe_model,
)
from planner.cli.main import app
from planner.cost import estimate
from planner.errors import PlannerInputError
from planner.request import EstimateRequest
from planner.search.plan_request import FRAMEWORK_TRAINING
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from tests.test_launch import KEYS, PLANS, estimated, launched, random_plan

DATA = Path(__file__).parent / "data" / "torchtitan"
CONFIG = (DATA / "llama3-8b-8gpu.toml").read_text()
LOG = (DATA / "llama3-8b-8gpu.log").read_text()
# The same job with a model the reader has no flavors of (given with the run).
OTHER = CONFIG.replace('name = "llama3"', 'name = "custom"').replace('flavor = "8B"',
                                                                    'flavor = "tiny-moe"')


def titan_log(est, training, tps: list[int]) -> str:
    """Rank 0's log lines the reader needs, as torchtitan v0.2.2 writes them
    (parallel_dims.py build_mesh; metrics.py log, with its colours)."""
    replicate, shard = ((est.dp, 1) if est.zero_stage == 0
                        else (est.dp_replicate, est.dp // est.dp_replicate))
    lines = ["[rank0]:[titan] 2026-12-05 08:00:00,000 - root - INFO - Building device mesh with "
             f"parallelism: pp={est.pp}, dp_replicate={replicate}, dp_shard={shard}, "
             f"cp={est.cp}, tp={est.tp}, ep={est.ep}, etp={est.etp}"]
    for i, t in enumerate(tps):
        lines.append(f"[rank0]:[titan] 2026-12-05 08:0{i}:00,000 - root - INFO - \x1b[31mstep: "
                     f"{10 * i + 1:2}  \x1b[32mloss:  7.12345  \x1b[34mtps: {t:,}  "
                     "\x1b[36mtflops: 100.00  \x1b[35mmfu: 10.00%\x1b[39m")
    return "\n".join(lines) + "\n"


def read_back(est, model, cluster, training):
    tokens = training.global_batch_size * training.seq_length
    tps = round(tokens / (0.5 * est.gpus_used))
    run, _ = anchor_run(est.launch.torchtitan_toml, titan_log(est, training, [tps // 3, tps]),
                        cluster.model_dump(mode="json"), model.model_dump(mode="json"))
    req = EstimateRequest.model_validate({k: v for k, v in run.items()
                                          if k not in ("name", "measured_step_time_s")})
    return run, estimate(req.model, req.cluster, req.training, req.plan), tokens / (
        tps * est.gpus_used)


def test_configs_of_random_torchtitan_plans_read_back_to_the_same_prediction():
    rng = random.Random(3)
    checked = pipelined = 0
    for i in range(700):
        model, cluster, training, plan = random_plan(rng)
        # torchtitan runs PyTorch's loss, eager or compiled, not Megatron's (its artifact
        # compiles a loss costed as Megatron's, which would not read back as costed).
        training = training.model_copy(update={"loss_implementation": ("eager", "fused")[i % 2]})
        est = estimated(model, cluster, training, plan)
        if "torchtitan" not in est.frameworks:
            continue
        run, got, step = read_back(est, model, cluster, training)
        assert got.step_time_s == est.step_time_s, (plan, run)
        assert got.memory_per_gpu_gib == est.memory_per_gpu_gib
        assert [getattr(got, k) for k in KEYS] == [getattr(est, k) for k in KEYS]
        assert run["measured_step_time_s"] == pytest.approx(step)     # the second interval
        checked += 1
        pipelined += est.pp > 1
    assert checked >= 25 and pipelined >= 10, (checked, pipelined)     # (30, 16)


def random_moe_plan(rng: random.Random):
    """A random MoE plan on torchtitan's training (FSDP2, its token copies, grouped experts),
    with PyTorch's all-to-all or DeepEP, on one to four DGX H100 nodes."""
    experts = rng.choice([4, 8, 16])
    model = ModelSpec(name="moe", num_layers=rng.randint(2, 12), hidden_size=1024,
                      num_attention_heads=16, num_kv_heads=rng.choice([4, 16]),
                      ffn_type="swiglu", ffn_hidden_size=2816, vocab_size=32000,
                      num_experts=experts, moe_top_k=rng.choice([1, 2]),
                      moe_ffn_hidden_size=rng.choice([512, 1024]))
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=rng.choice([1, 2, 4]))
    training = TrainingSpec.model_validate({
        **FRAMEWORK_TRAINING["torchtitan"], "moe_expert_gemm": "grouped",
        "moe_dispatcher": rng.choice(["alltoall", "deepep"]),
        "global_batch_size": rng.choice([32, 64, 128]), "seq_length": rng.choice([1024, 2048])})
    n = cluster.num_gpus
    tp, pp, cp = rng.choice([1, 2]), rng.choice([1, 1, 2]), rng.choice([1, 1, 2])
    dp = n // (tp * pp * cp)
    etp = rng.choice([1, tp])
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch_size=1,
                        recompute=rng.choice(["none", "full"]),
                        zero_stage=(1 if pp > 1 else rng.choice([2, 3])) if dp * cp > 1 else 0,
                        sequence_parallel=tp > 1, ep=rng.choice([e for e in (1, 2, 4, 8)
                                                                 if e <= experts]),
                        etp=etp)
    return model, cluster, training, plan


def test_configs_of_random_torchtitan_moe_plans_read_back_to_the_same_prediction():
    """The MoE plans torchtitan runs: expert degrees, grouped experts and the dispatcher read
    back from the config and the mesh (ep, etp), the same prediction to the last bit."""
    rng = random.Random(11)
    checked, deepep, expert_parallel = 0, 0, 0
    for _ in range(400):
        try:
            model, cluster, training, plan = random_moe_plan(rng)
            est = estimated(model, cluster, training, plan)
        except (ValueError, PlannerInputError):
            continue                      # (an invalid draw: the plan's own validation)
        if "torchtitan" not in est.frameworks:
            continue
        run, got, _ = read_back(est, model, cluster, training)
        assert got.step_time_s == est.step_time_s, (plan, run)
        assert got.memory_per_gpu_gib == est.memory_per_gpu_gib
        assert (run["plan"]["ep"], run["plan"]["etp"]) == (est.ep, est.etp)
        assert run["training"]["moe_dispatcher"] == training.moe_dispatcher
        checked += 1
        deepep += training.moe_dispatcher == "deepep"
        expert_parallel += est.ep > 1
    # (The README quotes these counts.)
    assert (checked, deepep, expert_parallel) == (116, 56, 100)


def test_a_moe_config_whose_expert_degree_is_not_the_mesh_is_refused():
    model = ModelSpec(name="moe", num_layers=4, hidden_size=1024, num_attention_heads=16,
                      ffn_type="swiglu", ffn_hidden_size=2816, vocab_size=32000, num_experts=8,
                      moe_top_k=2)
    config = edit(OTHER, "context_parallel_degree = 1",
                  "context_parallel_degree = 1\nexpert_parallel_degree = 4")
    log = LOG.replace("ep=1, etp=1", "ep=8, etp=1")
    with pytest.raises(PlannerInputError, match="device mesh has ep=8") as exc:
        anchor_run(config, log, {"preset": "dgx-h100"}, model.model_dump(mode="json"))
    assert exc.value.field == "config.parallelism.expert_parallel_degree"
    run, notes = anchor_run(config, LOG.replace("ep=1, etp=1", "ep=4, etp=1"),
                            {"preset": "dgx-h100"}, model.model_dump(mode="json"))
    assert (run["plan"]["ep"], run["training"]["moe_expert_gemm"]) == (4, "grouped")
    assert any("moe_load_imbalance" in n for n in notes)
    with pytest.raises(PlannerInputError) as exc:
        anchor_run(edit(config, "[parallelism]", '[parallelism]\nexpert_parallel_comm_backend = '
                        '"nccl"'), LOG.replace("ep=1, etp=1", "ep=4, etp=1"),
                   {"preset": "dgx-h100"}, model.model_dump(mode="json"))
    assert exc.value.field == "config.parallelism.expert_parallel_comm_backend"


TITAN_GOLDENS = [n for n in sorted(PLANS) if "torchtitan" in launched(n)[1].frameworks]


def test_the_golden_plans_torchtitan_runs_are_two_dense_ones():
    assert TITAN_GOLDENS == ["fsdp-pipeline", "hsdp-fsdp2-pipeline"]
    assert not any(launched(n)[0].model.is_moe for n in TITAN_GOLDENS)


@pytest.mark.parametrize("name", TITAN_GOLDENS)
def test_golden_torchtitan_plans_read_back(name):
    req, est = launched(name)
    _, got, _ = read_back(est, req.model, req.cluster, req.training)
    assert got.step_time_s == est.step_time_s


@pytest.mark.parametrize("flavor", sorted(LLAMA3_FLAVORS))
def test_llama3_flavors_are_torchtitans_and_the_presets(flavor):
    """torchtitan v0.2.2's Llama 3 flavors (llama3/__init__.py) built with its FeedForward
    rule are the planner's presets: 14,336, 28,672 and 53,248 FFN widths."""
    model = ModelSpec.model_validate(llama3_model(flavor))
    preset = ModelSpec.from_preset(f"llama3-{flavor.lower()}")
    assert model.ffn == {"8B": 14336, "70B": 28672, "405B": 53248}[flavor] == preset.ffn
    for k in ("num_layers", "hidden_size", "num_attention_heads", "kv_heads", "vocab_size",
              "tied_embeddings", "ffn_type"):
        assert getattr(model, k) == getattr(preset, k), k


@pytest.mark.parametrize("flavor", sorted(QWEN3_MOE_FLAVORS))
def test_qwen3_moe_flavors_are_torchtitans_and_the_presets(flavor):
    """torchtitan v0.2.2's Qwen3 MoE flavors (qwen3/__init__.py) are the planner's presets,
    and a config naming one reads without a model given: its experts, routing and shape."""
    model = ModelSpec.model_validate(qwen3_moe_model(flavor))
    preset = ModelSpec.from_preset(f"qwen3-{flavor.lower()}")
    for k in ("num_layers", "hidden_size", "num_attention_heads", "kv_heads", "d_head",
              "vocab_size", "tied_embeddings", "ffn_type", "num_experts", "moe_top_k",
              "expert_ffn", "shared_ffn", "num_moe_layers", "moe_router_score", "num_params"):
        assert getattr(model, k) == getattr(preset, k), k
    config = edit(edit(edit(CONFIG, 'name = "llama3"', 'name = "qwen3"'), 'flavor = "8B"',
                       f'flavor = "{flavor}"'), "context_parallel_degree = 1",
                  "context_parallel_degree = 1\nexpert_parallel_degree = 8")
    run, notes = anchor_run(config, LOG.replace("ep=1, etp=1", "ep=8, etp=1"),
                            {"preset": "dgx-h100"})
    assert run["model"] == qwen3_moe_model(flavor) and run["plan"]["ep"] == 8
    assert any("moe_load_imbalance" in n for n in notes)


def test_a_config_and_log_as_torchtitan_writes_them():
    """Llama 3 8B on 8 H100 (FSDP over 8, per-op selective recompute, compiled): global batch
    8 (its default, local 1 x 8 ranks) x 8,192 tokens; the compiling first step (512 tps) is
    left out, and the median of 7,124, 7,135, 7,118 and 7,130 tokens per second per device
    gives 65,536 / (8 x 7,127) s."""
    run, notes = anchor_run(CONFIG, LOG, {"preset": "dgx-h100"})
    assert run["model"] == llama3_model("8B")
    assert run["cluster"] == {"preset": "dgx-h100", "num_nodes": 1}
    assert run["plan"] == {"dp": 8, "tp": 1, "pp": 1, "cp": 1, "vpp": 1, "micro_batch_size": 1,
                           "recompute": "selective", "zero_stage": 3,
                           "sequence_parallel": False}
    t = run["training"]
    assert (t["global_batch_size"], t["seq_length"], t["precision"]) == (8, 8192, "bf16")
    assert (t["selective_recompute"], t["eager_elementwise"], t["zero3_per_parameter"]) == (
        "per_op", False, True)
    assert run["measured_step_time_s"] == pytest.approx(
        (65536 / (8 * 7124) + 65536 / (8 * 7130)) / 2)
    assert notes == []


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


@pytest.mark.parametrize("compile_section, eager, loss", [
    ('enable = true\ncomponents = ["model", "loss"]', False, "fused"),
    ("enable = true", False, "fused"),                   # v0.2.2's default components
    ('enable = true\ncomponents = ["model"]', False, "eager"),
    ('enable = true\ncomponents = ["loss"]', True, "fused"),
    ('enable = false\ncomponents = ["model", "loss"]', True, "eager"),
])
def test_the_compiled_components_set_the_kernels_and_the_loss(compile_section, eager, loss):
    config = edit(CONFIG, 'enable = true\ncomponents = ["model", "loss"]', compile_section)
    t = anchor_run(config, LOG, {"preset": "dgx-h100"})[0]["training"]
    assert (t["eager_elementwise"], t["loss_implementation"]) == (eager, loss)


def test_compile_components_must_be_a_list():
    with pytest.raises(PlannerInputError, match="config.compile.components"):
        anchor_run(edit(CONFIG, 'components = ["model", "loss"]', 'components = "model"'), LOG,
                   {"preset": "dgx-h100"})


@pytest.mark.parametrize("config, log, field", [
    (CONFIG, LOG.replace("Building device mesh", "Mesh"), "log"),
    (CONFIG, LOG.replace("tps:", "tokens:"), "log"),
    ("[training\n", LOG, "config"),
    (edit(CONFIG, 'flavor = "8B"', 'flavor = "3B"'), LOG, "model"),
    (edit(CONFIG, 'selective_ac_option = "op"', 'selective_ac_option = "2"'), LOG,
     "config.activation_checkpoint.selective_ac_option"),
    (edit(CONFIG, "local_batch_size = 1", "local_batch_size = 0"), LOG,
     "config.training.local_batch_size"),
    (edit(CONFIG, "local_batch_size = 1", 'local_batch_size = "one"'), LOG,
     "config.training.local_batch_size"),
    (edit(CONFIG, 'mode = "selective"', 'mode = "memory_budget"'), LOG,
     "config.activation_checkpoint.mode"),
    (edit(CONFIG, "context_parallel_degree = 1",
          "context_parallel_degree = 1\nexpert_parallel_degree = 8"), LOG,
     "config.parallelism.expert_parallel_degree"),
    (edit(CONFIG, "[parallelism]", "[parallelism]\nfsdp_reshard_after_forward = \"maybe\""), LOG,
     "config.parallelism.fsdp_reshard_after_forward"),
    (edit(CONFIG, "steps = 100", "steps = 100\nmixed_precision_param = \"float16\""), LOG,
     "config.training.mixed_precision_param"),
])
def test_what_a_config_cannot_give_is_refused_by_name(config, log, field):
    with pytest.raises(PlannerInputError) as exc:
        anchor_run(config, log, {"preset": "dgx-h100"})
    assert exc.value.field == field, exc.value


@pytest.mark.parametrize("key, value, mesh", [
    ("tensor_parallel_degree", 2, "tp=1"),
    ("pipeline_parallel_degree", 2, "pp=1"),
    ("context_parallel_degree", 2, "cp=1"),
    ("data_parallel_replicate_degree", 2, "dp_replicate=1"),
    ("data_parallel_shard_degree", 4, "dp_shard=8"),
])
def test_a_config_and_a_log_of_two_runs_are_refused(key, value, mesh):
    """The config's degrees against the log's device mesh: a config and a log of different
    runs would anchor the model on a run that never happened. (The fixture's shard degree
    is -1, torchtitan's default: the ranks left, which the mesh states.)"""
    config = CONFIG.replace(f"{key} = ", f"# {key} = ")
    config = edit(config, "[parallelism]", f"[parallelism]\n{key} = {value}")
    with pytest.raises(PlannerInputError, match=f"device mesh has {mesh}") as exc:
        anchor_run(config, LOG, {"preset": "dgx-h100"})
    assert exc.value.field == f"config.parallelism.{key}"
    # Stated as the mesh has it, the run reads.
    same = edit(config, f"{key} = {value}", f"{key} = {mesh.split('=')[1]}")
    assert anchor_run(same, LOG, {"preset": "dgx-h100"})[0]["plan"]["dp"] == 8


@pytest.mark.parametrize("key", ["num_layers", "hidden_size", "num_attention_heads",
                                 "num_kv_heads", "ffn_hidden_size", "vocab_size"])
def test_a_model_given_with_a_llama3_config_has_its_flavors_shape(key):
    """The model given with a run whose config names a Llama 3 flavor: that flavor's shape,
    or refused on ``model`` (a form or a command line left at another model)."""
    model = llama3_model("8B")
    assert anchor_run(CONFIG, LOG, {"preset": "dgx-h100"}, model)[0]["model"] == model
    other = {**model, key: model[key] * 2}
    with pytest.raises(PlannerInputError, match=f"{key} {other[key]}, where the config's "
                       "Llama 3 8B has") as exc:
        anchor_run(CONFIG, LOG, {"preset": "dgx-h100"}, other)
    assert exc.value.field == "model"


def test_a_run_its_framework_does_not_run_as_costed_says_so():
    """A run read from a framework's output whose plan that framework does not run as the
    planner costs it (its rules: torchtitan builds no multi-token prediction modules) carries
    a note naming the difference; the fixtures' own runs carry none."""
    mtp_model = {"name": "moe", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
                 "ffn_type": "swiglu", "ffn_hidden_size": 2816, "vocab_size": 32000,
                 "num_experts": 8, "moe_top_k": 2, "mtp_num_layers": 1}
    config = edit(edit(OTHER, 'mode = "selective"', 'mode = "full"'),
                  "context_parallel_degree = 1",
                  "context_parallel_degree = 1\nexpert_parallel_degree = 8")
    log = LOG.replace("ep=1, etp=1", "ep=8, etp=1")
    _, notes = TorchtitanRun(torchtitan_config=config, torchtitan_log=log, model=mtp_model,
                             cluster={"preset": "dgx-h100"}).anchor_run(0)
    said = [n for n in notes if n.startswith("torchtitan does not run this plan")]
    assert len(said) == 1 and "multi-token prediction (model.mtp_num_layers)" in said[0]
    _, notes = TorchtitanRun(torchtitan_config=config, torchtitan_log=log,
                             model={**mtp_model, "mtp_num_layers": 0},
                             cluster={"preset": "dgx-h100"}).anchor_run(0)
    assert not any("does not run this plan" in n for n in notes)
    _, notes = TorchtitanRun(torchtitan_config=CONFIG, torchtitan_log=LOG,
                             cluster={"preset": "dgx-h100"}).anchor_run(0)
    assert notes == []


def test_a_pipeline_with_gradient_accumulation_is_refused():
    """torchtitan runs gradient accumulation over a pipeline as several schedules a step, each
    with its own fill and drain; the request costs one."""
    config = edit(edit(CONFIG, "pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2"),
                  "steps = 100", "steps = 100\nglobal_batch_size = 16")
    log = LOG.replace("pp=1, dp_replicate=1, dp_shard=8", "pp=2, dp_replicate=1, dp_shard=4")
    with pytest.raises(PlannerInputError, match="pipeline schedules a step"):
        anchor_run(config, log, {"preset": "dgx-h100"})


def test_fitted_through_the_anchor_request_and_the_cli(tmp_path):
    fit = fit_anchor(AnchorRequest.model_validate({"runs": [{
        "torchtitan_config": CONFIG, "torchtitan_log": LOG,
        "cluster": {"preset": "dgx-h100"}}]}))
    assert abs(fit.runs[0].anchored_error_pct) < 0.05 and 0.67 < fit.compute_scale < 1.5
    with pytest.raises(PlannerInputError) as exc:
        TorchtitanRun(torchtitan_config=CONFIG, torchtitan_log="nothing",
                      cluster={"preset": "dgx-h100"}).anchor_run(3)
    assert exc.value.field == "runs.3.torchtitan_log"
    (tmp_path / "c.toml").write_text(CONFIG)
    (tmp_path / "run.log").write_text(LOG)
    runner = CliRunner()
    res = runner.invoke(app, ["calibrate", "torchtitan-run", str(tmp_path / "c.toml"),
                              str(tmp_path / "run.log"), "--cluster", "dgx-h100"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["runs"][0]["cluster"] == {"preset": "dgx-h100",
                                                            "num_nodes": 1}
    out = runner.invoke(app, ["calibrate", "anchor", "-", "--json"], input=res.stdout)
    assert out.exit_code == 0 and json.loads(out.stdout)["compute_scale"] == fit.compute_scale
    # A model given by preset: the config's own flavor's shape, or refused; any for a model
    # the reader has no flavors of. A refused config is named by its file.
    res = runner.invoke(app, ["calibrate", "torchtitan-run", str(tmp_path / "c.toml"),
                              str(tmp_path / "run.log"), "--cluster", "dgx-h100", "--model",
                              "llama3-8b"])
    assert res.exit_code == 0 and json.loads(res.stdout)["runs"][0]["model"]["num_layers"] == 32
    res = runner.invoke(app, ["calibrate", "torchtitan-run", str(tmp_path / "c.toml"),
                              str(tmp_path / "run.log"), "--cluster", "dgx-h100", "--model",
                              "llama3-70b"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "num_layers 80, where the config's Llama 3 8B has 32" in " ".join(res.output.split())
    (tmp_path / "other.toml").write_text(OTHER)
    res = runner.invoke(app, ["calibrate", "torchtitan-run", str(tmp_path / "other.toml"),
                              str(tmp_path / "run.log"), "--cluster", "dgx-h100", "--model",
                              "llama3-70b"])
    assert res.exit_code == 0 and json.loads(res.stdout)["runs"][0]["model"]["num_layers"] == 80
    (tmp_path / "bad.toml").write_text(edit(CONFIG, 'selective_ac_option = "op"',
                                            'selective_ac_option = "2"'))
    res = runner.invoke(app, ["calibrate", "torchtitan-run", str(tmp_path / "bad.toml"),
                              str(tmp_path / "run.log"), "--cluster", "dgx-h100"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"{tmp_path / 'bad.toml'}: config.activation_checkpoint.selective_ac_option" in \
        " ".join(res.output.split())


def with_key(config: str, section: str, key: str, value: str) -> str:
    """The config with ``key = value`` in ``[section]`` (replacing the key's line there)."""
    out, inside = [], False
    for line in config.splitlines():
        if line.startswith("["):
            inside = line.strip() == f"[{section}]"
            out.append(line)
            if inside:
                out.append(f"{key} = {value}")
            continue
        if not (inside and line.split("=")[0].strip() == key):
            out.append(line)
    if f"[{section}]" not in config:
        out += [f"[{section}]", f"{key} = {value}"]
    return "\n".join(out) + "\n"


def test_junk_in_any_key_read_is_a_named_error_never_a_crash():
    """Every config key the reader reads, given as junk (zero, negative, text, a list, a
    table, a float, a boolean), on a plain, a pipelined and a MoE run: read and estimated, or
    PlannerInputError; never another exception (the service's 500)."""
    pipelined = with_key(with_key(with_key(CONFIG, "parallelism", "pipeline_parallel_degree",
                                           "2"), "training", "local_batch_size", "4"),
                         "parallelism", "pipeline_parallel_layers_per_stage", "17")
    pp_log = LOG.replace("pp=1, dp_replicate=1, dp_shard=8", "pp=2, dp_replicate=1, dp_shard=4")
    anchor_run(pipelined, pp_log, {"preset": "dgx-h100"})          # the base reads
    moe = ModelSpec(name="moe", num_layers=4, hidden_size=1024, num_attention_heads=16,
                    ffn_type="swiglu", ffn_hidden_size=2816, vocab_size=32000, num_experts=8,
                    moe_top_k=2)
    moe_config = with_key(with_key(OTHER, "parallelism", "expert_parallel_degree", "4"),
                          "parallelism", "expert_parallel_comm_backend", '"deepep"')
    moe_log = LOG.replace("ep=1, etp=1", "ep=4, etp=1")
    anchor_run(moe_config, moe_log, {"preset": "dgx-h100"}, moe.model_dump(mode="json"))
    keys = {"training": ["local_batch_size", "global_batch_size", "seq_len",
                         "mixed_precision_param", "dtype"],
            "parallelism": ["fsdp_reshard_after_forward", "expert_parallel_degree",
                            "expert_tensor_parallel_degree", "expert_parallel_comm_backend",
                            "tensor_parallel_degree", "pipeline_parallel_degree",
                            "context_parallel_degree", "data_parallel_shard_degree",
                            "data_parallel_replicate_degree",
                            "enable_async_tensor_parallel", "pipeline_parallel_microbatch_size",
                            "module_fqns_per_model_part", "pipeline_parallel_layers_per_stage",
                            "pipeline_parallel_first_stage_less_layers",
                            "pipeline_parallel_last_stage_less_layers",
                            "pipeline_parallel_schedule"],
            "activation_checkpoint": ["mode", "selective_ac_option", "early_stop"],
            "compile": ["enable"], "model": ["name", "flavor", "converters"],
            "quantize.linear.float8": ["enable_fsdp_float8_all_gather"]}
    junk = ["0", "-1", '"abc"', "[1, 2]", "{a = 1}", "1.5", "true", '[["x"]]', "[[1]]"]
    refused = 0
    for config, log, model in ((CONFIG, LOG, None), (pipelined, pp_log, None),
                               (moe_config, moe_log, moe)):
        for section, names in keys.items():
            for key in names:
                for value in junk:
                    try:
                        run, _ = TorchtitanRun(
                            torchtitan_config=with_key(config, section, key, value),
                            torchtitan_log=log, cluster={"preset": "dgx-h100"},
                            model=model).anchor_run(0)
                        estimate(run.model, run.cluster, run.training, run.plan)
                    except PlannerInputError:
                        refused += 1
    assert refused >= 150, refused


def test_a_long_log_is_read_from_its_essential_lines():
    from planner.calibration.torchtitan_run import essential

    noise = "".join(f"[rank0]:[titan] root - INFO - loading shard {i}\n" for i in range(30_000))
    long = noise + LOG + noise
    assert len(long) > 900_000
    assert anchor_run(CONFIG, essential(long), {"preset": "dgx-h100"}) == anchor_run(
        CONFIG, LOG, {"preset": "dgx-h100"})


def test_torchtitans_own_split_of_the_layers():
    """generate_llm_fqn_per_model_part (v0.2.2): its docstring's example, 3 layers over 2
    stages with the embedding and the output each weighing 2, is 2 then 1; Llama 3 8B's 32
    layers over 4 ranks interleaved (two virtual stages a rank, the default for multi-stage
    schedules) weigh 34 over 8 stages: 4, 5, 4, 4, 4, 4, 4, 3."""
    from planner.calibration.torchtitan_run import llm_split

    assert llm_split(2, 3, 2, 2) == [2, 1]
    assert llm_split(8, 32, 1, 1) == [4, 5, 4, 4, 4, 4, 4, 3]
    config = with_key(with_key(with_key(CONFIG, "parallelism", "pipeline_parallel_degree", "4"),
                               "parallelism", "pipeline_parallel_schedule",
                               '"Interleaved1F1B"'), "training", "local_batch_size", "8")
    log = LOG.replace("pp=1, dp_replicate=1, dp_shard=8", "pp=4, dp_replicate=1, dp_shard=2")
    run, _ = anchor_run(config, log, {"preset": "dgx-h100"})
    assert (run["plan"]["vpp"], run["plan"]["layers_per_stage"]) == (2, [8, 9, 8, 7])
    req = EstimateRequest.model_validate({k: v for k, v in run.items()
                                          if k not in ("name", "measured_step_time_s")})
    est = estimate(req.model, req.cluster, req.training, req.plan)
    assert est.layers_per_chunk == [[4, 4], [5, 4], [4, 4], [4, 3]]
    # Schedules the request does not cost, and GPipe over several micro-batches.
    for schedule in ('"ZBVZeroBubble"', '"GPipe"'):
        with pytest.raises(PlannerInputError) as exc:
            anchor_run(with_key(config, "parallelism", "pipeline_parallel_schedule", schedule),
                       log, {"preset": "dgx-h100"})
        assert exc.value.field == "config.parallelism.pipeline_parallel_schedule"


def test_a_malformed_throughput_is_no_interval():
    """'tps: ,' is no number: before, int('') raised a bare ValueError (the service's 500)."""
    with pytest.raises(PlannerInputError, match="logged no step"):
        anchor_run(CONFIG, LOG.split("\x1b[31mstep:  1")[0] + "step:  1  loss: 1  tps: ,\n",
                   {"preset": "dgx-h100"})
    assert anchor_run(CONFIG, LOG + "step: 50  loss: 1  tps: ,\n", {"preset": "dgx-h100"}) == \
        anchor_run(CONFIG, LOG, {"preset": "dgx-h100"})
