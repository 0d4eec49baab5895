"""Measured runs read from Megatron-LM training logs (planner.calibration.megatron_log): a log
written from any plan Megatron-LM runs reads back into the same request (the same prediction to
the last bit), a log as Megatron-LM prints it reads into the settings worked out by hand, what
the step model has no counterpart for is refused by name, and `planner calibrate megatron-run`
pipes into `planner calibrate anchor`."""

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.calibration.anchor import AnchorRequest, fit_anchor
from planner.calibration.megatron_log import anchor_run, layout_chunks, read_log
from planner.cli.main import app
from planner.cost import estimate
from planner.errors import PlannerInputError
from planner.request import EstimateRequest
from tests.megatron_logs import megatron_log
from tests.test_launch import KEYS, PLANS, estimated, launched, random_plan

LOG = Path(__file__).parent / "data" / "megatron" / "llama3-8b-fp8-tp2-cp2.log"


def read_back(est, model, cluster, ms=(1000.0, 900.0, 910.0), **unlogged):
    """The request a log of the plan's launch reads back into, and its estimate (with the
    ``unlogged`` training settings, which no log states, as the plan had them)."""
    text = megatron_log(est.launch.megatron_args, est.gpus_used, model.vocab_size,
                        model.vocab_size, list(ms))
    run, _ = anchor_run(text, cluster.model_dump(mode="json"))
    run["training"].update(unlogged)
    req = EstimateRequest.model_validate({k: v for k, v in run.items()
                                          if k not in ("name", "measured_step_time_s")})
    return run, estimate(req.model, req.cluster, req.training, req.plan)


def test_logs_of_random_megatron_plans_read_back_to_the_same_prediction():
    rng = random.Random(3)
    checked = interleaved = uneven = 0
    for _ in range(500):
        model, cluster, training, plan = random_plan(rng)
        est = estimated(model, cluster, training, plan)
        if "megatron" not in est.frameworks:
            continue
        run, got = read_back(est, model, cluster)
        assert got.step_time_s == est.step_time_s, (plan, run)
        assert got.memory_per_gpu_gib == est.memory_per_gpu_gib
        for k in KEYS:
            assert getattr(got, k) == getattr(est, k), k
        assert run["measured_step_time_s"] == 0.905     # the median after the first interval
        checked += 1
        interleaved += est.vpp > 1
        uneven += len(set(est.layers_per_stage)) > 1
    assert checked >= 100 and interleaved >= 20 and uneven >= 20, (checked, interleaved, uneven)


MEGATRON_GOLDENS = [n for n in sorted(PLANS) if "megatron" in launched(n)[1].frameworks]


def test_the_golden_plans_megatron_runs_are_eleven():
    assert len(MEGATRON_GOLDENS) == 11        # the list below is not empty by accident


@pytest.mark.parametrize("name", MEGATRON_GOLDENS)
def test_golden_megatron_plans_read_back(name):
    req, est = launched(name)
    _, got = read_back(est, req.model, req.cluster)
    assert got.step_time_s == est.step_time_s
    assert [getattr(got, k) for k in KEYS] == [getattr(est, k) for k in KEYS]


def test_a_log_as_megatron_prints_it():
    """Rank 0's output under torchrun ('[rank0]: ' before every line) of Megatron-LM's Llama 3
    8B fp8 example (examples/llama/train_llama3_8b_h100_fp8.sh: GQA 8, SwiGLU, untied, no
    dropout) on 32 H100 at tp 2, cp 2, the distributed optimizer, overlapped reductions."""
    run, notes = anchor_run(LOG.read_text(), {"preset": "dgx-h100"})
    assert run["model"] == {
        "name": "Megatron-LM run", "num_layers": 32, "hidden_size": 4096,
        "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
        "ffn_type": "swiglu", "vocab_size": 128256, "tied_embeddings": False}
    assert run["cluster"] == {"preset": "dgx-h100", "num_nodes": 4}
    assert run["plan"] == {"dp": 8, "tp": 2, "pp": 1, "cp": 2, "vpp": 1, "micro_batch_size": 1,
                           "sequence_parallel": True, "recompute": "none", "zero_stage": 1}
    t = run["training"]
    assert (t["precision"], t["fp8_recipe"], t["ring_attention"], t["dropout"]) == (
        "fp8", "delayed", "te", False)
    assert (t["overlap_grad_reduce"], t["overlap_param_gather"], t["grad_dtype"]) == (
        True, True, "fp32")
    # 24.3 s (the first iteration: set-up) left out; the median of 3120.4, 3115.9, 3133.1,
    # 3110.0, 3128.7 ms.
    assert run["measured_step_time_s"] == pytest.approx(3.1204)
    assert notes == []
    log = read_log(LOG.read_text())
    assert log.padded_vocab == 128256 and len(log.intervals) == 6
    assert log.args["attention_backend"] == "AttnBackend.fused"


