"""``training.repeat_kv``: grouped-query attention whose model code expands K and V to every
query head before the attention op (torchtitan through v0.2.1, Meta's reference Llama) against
an attention op that takes them at their own head count (SDPA's enable_gqa, torchtitan v0.2.2;
Transformer Engine). The expansion costs where the planner costs the ops that see it: the
eager copy (``eager_elementwise``) and PyTorch's ring attention (``ring_attention`` 'torch',
'torch_allgather'), whose K,V all-gathers, gradient exchanges and fp32 merges scale with
the heads it receives."""

import pytest

from planner.cost.step import estimate
from planner.frameworks import capability_matrix, reasons_by_framework
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

GQA = ModelSpec.from_preset("llama3-8b")             # 32 query heads, 8 K,V heads of 128
CLUSTER = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
CP2 = ParallelPlan(dp=4, cp=2, micro_batch_size=1, recompute="none", zero_stage=3)


def training(repeat: bool, **kw) -> TrainingSpec:
    fields = {"global_batch_size": 8, "seq_length": 8192, "precision": "bf16",
              "zero3_per_parameter": True, "ring_attention": "torch_allgather",
              "repeat_kv": repeat, **kw}
    return TrainingSpec(**fields)


def cp_uses(est):
    return {c.op: c for c in est.communication if c.strategy == "CP"}


def test_the_ring_passes_k_and_v_at_the_heads_sdpa_receives():
    """Llama 3 8B, 8,192-token sequences over cp 2: a rank holds 4,096 tokens. Repeated, its
    K and V are 4,096 x 4,096 wide each, 2 x 4096 x 4096 x 2 = 67,108,864 bytes in bf16, and
    the all-gather over 2 ranks outputs 134,217,728; their fp32 gradients exchanged after each
    backward step are 2 x 4096 x 4096 x 4 = 134,217,728. At their own 8 heads of 128 (1,024
    wide) every one is a quarter: 33,554,432 each."""
    rep, own = (cp_uses(estimate(GQA, CLUSTER, training(r), CP2)) for r in (True, False))
    assert rep["all_gather"].message_bytes == 2 * 2 * 4096 * 4096 * 2 == 134_217_728
    assert rep["send_recv"].message_bytes == 2 * 4096 * 4096 * 4 == 134_217_728
    assert own["all_gather"].message_bytes == 2 * 2 * 4096 * 1024 * 2 == 33_554_432
    assert own["send_recv"].message_bytes == 2 * 4096 * 1024 * 4 == 33_554_432
    assert own["all_gather"].count_per_step == rep["all_gather"].count_per_step


def test_the_probe_replays_the_ring_at_the_kv_heads():
    """The validation probe's step pattern replays the exchanges as costed: a forward's
    cp - 1 = 1 pass of one rank's K,V (33,554,432 / 2 bytes at the 8 heads, 67,108,864
    expanded)."""
    from planner.cost import EfficiencyModel
    from planner.cost.tables import CostTables
    from planner.validation.pattern import step_pattern

    for repeat, own in ((False, 2 * 4096 * 1024 * 2), (True, 2 * 4096 * 4096 * 2)):
        tr = training(repeat)
        pat = step_pattern(estimate(GQA, CLUSTER, tr, CP2),
                           CostTables(GQA, CLUSTER, tr, EfficiencyModel()))
        assert pat["cp_fwd"] == [[own, 1]]


def test_the_ring_costs_less_without_the_expansion_and_mha_does_not_move():
    """The smaller exchanges and the fp32 merges of a quarter of the K,V elements shorten the
    step; a model with as many K,V heads as query heads (Llama 2 7B) is costed the same
    either way, and so is Transformer Engine's ring, which never expanded them."""
    rep, own = (estimate(GQA, CLUSTER, training(r), CP2) for r in (True, False))
    assert own.step_time_s < rep.step_time_s
    assert own.breakdown["cp_comm"] < rep.breakdown["cp_comm"]
    assert own.breakdown["compute"] < rep.breakdown["compute"]
    mha = ModelSpec.from_preset("llama2-7b")
    assert mha.kv_heads == mha.num_attention_heads
    a, b = (estimate(mha, CLUSTER, training(r), CP2).step_time_s for r in (True, False))
    assert a == b
    te = {r: estimate(GQA, CLUSTER, training(r, ring_attention="te"), CP2).step_time_s
          for r in (True, False)}
    assert te[True] == te[False]


def test_the_eager_expansion_copy_is_charged_only_where_the_code_expands():
    """Uncompiled model code (``eager_elementwise``): repeat_kv's expand-and-copy of K and V
    (read the kv heads, write every head, and back) is paid only under ``repeat_kv``."""
    plan = ParallelPlan(dp=8, micro_batch_size=1, recompute="none", zero_stage=3)
    tr = {r: training(r, eager_elementwise=True, ring_attention="te") for r in (True, False)}
    rep, own = (estimate(GQA, CLUSTER, tr[r], plan) for r in (True, False))
    assert own.step_time_s < rep.step_time_s
    compiled = {r: estimate(GQA, CLUSTER, training(r, ring_attention="te"), plan).step_time_s
                for r in (True, False)}
    assert compiled[True] == compiled[False]


