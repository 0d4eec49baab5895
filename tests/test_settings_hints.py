"""Settings hints: training settings outside the plan space under which the best plan is
faster (``planner.search.hints``), in the result of ``planner plan`` and ``POST /v1/plans``."""

import json

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.search import PlanRequest, answer, plan
from planner.search.hints import MIN_GAIN


def _request(preset="qwen3-30b-a3b", nodes=2, gbs=1024, search=None, **training):
    return PlanRequest.model_validate({
        "model": {"preset": preset},
        "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
        "training": {"global_batch_size": gbs, "seq_length": 4096, "precision": "bf16",
                     **training},
        "search": {"top_k": 1, **(search or {})}})


@pytest.fixture(scope="module")
def qwen3_30b():
    req = _request()
    return req, answer(req)


def test_moe_without_deepep_or_overlap_is_told_what_they_would_change(qwen3_30b):
    # Qwen3-30B-A3B on 16 H100 under the default dispatch (all-to-all, not overlapped): the
    # best plan keeps EP off the critical path with pp 2 and ep 8. With DeepEP and the
    # all-to-alls overlapped, the best plan is Megatron-Bridge's published one for this model
    # and these GPUs (tp1 pp1 ep16), at least MIN_GAIN faster.
    req, result = qwen3_30b
    (hint,) = result.settings_hints
    assert hint.changes == {"moe_dispatcher": "deepep", "moe_a2a_overlap": True}
    assert (hint.plan["ep"], hint.plan["tp"], hint.plan["pp"]) == (16, 1, 1)
    best = result.plans[0]
    assert hint.faster_pct == pytest.approx(100 * (1 - hint.step_time_s / best.step_time_s))
    assert hint.faster_pct >= 100 * MIN_GAIN
    # The README's figures.
    assert (best.pp, best.ep, round(best.step_time_s, 1)) == (2, 8, 26.9)
    assert (hint.plan["dp"], round(hint.step_time_s, 1), round(hint.faster_pct)) == (16, 20.4, 24)
    # Before the all-to-all dispatcher's sorts by local expert were costed: 25.6 s, 20%.
    from tests.cost_history import without_chunk_sorts
    with without_chunk_sorts():
        then = answer(_request())
    (old,) = then.settings_hints
    assert (round(then.plans[0].step_time_s, 1), round(old.faster_pct)) == (25.6, 20)
    # The hint is the search's own answer under the changed settings, nothing else.
    again = plan(_request(moe_dispatcher="deepep", moe_a2a_overlap=True))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
    assert {k: getattr(again.plans[0], k) for k in hint.plan} == hint.plan
    assert hint.mfu == pytest.approx(again.plans[0].mfu)
    # Its caveats are that plan's: a fine-grained MoE step time reads as a lower bound.
    assert hint.caveats == again.plans[0].caveats
    assert any("fine-grained MoE" in c for c in hint.caveats)


def test_a_hint_changes_only_what_the_request_does_not_already_run():
    # DeepEP without the overlap: the hint turns the overlap on and leaves the dispatcher.
    (hint,) = answer(_request(moe_dispatcher="deepep")).settings_hints
    assert hint.changes == {"moe_a2a_overlap": True}
    assert "DeepEP" not in hint.reason and "overlap hides" in hint.reason


