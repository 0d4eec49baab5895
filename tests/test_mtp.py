"""Multi-token prediction (DeepSeek-V3 report section 2.2; Megatron-LM's MTP modules): the
modules' parameters counted by hand, their work on the last pipeline stage, their FLOPs against
Megatron-LM's formula, memory, frameworks, launch arguments, the search moving layers off the
stage that holds them, and the predicted trace."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, kernel_model, mtp_work
from planner.cost.memory import stage_params
from planner.cost.tables import CostTables
from planner.frameworks import reasons_by_framework
from planner.launch import with_launch
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.layout import explicit_layout, megatron_layout_string
from planner.validation.predicted_trace import _detail, predicted_trace, stage_times
from tests.launch_readers import megatron_parser, megatron_plan

H100 = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
DENSE = ModelSpec(name="dense", num_layers=8, hidden_size=1024, num_attention_heads=8,
                  ffn_hidden_size=4096, ffn_type="swiglu", vocab_size=32000)


def test_deepseek_v3_mtp_module_parameters_by_hand():
    m = ModelSpec.from_preset("deepseek-v3")
    assert m.mtp_num_layers == 1 and m.mtp_layer_is_moe
    h = 7168
    q = h * 1536 + 1536 + 1536 * 128 * (128 + 64)
    kv = h * (512 + 64) + 512 + 512 * 128 * (128 + 128)
    attention = q + kv + 128 * 128 * h
    assert attention == 187_107_328
    shared = h * 256 + 3 * h * 2048                  # router and the shared expert
    own = 2 * h + 2 * h * h + 3 * h                  # layer norms, eh_proj, three MTP norms
    assert m.mtp_nonexpert_params == attention + shared + own == 335_778_816
    assert m.mtp_expert_params == 256 * 3 * h * 2048
    # DeepSeek-V3's model card: 685B on disk = 671B main model + 14B MTP module, which also
    # holds its copies of the embedding and the output head.
    module = m.mtp_nonexpert_params + m.mtp_expert_params + 2 * 129280 * h
    assert module == pytest.approx(14e9, rel=0.05)
    assert m.num_params == pytest.approx(671e9, rel=0.005)     # the main model alone


def test_hf_import_reads_the_prediction_depth():
    cfg = {"model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 256,
           "num_attention_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 64,
           "n_routed_experts": 8, "num_experts_per_tok": 2, "vocab_size": 1000,
           "num_nextn_predict_layers": 2}
    assert ModelSpec.model_validate({"hf_config": cfg}).mtp_num_layers == 2
    cfg.pop("num_nextn_predict_layers")
    assert ModelSpec.model_validate({"hf_config": cfg}).mtp_num_layers == 0


def test_mtp_module_work_by_hand():
    """eh_proj is a column-parallel T x 2h by 2h x h / t GEMM; the rest moves 11 (forward)
    and 15 (backward) bytes per sequence-parallel hidden value."""
    m = ModelSpec.from_preset("deepseek-v3")
    tr = TrainingSpec(global_batch_size=8, seq_length=4096)
    eff = EfficiencyModel()
    w = mtp_work(m, tr, LayerShape(tp=2, sequence_parallel=True), H100.gpu, eff)
    assert w.flops == 2 * 4096 * 3584 * 14336 == pytest.approx(420.9e9, rel=1e-3)
    km = kernel_model(H100.gpu, tr, eff)
    values = 4096 / 2 * 7168 * 2
    assert w.fwd_s == pytest.approx(km.gemm(4096, 3584, 14336) + km.memory(11 * values, 5))
    assert w.bwd_s == pytest.approx(km.gemm(4096, 14336, 3584) + km.gemm(14336, 3584, 4096)
                                    + km.memory(15 * values, 6))


def _flops(e) -> float:
    """Model FLOPs of the step."""
    return e.tflops_per_gpu * 1e12 * e.step_time_s * e.gpus_used


def _pair(model, plan, training, cluster=H100):
    with_mtp = estimate(model.model_copy(update={"mtp_num_layers": 1}), cluster, training, plan)
    return with_mtp, estimate(model, cluster, training, plan)


def test_the_last_stage_runs_one_more_layer_and_one_more_head_pass():
    tr = TrainingSpec(global_batch_size=16, seq_length=2048)
    p = ParallelPlan(dp=2, tp=2, pp=2, sequence_parallel=True)
    m1 = DENSE.model_copy(update={"mtp_num_layers": 1})
    one, none = _pair(DENSE, p, tr)
    tables = CostTables(m1, H100, tr, EfficiencyModel())
    d = _detail(one, tables)
    f_mtp, b_mtp, tp_f, tp_b, _ = tables.mtp(2, 1, 1, 1, 8)
    assert tp_f > 0 and tp_b > tp_f           # eh_proj's TP collectives, exposed
    assert d["mtp_fwd"] == pytest.approx(d["layer_fwd"] + f_mtp + tp_f)
    assert d["mtp_bwd"] == pytest.approx(d["layer_bwd"] + b_mtp + tp_b)
    assert (d["mtp_heads_fwd"], d["mtp_heads_bwd"]) == (d["head_fwd"], d["head_bwd"])
    (f0, b0), (f1, b1) = stage_times(one, tables)
    (g0, c0), (g1, c1) = stage_times(none, CostTables(DENSE, H100, tr, EfficiencyModel()))
    assert (f0, b0) == pytest.approx((g0, c0))              # the first stage is unchanged
    assert f1 - g1 == pytest.approx(d["mtp_fwd"] + d["head_fwd"])
    assert b1 - c1 == pytest.approx(d["mtp_bwd"] + d["head_bwd"])
    assert one.step_time_s > none.step_time_s
    # The modules count in the model's FLOPs (as Megatron-LM's formula counts them).
    assert _flops(one) > _flops(none)


def test_mtp_flops_follow_megatrons_formula():
    """Megatron-LM's num_floating_point_operations adds per MTP module a transformer layer,
    its norms and projection (3h + 2h^2) and one more logit pass (h V): 6 FLOPs per token
    per weight (forward and backward), the attention core aside (short sequence here)."""
    tr = TrainingSpec(global_batch_size=8, seq_length=128)
    one, none = _pair(DENSE, ParallelPlan(dp=1), tr, ClusterSpec.from_preset("dgx-h100",
                                                                             num_nodes=1,
                                                                             gpus_per_node=1))
    h, V = 1024, 32000
    Vp = -(-V // 128) * 128
    layer = 4 * h * h + 3 * h * 4096 + 2 * h
    want = 6 * 8 * 128 * (layer + 3 * h + 2 * h * h + h * Vp)

    assert _flops(one) - _flops(none) == pytest.approx(want, rel=0.03)


def test_mtp_parameters_sit_on_the_last_stage():
    m1 = DENSE.model_copy(update={"mtp_num_layers": 1})
    tied = m1.model_copy(update={"tied_embeddings": True})
    base = stage_params(DENSE, 2, 4, 2, 0, 1)
    # Untied, pipelined: the modules and their copy of the embedding.
    assert stage_params(m1, 2, 4, 2, 0, 1) - base == pytest.approx(
        (m1.mtp_nonexpert_params + 32000 * 1024) / 2)
    # Tied: the last stage's embedding copy already serves the head and the modules.
    assert stage_params(tied, 2, 4, 2, 0, 1) - stage_params(
        DENSE.model_copy(update={"tied_embeddings": True}), 2, 4, 2, 0, 1) == pytest.approx(
        m1.mtp_nonexpert_params / 2)
    # Not on the other stages.
    assert stage_params(m1, 2, 4, 2, 1, 0) == stage_params(DENSE, 2, 4, 2, 1, 0)


def test_only_megatron_runs_multi_token_prediction():
    tr = TrainingSpec(global_batch_size=16, seq_length=2048)
    p = ParallelPlan(dp=2, tp=2, pp=2, sequence_parallel=True, zero_stage=1)
    r = reasons_by_framework(p, 4, True, tr, mtp=True)
    assert r["megatron"] == []
    assert any("multi-token prediction" in x for x in r["torchtitan"])
    assert any("multi-token prediction" in x for x in r["deepspeed"])
    assert "multi-token prediction" not in " ".join(
        reasons_by_framework(p, 4, True, tr)["torchtitan"])


def test_megatron_arguments_and_layout_place_the_modules_last():
    m1 = DENSE.model_copy(update={"mtp_num_layers": 2})
    tr = TrainingSpec(global_batch_size=16, seq_length=2048)
    p = ParallelPlan(dp=2, tp=2, pp=2, vpp=2, sequence_parallel=True, zero_stage=1,
                     layers_per_stage=(3, 5))
    est = estimate(m1, H100, tr, p)
    assert est.pipeline_layout == "custom"
    argv = with_launch(est, m1, H100, tr).launch.megatron_args
    a = megatron_parser().parse_args(argv)
    assert a.mtp_num_layers == 2
    assert a.pipeline_model_parallel_layout.endswith("mmL")
    got = megatron_plan(argv, est.gpus_used)      # checks Megatron's layout rules for 'm'
    assert got["layers_per_stage"] == [3, 5]
    assert megatron_layout_string(explicit_layout((3, 5), 2), 1) == "Ett|ttt|t|ttmL"


def test_the_search_takes_layers_off_the_stage_with_the_modules():
    def winner(mtp):
        return plan(PlanRequest.model_validate({
            "model": {"preset": "llama3-8b", "mtp_num_layers": mtp},
            "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "search": {"pp": 4, "tp": 2, "dp": 1, "vpp": 1, "rebalance_stages": True,
                       "top_k": 1}})).plans[0]

    without, with_mtp = winner(0), winner(1)
    assert with_mtp.layers_per_stage[-1] < without.layers_per_stage[-1]
    assert sum(with_mtp.layers_per_stage) == 32
    assert "torchtitan" not in with_mtp.frameworks and "megatron" in with_mtp.frameworks


def test_trace_of_an_mtp_plan_agrees_with_its_estimate():
    m = ModelSpec.from_preset("llama3-8b").model_copy(update={"mtp_num_layers": 1})
    tr = TrainingSpec(global_batch_size=32, seq_length=4096)
    est = estimate(m, H100, tr, ParallelPlan(dp=1, tp=2, pp=4, sequence_parallel=True))
    doc = predicted_trace(est, m, H100, tr)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    makespan_s = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert makespan_s == pytest.approx(est.step_time_s, rel=0.02)


DSV3 = ModelSpec.from_preset("deepseek-v3")
H100_1024 = ClusterSpec.from_preset("dgx-h100", num_nodes=128)
DSV3_TRAINING = TrainingSpec(global_batch_size=8192, seq_length=4096, precision="fp8",
                             moe_load_imbalance=1.0, moe_dispatcher="deepep",
                             moe_a2a_overlap=True, optimizer_state_dtype="bf16",
                             recompute_modules=("mla_up_proj", "mlp"))


def _dsv3(stages, standalone=False):
    return ParallelPlan(dp=64, tp=2, pp=8, vpp=4, ep=64, micro_batch_size=1,
                        recompute="selective", zero_stage=1, sequence_parallel=True,
                        layers_per_stage=stages, mtp_standalone=standalone)


@pytest.mark.parametrize("stages,standalone,published", [
    # Megatron-Bridge scripts/performance at fa0315ae2 (the 25.09 table), DeepSeek-V3 on H100.
    ((7, 8, 8, 8, 8, 8, 8, 6), False, "Et|(tt|)*30mL"),
    # Megatron Core MoE report (arXiv 2603.07685) section 9.2.2, DeepSeek-V3 on H100.
    ((9, 8, 8, 8, 8, 8, 6, 6), True, "Et*3|(tt|)*29m|L"),
])
def test_published_deepseek_v3_layouts_are_emitted_and_run_as_estimated(stages, standalone,
                                                                          published):
    """The two published DeepSeek-V3 layouts come out of their stage splits verbatim, and the
    event simulation of their schedule agrees with the estimate's closed form."""
    expanded = {"Et|(tt|)*30mL": "Et|" + "|".join(["tt"] * 30) + "|mL",
                "Et*3|(tt|)*29m|L": "Ettt|" + "|".join(["tt"] * 29) + "|m|L"}[published]
    est = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3(stages, standalone))
    argv = with_launch(est, DSV3, H100_1024, DSV3_TRAINING).launch.megatron_args
    assert argv[argv.index("--pipeline-model-parallel-layout") + 1] == expanded
    assert megatron_plan(argv, est.gpus_used)["layers_per_stage"] == list(stages)
    doc = predicted_trace(est, DSV3, H100_1024, DSV3_TRAINING)
    assert doc["metadata"]["simulated_pipeline_s"] == pytest.approx(
        est.step_time_s - est.breakdown["dp_comm"] - est.breakdown["zero_comm"]
        - est.breakdown["optimizer"], rel=0.01)