def test_torchtitan_runs_only_its_own_head_count_where_the_expansion_costs_something():
    """v0.2.2 passes K and V to SDPA with enable_gqa: a plan costed with the expansion under
    its ring attention is refused for torchtitan, not one without CP and compiled (where the
    flag costs nothing), nor an MHA model's."""
    def titan(model, plan, tr):
        return reasons_by_framework(plan, 2, True, tr, gqa=model.grouped_query)["torchtitan"]

    refused = titan(GQA, CP2, training(True))
    assert any("training.repeat_kv" in r for r in refused)
    assert not any("training.repeat_kv" in r for r in titan(GQA, CP2, training(False)))
    dense = ParallelPlan(dp=8, micro_batch_size=1, recompute="none", zero_stage=3)
    assert not any("training.repeat_kv" in r for r in titan(GQA, dense, training(True)))
    mha = ModelSpec.from_preset("llama2-7b")
    assert GQA.grouped_query and not mha.grouped_query
    assert not ModelSpec.from_preset("deepseek-v3").grouped_query      # MLA: a K,V per head
    assert not any("training.repeat_kv" in r for r in titan(mha, CP2, training(True)))
    est = estimate(GQA, CLUSTER, training(True), CP2)
    assert "torchtitan" not in est.frameworks
    assert "torchtitan" in estimate(GQA, CLUSTER, training(False), CP2).frameworks
    assert capability_matrix()["grouped_query_attention"]["torchtitan"]["status"] == "yes"


def test_a_torchtitan_search_costs_its_ring_at_the_kv_heads():
    """A torchtitan search of a GQA model with context parallelism forced costs PyTorch's
    all-gather ring with K and V at their own head count (nothing asked: repeat_kv false), and
    a request that asks for the expansion finds no torchtitan plan with CP."""
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 8, "seq_length": 8192},
            "search": {"framework": "torchtitan", "cp": [2], "top_k": 1}}
    best = plan(PlanRequest.model_validate(body)).plans[0]
    gathers = [c for c in best.communication if c.strategy == "CP" and c.op == "all_gather"]
    tokens = 8192 // 2 * best.micro_batch_size
    assert [g.message_bytes for g in gathers] == [2 * 2 * tokens * 1024 * 2 // best.tp]
    asked = {**body, "training": {**body["training"], "repeat_kv": True}}
    assert plan(PlanRequest.model_validate(asked)).plans == []


def test_the_attention_op_keeps_the_expanded_k_and_v():
    """Without recompute every layer keeps what SDPA saves for its backward: K and V at the
    heads it received. Expanded, Llama 3 8B's 32 layers keep 2 x 4,096 tokens x (4,096 -
    1,024) x 2 bytes more each, 1.5 GiB on one micro-batch of 4,096 tokens (the allocator's
    10% fragmentation allowance on top, in the reserve)."""
    plan = ParallelPlan(dp=8, micro_batch_size=1, recompute="none", zero_stage=3)
    mem = {r: estimate(GQA, CLUSTER, training(r, seq_length=4096, ring_attention="te"),
                       plan).memory for r in (False, True)}
    extra = 32 * 2 * 4096 * (4096 - 1024) * 2
    assert (mem[True].activations_gib - mem[False].activations_gib) * 2 ** 30 == extra
    assert mem[True].reserved_gib - mem[False].reserved_gib == pytest.approx(
        0.1 * extra / 2 ** 30, rel=1e-9)
    mha = ModelSpec.from_preset("llama2-7b")
    same = {r: estimate(mha, CLUSTER, training(r, seq_length=4096, ring_attention="te"),
                        plan).memory.total_gib for r in (False, True)}
    assert same[True] == same[False]


def test_the_corpus_runs_that_expanded_keep_more_and_still_fit():
    """README: the corpus's 17 torchtitan runs that expanded K and V (repeat_kv true) are
    costed up to 1.7 GiB more than at their own head count, none of them past its GPU."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import published_accuracy

    every = [r for r in published_accuracy.load_runs() if r["training"].get("repeat_kv")]
    # ... and IBM's fms-fsdp rows of grouped-query models, which joined after (its attention
    # expands them too).
    runs = [r for r in every if r["source"] != "fms-fsdp"]
    assert len(runs) == 17
    fms = published_accuracy.evaluate_runs([r for r in every if r["source"] == "fms-fsdp"])
    assert len(fms) == 4 and all(x["fits_in_memory"] for x in fms)   # its 34b and 70b
    own = [{**r, "training": {**r["training"], "repeat_kv": False}} for r in runs]
    rep, at_own = (published_accuracy.evaluate_runs(x) for x in (runs, own))
    more = [a["memory_gib"] - b["memory_gib"] for a, b in zip(rep, at_own, strict=True)]
    assert (round(min(more), 1), round(max(more), 1)) == (0.0, 1.7)
    assert all(x["fits_in_memory"] for x in rep)