def test_layout_strings_unroll_as_megatron_unrolls_them():
    # Megatron-Core's docstring example, 'Ettt|(tt|)*29,m|L' without its MTP module, on 4
    # ranks: 32 virtual stages, the 31st empty (where the module was), the 32nd the loss.
    assert layout_chunks("Ettt|(tt|)*29,|L", 4) == (
        (3, 2, 2, 2, 2, 2, 2, 2), (2,) * 8, (2,) * 7 + (0,), (2,) * 7 + (0,))
    assert layout_chunks("Et*3|t*3|t*3|t*2L", 2) == ((3, 3), (3, 2))
    with pytest.raises(PlannerInputError, match="not a layout of 2 pipeline ranks"):
        layout_chunks("Ett|tt|ttL", 2)             # 3 virtual stages over 2 ranks
    with pytest.raises(PlannerInputError, match="not a layout"):
        layout_chunks("Ett|tx|ttL", 3)


def swap(text: str, name: str, value: str) -> str:
    """The log with one printed argument's value changed (or added)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"[rank0]:   {name} "):
            lines[i] = f"[rank0]:   {name} {'.' * (48 - len(name))} {value}"
            return "\n".join(lines)
    at = next(i for i, line in enumerate(lines) if "end of arguments" in line)
    lines.insert(at, f"[rank0]:   {name} {'.' * (48 - len(name))} {value}")
    return "\n".join(lines)


def moe(text: str) -> str:
    """The log of the same run with 8 experts, top-2 (a Mixtral-like layer)."""
    return swap(swap(swap(text, "num_experts", "8"), "moe_router_topk", "2"),
                "moe_token_dispatcher_type", "alltoall")


def test_a_moe_variant_of_the_log_reads():
    run, notes = anchor_run(moe(LOG.read_text()), {"preset": "dgx-h100"})
    assert (run["model"]["num_experts"], run["model"]["moe_top_k"]) == (8, 2)
    assert run["model"]["moe_ffn_hidden_size"] == 14336        # Megatron's default: ffn
    assert (run["plan"]["ep"], run["plan"]["etp"]) == (1, 1)
    assert run["training"]["moe_dispatcher"] == "alltoall" and notes


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace("------------------------ arguments", "args"), "log"),
    (lambda t: t.split("end of arguments")[0], "log"),
    (lambda t: t.split("> initializing")[0], "log"),                        # no iterations
    (lambda t: swap(t, "multi_latent_attention", "True"), "log.kv_lora_rank"),
    (lambda t: swap(t, "fp8_recipe", "custom"), "log.fp8_recipe"),
    (lambda t: swap(t, "world_size", "30"), "log.world_size"),
    (lambda t: swap(t, "tensor_model_parallel_size", "None"), "log.tensor_model_parallel_size"),
    (lambda t: swap(t, "cp_comm_type", "['allgather']"), "log.cp_comm_type"),
    (lambda t: swap(moe(t), "moe_token_dispatcher_type", "allgather"),
     "log.moe_token_dispatcher_type"),
    (lambda t: swap(moe(t), "moe_layer_freq", str([1, 0] * 16)), "log.moe_layer_freq"),
    (lambda t: swap(t, "num_experts", "8"), "log.moe_router_topk"),
    (lambda t: swap(t, "deepspeed", "True"), "log.deepspeed"),
    (lambda t: t.replace(" > padded vocab", " > vocab"), "log"),
])
def test_what_a_log_cannot_give_is_refused_by_name(edit, field):
    with pytest.raises(PlannerInputError) as exc:
        anchor_run(edit(LOG.read_text()), {"preset": "dgx-h100"})
    assert exc.value.field == field, exc.value


def test_one_logged_interval_or_a_noisy_run_is_said():
    text = LOG.read_text()
    one = "\n".join(line for line in text.splitlines()
                    if "elapsed time" not in line or "iteration        1/" in line)
    run, notes = anchor_run(one, {"preset": "dgx-h100"})
    assert run["measured_step_time_s"] == pytest.approx(24.3105)     # all there is
    assert any("warm-up" in n for n in notes)
    # Two slow intervals of five (a checkpoint, say): the median keeps 3120.4 ms; the
    # spread (4400 - 3110) / 3120.4 = 41% is said.
    noisy = text.replace("3133.1", "4400.0").replace("3128.7", "4300.0")
    run, notes = anchor_run(noisy, {"preset": "dgx-h100"})
    assert run["measured_step_time_s"] == pytest.approx(3.1204)
    assert any("spread 41%" in n for n in notes), notes


def test_a_moe_log_reads_its_experts_and_says_what_it_cannot():
    req, est = launched("moe-mixtral-ep")
    run, got = read_back(est, req.model, req.cluster)
    assert run["model"]["num_experts"] == req.model.num_experts
    assert run["training"]["moe_dispatcher"] == req.training.moe_dispatcher
    text = megatron_log(est.launch.megatron_args, est.gpus_used, 32000, 32000, [1.0, 2.0])
    fit = fit_anchor(AnchorRequest.model_validate({"runs": [{
        "megatron_log": text, "cluster": req.cluster.model_dump(mode="json")}]}))
    assert any("moe_load_imbalance" in n for n in fit.notes)
    assert fit.runs[0].measured_step_time_s == 0.002


def test_cli_reads_logs_and_pipes_them_into_the_anchor(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["calibrate", "megatron-run", str(LOG), "--cluster", "dgx-h100"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)
    assert runs["runs"][0]["cluster"] == {"preset": "dgx-h100", "num_nodes": 4}
    assert runs["runs"][0]["name"] == LOG.name
    fit = runner.invoke(app, ["calibrate", "anchor", "-", "--json"], input=res.stdout)
    assert fit.exit_code == 0, fit.output
    body = json.loads(fit.stdout)
    assert abs(body["runs"][0]["anchored_error_pct"]) < 0.05
    # A log the reader refuses: the file and the argument named, exit 1, no traceback.
    bad = tmp_path / "custom.log"
    bad.write_text(swap(LOG.read_text(), "fp8_recipe", "custom"))
    res = runner.invoke(app, ["calibrate", "megatron-run", str(bad), "--cluster", "dgx-h100"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"{bad}: log.fp8_recipe: the fp8 recipe 'custom'" in " ".join(res.output.split())
    # MXFP8 the reader takes, and the run is refused for the GPU it names: no block-scaled
    # tensor cores on an H100.
    mx = tmp_path / "mxfp8.log"
    mx.write_text(swap(LOG.read_text(), "fp8_recipe", "mxfp8"))
    res = runner.invoke(app, ["calibrate", "megatron-run", str(mx), "--cluster", "dgx-h100"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert (f"{mx}: training.fp8_recipe: GPU 'h100-sxm' has no block-scaled fp8 tensor cores"
            in " ".join(res.output.split()))


def test_settings_costed_otherwise_are_said():
    text = swap(LOG.read_text(), "gradient_accumulation_fusion", "False")
    run, notes = anchor_run(text, {"preset": "dgx-h100"})
    assert [n.split(" ")[0] for n in notes] == ["--no-gradient-accumulation-fusion:"]
    same, _ = anchor_run(LOG.read_text(), {"preset": "dgx-h100"})
    assert run == same                    # the request itself is the same


def test_tp_comm_overlap_is_read_into_the_training_not_said():
    """--tp-comm-overlap (the log's tp 2 with sequence parallelism) is the training's
    tp_comm_overlap, which the planner costs (cost/tp_overlap.py); nothing else changes."""
    same, _ = anchor_run(LOG.read_text(), {"preset": "dgx-h100"})
    run, notes = anchor_run(swap(LOG.read_text(), "tp_comm_overlap", "True"),
                            {"preset": "dgx-h100"})
    assert not any("tp-comm-overlap" in n for n in notes)
    assert (same["training"]["tp_comm_overlap"], run["training"]["tp_comm_overlap"]) == (
        "none", "te")
    assert run["plan"]["sequence_parallel"] and run["plan"]["tp"] == 2
    assert {**run, "training": {**run["training"], "tp_comm_overlap": "none"}} == same


def test_junk_in_any_argument_read_is_a_named_error_never_a_crash(monkeypatch):
    """Every argument the reader reads (recorded on the MoE variant of the log), printed as
    junk: zero, negative, text, lists, dicts, huge. The run is read and estimated, or refused
    with PlannerInputError; never another exception (the service's 500)."""
    from planner.calibration import megatron_log
    from planner.calibration.anchor import MegatronLogRun

    read: set[str] = set()
    get = megatron_log._Args.get

    def recording(self, name, default=None):
        read.add(name)
        return get(self, name, default)

    monkeypatch.setattr(megatron_log._Args, "get", recording)
    base = swap(swap(moe(LOG.read_text()), "cp_comm_type", "['a2a+p2p']"),
                "hierarchical_context_parallel_sizes", "[2, 1]")
    anchor_run(base, {"preset": "dgx-h100"})
    monkeypatch.setattr(megatron_log._Args, "get", get)
    assert len(read) == 59, sorted(read)      # the README quotes it
    junk = ["0", "-1", "abc", "None", "[1, 2]", "1.5", "True", "[]", "''", "10**12",
            "999999999999", "{'a': 1}", "(1, 2)", "[[1]]"]
    refused = 0
    for name in sorted(read):
        for value in junk:
            item = MegatronLogRun(megatron_log=swap(base, name, value),
                                  cluster={"preset": "dgx-h100"})
            try:
                run, _ = item.anchor_run(0)
                estimate(run.model, run.cluster, run.training, run.plan)
            except PlannerInputError:
                refused += 1
    assert refused >= 200, refused


@pytest.mark.parametrize("stages, standalone", [((7, 8, 8, 8, 8, 8, 8, 6), False),
                                                ((9, 8, 8, 8, 8, 8, 6, 6), True)])
def test_the_published_deepseek_v3_layouts_read_back(stages, standalone):
    """DeepSeek-V3 (multi-latent attention, a multi-token prediction module, 3 dense layers
    first) on 1,024 H100 in the two layouts NVIDIA published, the module beside the loss
    ('Et|(tt|)*30mL') and standing alone ('Et*3|(tt|)*29m|L'): the log of either reads back
    into the same plan and prediction."""
    from tests.test_mtp import DSV3, DSV3_TRAINING, H100_1024, _dsv3

    est = estimated(DSV3, H100_1024, DSV3_TRAINING, _dsv3(stages, standalone))
    # NVIDIA's benchmarks force-balance the routing: no log says so.
    run, got = read_back(est, DSV3, H100_1024, moe_load_imbalance=1.0)
    assert got.step_time_s == est.step_time_s
    assert got.layers_per_chunk == est.layers_per_chunk
    assert run["plan"].get("mtp_standalone", False) is standalone
    assert run["model"]["mtp_num_layers"] == 1 and run["model"]["kv_lora_rank"] == 512
    assert run["model"]["first_k_dense_layers"] == 3


def test_cli_takes_a_cluster_file(tmp_path):
    """--cluster names a cluster JSON file (a spec of one's own): the run keeps the whole spec,
    its node count from the log."""
    spec = {"name": "lab", "num_nodes": 1, "gpus_per_node": 8, "gpu": {"preset": "h100-sxm"},
            "intra_node": {"kind": "nvswitch", "bandwidth_gb_per_s": 450.0, "latency_us": 1.0},
            "inter_node": {"kind": "infiniband", "bandwidth_gb_per_s": 200.0, "latency_us": 5.0,
                           "nics_per_node": 4}}
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(spec))
    res = CliRunner().invoke(app, ["calibrate", "megatron-run", str(LOG), "--cluster",
                                   str(path)])
    assert res.exit_code == 0, res.output
    cluster = json.loads(res.stdout)["runs"][0]["cluster"]
    assert (cluster["name"], cluster["num_nodes"], cluster["gpus_per_node"]) == ("lab", 4, 8)


def test_cli_names_a_file_it_cannot_read(tmp_path):
    res = CliRunner().invoke(app, ["calibrate", "megatron-run", str(tmp_path / "none.log"),
                                   "--cluster", "dgx-h100"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"cannot read {tmp_path / 'none.log'}" in " ".join(res.output.split())


def test_a_nesting_bomb_in_an_argument_is_text_not_a_crash():
    bomb = "[" * 200_000 + "]" * 200_000
    with pytest.raises(PlannerInputError) as exc:
        anchor_run(swap(LOG.read_text(), "num_layers", bomb), {"preset": "dgx-h100"})
    assert exc.value.field == "log.num_layers"
    deep = "[" * 5_000 + "]" * 5_000            # short enough to parse: Python's own limit
    with pytest.raises(PlannerInputError) as exc:
        anchor_run(swap(LOG.read_text(), "num_layers", deep), {"preset": "dgx-h100"})
    assert exc.value.field == "log.num_layers"
    assert len(str(exc.value)) < 300                # the error does not echo the bomb


def test_a_layout_that_unrolls_without_end_is_refused_before_it_is_built():
    for layout in ("Et|(tt|)*999999999999|L", "E" + "(t)*99999" * 50 + "|L",
                   "Et*99999999999|L"):
        with pytest.raises(PlannerInputError, match="unrolls to more"):
            layout_chunks(layout, 2)


def test_a_long_log_is_read_from_its_essential_lines(tmp_path):
    """A log past what a run sends the service (900,000 characters: NCCL's INFO lines, say)
    reads the same through the CLI, which keeps the lines the reader reads."""
    from planner.calibration.megatron_log import essential

    noise = "".join(f"[rank0]: node0:1234:1234 [0] NCCL INFO Channel {i:02d}/32 : 0 1 2 3\n"
                    for i in range(20_000))
    text = LOG.read_text()
    cut = text.index("[rank0]:  [2026")
    long = noise + text[:cut] + noise + text[cut:]
    assert len(long) > 900_000 and len(essential(long)) < len(text)
    assert anchor_run(essential(long), {"preset": "dgx-h100"}) == anchor_run(
        text, {"preset": "dgx-h100"})
    path = tmp_path / "long.log"
    path.write_text(long)
    res = CliRunner().invoke(app, ["calibrate", "megatron-run", str(path), "--cluster",
                                   "dgx-h100"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["runs"][0]["measured_step_time_s"] == pytest.approx(3.1204)


def test_malformed_iteration_times_are_not_read_as_numbers():
    """'(ms): ...' or '(ms): .' is no time: such lines are not intervals (before, float('...')
    raised a bare ValueError, the service's 500)."""
    text = LOG.read_text().replace("(ms): 3133.1", "(ms): ...").replace("(ms): 3128.7",
                                                                          "(ms): .")
    run, _ = anchor_run(text, {"preset": "dgx-h100"})
    # The median of 3120.4, 3115.9 and 3110.0 ms, the two malformed lines skipped.
    assert run["measured_step_time_s"] == pytest.approx(3.1159)
    only_bad = "\n".join(line.replace("(ms): 3", "(ms): .") for line in LOG.read_text()
                         .replace("(ms): 24310.5", "(ms): .").splitlines())
    with pytest.raises(PlannerInputError, match="no 'elapsed time per iteration"):
        anchor_run(only_bad, {"preset": "dgx-h100"})