def test_a_heavy_last_chunk_on_the_first_rank_stalls_the_schedule():
    """Why the first rank's extra layers go to its first chunk: with the report's first rank
    as 2, 2, 2, 3 instead of 3, 2, 2, 2, the simulated schedule runs longer than the stage
    totals (all the closed form sees) allow."""
    from planner.cost.pipeline import makespan, simulate
    from planner.validation.predicted_trace import chunk_times

    est = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3((9, 8, 8, 8, 8, 8, 6, 6), True))
    assert est.layers_per_chunk[0] == [3, 2, 2, 2]
    fwd, bwd, p2p = chunk_times(est, CostTables(DSV3, H100_1024, DSV3_TRAINING,
                                                EfficiencyModel()))
    m, g = est.grad_accum_steps, est.microbatch_group_size
    layer_f, layer_b = fwd[1][0] / 2, bwd[1][0] / 2
    good = simulate(fwd, bwd, m, p2p, g).makespan
    fwd[0] = [fwd[0][0] - layer_f] + fwd[0][1:3] + [fwd[0][3] + layer_f]
    bwd[0] = [bwd[0][0] - layer_b] + bwd[0][1:3] + [bwd[0][3] + layer_b]
    bad = simulate(fwd, bwd, m, p2p, g).makespan
    totals = [sum(f) + sum(b) for f, b in zip(fwd, bwd, strict=True)]
    closed = float(makespan(max(totals), sum(totals), m, 4, 8, p2p)[0])
    assert good == pytest.approx(closed, rel=0.01) and bad > 1.03 * closed
    assert bad / closed - 1 == pytest.approx(0.05, abs=0.01)       # the 5% the README quotes