def test_a_framework_is_told_only_of_what_it_runs():
    # torchtitan (grouped expert GEMMs, as it runs them) overlaps the EP all-to-alls only inside
    # DualPipeV, so its hint is DeepEP alone: from dp8 pp2 ep8 to dp4 pp4 ep4, the step 8%
    # shorter, both with its FSDP under the pipeline as ZeRO-1. Asked for both, every EP plan
    # would be refused and nothing would beat the answer. (Before torchtitan's FSDP under a
    # pipeline was costed as the ZeRO-1 it runs, the answer was the ZeRO-3 dp8 pp2 ep8 and the
    # hint kept ep8, 6% shorter.) Since its FSDP's fp32 accumulation of every micro-batch's
    # gradients under the pipeline is costed (training.microbatch_grad_upcast, which a
    # torchtitan search sets), the hint keeps the answer's dp8 pp2 ep8, 6% shorter: dp4 pp4
    # ep4 holds twice the experts a GPU, whose gradients it accumulates every micro-batch.
    # Since its MoE layer's own token copies are costed (training.moe_routing 'torchtitan':
    # eager gathers, a padded permutation and an fp32 combine, which DeepEP's kernels do
    # instead), DeepEP gains 17% on the same dp8 pp2 ep8.
    # (Megatron-Core's all-to-all dispatcher's sorts by local expert, costed since, are not
    # torchtitan's: the two earlier answers are replayed without them.)
    # (The two earlier answers are replayed with Megatron's loss, as every loss was costed
    # then; a torchtitan search now costs the compiled loss its artifact runs, training.
    # loss_implementation 'fused', which gives the same answer.)
    from tests.cost_history import fused_moe_routing, without_chunk_sorts, without_grad_upcast
    with without_grad_upcast(), fused_moe_routing(), without_chunk_sorts():
        before = answer(_request(search={"framework": "torchtitan"}, moe_expert_gemm="grouped",
                                 microbatch_grad_upcast=False, moe_routing="fused",
                                 loss_implementation="megatron"))
    with fused_moe_routing(), without_chunk_sorts():
        fused = answer(_request(search={"framework": "torchtitan"}, moe_expert_gemm="grouped",
                                moe_routing="fused", loss_implementation="megatron"))
    result = answer(_request(search={"framework": "torchtitan"}, moe_expert_gemm="grouped"))
    assert result.plans[0].frameworks == ["torchtitan"]
    for res, shape, faster in ((before, (4, 4, 4, 1), 8), (fused, (8, 2, 8, 1), 6),
                               (result, (8, 2, 8, 1), 17)):
        (hint,) = res.settings_hints
        assert hint.changes == {"moe_dispatcher": "deepep"} and "overlap" not in hint.reason
        best = res.plans[0]
        assert (best.dp, best.pp, best.ep, best.zero_stage) == (8, 2, 8, 1)
        assert (hint.plan["dp"], hint.plan["pp"], hint.plan["ep"], hint.plan["zero_stage"]) == (
            shape)
        assert round(hint.faster_pct) == faster


def test_no_hint_where_the_request_already_runs_them_or_nothing_changes():
    assert not answer(_request(moe_dispatcher="deepep", moe_a2a_overlap=True)).settings_hints
    # A dense model has no dispatch to change; a MoE model whose all-to-alls are cheap
    # (Mixtral 8x7B, 2 of 8 experts) gains less than MIN_GAIN.
    assert not answer(_request("llama3-8b", nodes=1, gbs=64)).settings_hints
    assert not answer(_request("mixtral-8x7b", nodes=4, gbs=256)).settings_hints
    # A framework that has neither setting gets no hint, and no error: DeepSpeed. (Its AutoEP
    # is slower here, tests/test_deepspeed_autoep.py, so no hint of that either.)
    deepspeed = answer(_request(search={"framework": "deepspeed"}))
    assert deepspeed.plans and not deepspeed.settings_hints
    # A search its time limit cut short spends no more time on a second one.
    late = answer(_request(search={"time_limit_ms": 1}))
    assert late.search.status == "FEASIBLE" and late.plans and not late.settings_hints
    # Nothing fits: no best plan to compare with, no hint.
    none = answer(_request("qwen3-235b-a22b", nodes=1, gbs=64))
    assert not none.plans and not none.settings_hints


def test_the_cli_prints_the_hint_and_its_json_carries_it(tmp_path, qwen3_30b):
    req, result = qwen3_30b
    path = tmp_path / "req.json"
    path.write_text(json.dumps(req.model_dump(mode="json")))
    out = CliRunner().invoke(app, ["plan", str(path), "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert body["settings_hints"] == [h.model_dump(mode="json") for h in result.settings_hints]
    human = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "250"})
    assert human.exit_code == 0
    line = " ".join(human.output.split())
    assert 'with training moe_dispatcher "deepep", moe_a2a_overlap true' in line
    assert f"({result.settings_hints[0].faster_pct:.0f}% faster)" in line