def test_standalone_mtp_runs_the_modules_on_the_stage_before_the_last():
    stages = (9, 8, 8, 8, 8, 8, 6, 6)
    alone = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3(stages, True))
    beside = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3(stages))
    assert alone.mtp_standalone and alone.pipeline_layout == "custom"
    assert alone.layers_per_chunk[-1] == [2, 2, 2, 0] and alone.layers_per_chunk[-2][-1] == 0
    tables = CostTables(DSV3, H100_1024, DSV3_TRAINING, EfficiencyModel())
    d = _detail(beside, tables)
    a, b = stage_times(alone, tables), stage_times(beside, tables)
    # The module's layer and projection move from the last stage to the one before it; both
    # head passes stay on the last.
    assert sum(a[6]) - sum(b[6]) == pytest.approx(d["mtp_fwd"] + d["mtp_bwd"])
    assert sum(b[7]) - sum(a[7]) == pytest.approx(d["mtp_fwd"] + d["mtp_bwd"])
    # Beside the loss, the last stage (6 layers, the module, two head passes) is the slowest;
    # alone, the first (9 layers) is.
    assert alone.step_time_s < 0.92 * beside.step_time_s
    # Its weights (and an embedding copy) move with it.
    assert stage_params(DSV3, 2, 8, 6, 0, 0, 1) - stage_params(DSV3, 2, 8, 6, 0, 0) == \
        pytest.approx((DSV3.mtp_nonexpert_params + DSV3.embedding_params) / 2)
    assert ParallelPlan.of(alone.model_dump()).mtp_standalone


def test_standalone_mtp_needs_interleaving_and_modules():
    from pydantic import ValidationError

    from planner.specs.plan import plan_violations

    with pytest.raises(ValidationError, match="mtp_standalone needs an interleaved"):
        ParallelPlan(dp=2, pp=4, mtp_standalone=True)
    plan = ParallelPlan(dp=1, tp=2, pp=2, vpp=2, sequence_parallel=True, mtp_standalone=True)
    bad = plan_violations(plan, DENSE, H100, TrainingSpec(global_batch_size=8, seq_length=1024))
    assert ("plan.mtp_standalone", "mtp_standalone places multi-token prediction modules; "
            "the model has none (model.mtp_num_layers is 0)") in bad


def test_a_chunking_the_closed_form_misjudges_carries_a_caveat():
    """Megatron-Bridge's pp 8 recipe stage split 8, ..., 8, 5 at vpp 4 leaves the last stage
    chunks of 2, 1, 1, 1 layers, the last beside the MTP module and two head passes: the
    closed form (stage totals) puts it 10% ahead of the published 7, ..., 8, 6 split, while the
    event simulation of its schedule runs 19% longer; the estimate says so. The published
    split has no such note."""
    light = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3((8, 8, 8, 8, 8, 8, 8, 5)))
    published = estimate(DSV3, H100_1024, DSV3_TRAINING, _dsv3((7, 8, 8, 8, 8, 8, 8, 6)))
    assert light.layers_per_chunk[-1] == [2, 1, 1, 1]
    assert light.step_time_s < 0.92 * published.step_time_s
    note = [c for c in light.caveats if "event simulation" in c]
    assert len(note) == 1 and "runs 19% longer" in note[0]
    assert not any("event simulation" in c for c in published.caveats)
    doc = predicted_trace(light, DSV3, H100_1024, DSV3_TRAINING)
    pipe = (light.step_time_s - light.breakdown["dp_comm"] - light.breakdown["zero_comm"]
            - light.breakdown["optimizer"])
    assert doc["metadata"]["simulated_pipeline_s"] > 1.15 * pipe