def test_the_service_returns_and_stores_the_hint(qwen3_30b, tmp_path):
    from fastapi.testclient import TestClient

    from api.main import create_app
    from api.settings import Settings

    req, result = qwen3_30b
    body = {"model": {"preset": "qwen3-30b-a3b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"global_batch_size": 1024, "seq_length": 4096, "precision": "bf16"},
            "search": {"top_k": 1}}
    url = f"sqlite:///{tmp_path / 'planner.db'}"
    with TestClient(create_app(Settings(database_url=url))) as c:
        r = c.post("/v1/plans", json=body)
        assert r.status_code == 201, r.text
        hints = r.json()["settings_hints"]
        assert hints == [h.model_dump(mode="json") for h in result.settings_hints]
        assert c.get(r.headers["location"]).json()["settings_hints"] == hints
        schema = c.get("/openapi.json").json()["components"]["schemas"]
        assert "settings_hints" in schema["PlanResult"]["properties"]


def _long_context(ring="te", **search):
    training = {"global_batch_size": 8, "seq_length": 16384}
    return PlanRequest.model_validate({
        "model": {"preset": "gpt3-175b"},
        "cluster": {"preset": "dgx-h100", "num_nodes": 16},
        "training": {**training, **({"ring_attention": ring} if ring else {})},
        "search": {"top_k": 1, **search}})


def test_a_context_parallel_answer_is_told_of_the_all_to_all_where_it_wins():
    # GPT-3 175B (96 heads, no GQA) at 16K tokens on 128 H100 with cp held at 16: under
    # Transformer Engine's ring each of 16 steps exchanges K,V across nodes beside a
    # 1,024-token chunk's attention, too little to hide it. The all-to-all runs the attention
    # once over all 16,384 tokens on 6 of the 96 heads.
    req = _long_context(framework="megatron", cp=16)
    result = answer(req)
    (hint,) = result.settings_hints
    best = result.plans[0]
    assert hint.changes == {"ring_attention": "a2a"} and "whole sequence" in hint.reason
    assert best.cp == hint.plan["cp"] == 16
    assert hint.faster_pct == pytest.approx(100 * (1 - hint.step_time_s / best.step_time_s))
    assert hint.faster_pct >= 100 * MIN_GAIN
    # The hint is the search's own answer with the all-to-all, nothing else.
    again = plan(_long_context("a2a", framework="megatron", cp=16))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
    assert {k: getattr(again.plans[0], k) for k in hint.plan} == hint.plan
    # The exposed CP time is what changed. The README's figures.
    assert again.plans[0].breakdown["cp_comm"] < best.breakdown["cp_comm"]
    assert (round(best.breakdown["cp_comm"], 1), hint.plan["tp"], round(hint.faster_pct)) == (
        4.5, 1, 49)


def test_no_all_to_all_hint_where_it_cannot_run_or_the_answer_has_no_cp():
    # torchtitan runs PyTorch's ring only (its search's default): it has plans, no hint.
    titan = answer(_long_context(None, framework="torchtitan", cp=16))
    assert titan.plans and titan.plans[0].cp == 16 and not titan.settings_hints
    # A request already on the all-to-all, or whose best plan has cp 1, is not told.
    assert not answer(_long_context("a2a", framework="megatron", cp=16)).settings_hints
    free = answer(_long_context(framework="megatron", cp=1))
    assert free.plans[0].cp == 1 and not free.settings_hints
    # Inside one node the two are within MIN_GAIN: Llama 3 8B on 8 H100 at 16K to 128K
    # tokens picks cp 2 to 8 under the ring and is told nothing.
    for seq, cp in ((16384, 2), (131072, 8)):           # the README's cp 2 and 8
        one_node = answer(PlanRequest.model_validate({
            "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 8, "seq_length": seq},
            "search": {"framework": "megatron", "top_k": 1}}))
        assert one_node.plans[0].cp == cp and not one_node.settings_hints


def test_the_all_to_all_is_searched_only_where_the_ring_exposes_enough():
    """The second search runs only where the answer exposes at least MIN_GAIN of its step in
    the ring's exchanges: otherwise the answer's latency is not doubled for nothing."""
    from planner.search.hints import settings_hints

    calls = []

    def counting(req):
        calls.append(req.training.ring_attention)
        return plan(req)

    one_node = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "training": {"global_batch_size": 8, "seq_length": 131072},
        "search": {"framework": "megatron", "top_k": 1}})
    result = plan(one_node)
    best = result.plans[0]
    assert best.cp > 1 and best.breakdown["cp_comm"] < MIN_GAIN * best.step_time_s
    assert settings_hints(one_node, result, counting) == [] and calls == []
    across = _long_context(framework="megatron", cp=16)
    # Where it does, the all-to-all and the hierarchy at 8 and 4 ranks (96 heads) are searched.
    assert settings_hints(across, plan(across), counting)
    assert calls == ["a2a", "a2a+p2p", "a2a+p2p"]


def _llama70b_long(ring, nodes=4, seq=262144):
    return PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
        "training": {"global_batch_size": 1, "seq_length": seq, "ring_attention": ring},
        "search": {"framework": "megatron", "top_k": 1}})


def test_a_request_on_the_all_to_all_is_told_of_the_ring_where_the_heads_run_out():
    # Llama 3 70B (8 K,V heads) at 256K tokens on 32 H100: the all-to-all splits each
    # tensor-parallel rank's K,V heads over the cp ranks, so tp 4 leaves cp 2 and the plan
    # holds 131,072 tokens a GPU; the ring takes cp 8, and the hierarchy with all-to-alls over
    # 8 ranks (tp 1, a node each) and a ring of 4 over the nodes cp 32, 2.8% faster still:
    # the hint is the fastest of the two.
    result = answer(_llama70b_long("a2a"))
    best = result.plans[0]
    assert (best.tp, best.cp) == (4, 2)
    (hint,) = result.settings_hints
    assert hint.changes == {"ring_attention": "a2a+p2p", "cp_a2a_size": 8}
    assert (hint.plan["tp"], hint.plan["cp"]) == (1, 32)
    assert "no longer split" in hint.reason and "a2a+p2p" in hint.reason
    body = _llama70b_long("te").model_dump(mode="json")
    body["training"].update(ring_attention="a2a+p2p", cp_a2a_size=8)
    again = plan(PlanRequest.model_validate(body))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
    ring = plan(_llama70b_long("te")).plans[0]
    assert (ring.tp, ring.cp) == (4, 8)
    # The README's figures: 76% shorter, the ring's plan 75%.
    assert round(hint.faster_pct) == 76
    assert round(100 * (1 - ring.step_time_s / best.step_time_s)) == 75


def test_nothing_fits_under_the_all_to_all_says_how_far_the_ring_goes():
    # On 16 H100 nothing fits either way; under the all-to-all the answer says the ring
    # would allow cp 16 where the heads stop it at 8.
    none = answer(_llama70b_long("a2a", nodes=2))
    assert not none.plans
    assert any("ring_attention 'te'), which allows cp up to 16" in r and "stops at cp=8" in r
               and "the hierarchy (ring_attention 'a2a+p2p')" in r
               for r in none.infeasible_reasons)
    ring = answer(_llama70b_long("te", nodes=2))
    assert not ring.plans and not any("ring_attention" in r for r in ring.infeasible_reasons)


def test_a_ring_answer_is_told_of_the_hierarchy_where_it_wins():
    # Llama 3 8B (8 K,V heads) at 128K tokens on 32 H100 with cp held at 32: the all-to-all
    # cannot split 8 K,V heads over 32 ranks; Transformer Engine's ring runs 31 steps of
    # 4,096-token chunks, 24 across the network, exposing 1.8 s of a 13.8 s step. The hierarchy
    # with all-to-alls over 8 ranks (a node) and a ring of 4 over the nodes is 17% faster.
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
        "training": {"global_batch_size": 8, "seq_length": 131072},
        "search": {"framework": "megatron", "top_k": 1, "cp": 32}})
    result = answer(req)
    best = result.plans[0]
    (hint,) = result.settings_hints
    assert hint.changes == {"ring_attention": "a2a+p2p", "cp_a2a_size": 8}
    assert "8 consecutive CP ranks" in hint.reason
    body = req.model_dump(mode="json")
    body["training"].update(ring_attention="a2a+p2p", cp_a2a_size=8)
    again = plan(PlanRequest.model_validate(body))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
    # The README's figures.
    assert (round(best.step_time_s, 1), round(best.breakdown["cp_comm"], 1)) == (13.8, 1.8)
    assert round(hint.faster_pct) == 17


def test_a_request_on_the_hierarchy_is_told_of_what_exposes_less_and_can_apply_it():
    # GPT-3 175B at 16K tokens on 128 H100 with cp held at 16, asked on the hierarchy at 2
    # ranks: its ring of 8 steps across nodes exposes 2.0 s of a 6.6 s step; the all-to-all
    # over all 16 is 29% faster. The hint leaves the hierarchy and unsets its size, so the
    # request with the hint's changes applied is valid, and its answer is the hint's plan.
    body = _long_context("a2a", framework="megatron", cp=16).model_dump(mode="json")
    body["training"].update(ring_attention="a2a+p2p", cp_a2a_size=2)
    result = answer(PlanRequest.model_validate(body))
    best = result.plans[0]
    assert (round(best.step_time_s, 1), round(best.breakdown["cp_comm"], 1)) == (6.6, 2.0)
    (hint,) = result.settings_hints
    assert hint.changes == {"ring_attention": "a2a", "cp_a2a_size": None}
    assert round(hint.faster_pct) == 29
    applied = {**body, "training": {**body["training"], **hint.changes}}
    again = plan(PlanRequest.model_validate(applied))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
