"""``frameworks.rules_mask`` narrows the rules' inputs to the plans not yet refused (and to
the plans it is asked about), and ``space.runs_on`` asks each framework only about the plans
none before it runs: both must give what every rule over every plan gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from planner.frameworks import (
    FRAMEWORKS,
    RULES,
    model_rule_args,
    rules_context,
    rules_mask,
    runs_mask,
)
from planner.search import PlanRequest
from planner.search.space import _schedule_facts, build_space, runs_on
from tests.test_search import random_request


def _lattice(req: PlanRequest):
    """The request's plans before any framework's rules (``search.framework: "any"``)."""
    search = req.search.model_copy(update={"framework": "any"})
    return build_space(req.model, req.cluster, req.training, search).plans


def _every_rule(framework: str, plans, req: PlanRequest) -> np.ndarray:
    m, even = _schedule_facts(plans, req.model, req.training)
    moe, mtp, autotp, gqa = model_rule_args(req.model)
    ctx = rules_context(plans, m, even, req.training, moe=moe, mtp=mtp, autotp=autotp, gqa=gqa)
    ok = np.ones(len(plans), dtype=bool)
    for fw, _, _, pred in RULES:
        if fw == framework:
            ok &= ~np.asarray(pred(ctx), dtype=bool)
    return ok


def _check(req: PlanRequest) -> dict[str, int]:
    """The plans of the request's lattice each framework runs, checked."""
    plans = _lattice(req)
    m, even = _schedule_facts(plans, req.model, req.training)
    want = {fw: _every_rule(fw, plans, req) for fw in FRAMEWORKS}
    moe, mtp, autotp, gqa = model_rule_args(req.model)
    ctx = rules_context(plans, m, even, req.training, moe=moe, mtp=mtp, autotp=autotp, gqa=gqa)
    only = np.random.default_rng(len(plans)).random(len(plans)) < 0.6
    for fw in FRAMEWORKS:
        got = runs_mask(fw, plans, m, even, req.training, *model_rule_args(req.model))
        np.testing.assert_array_equal(got, want[fw], err_msg=fw)
        # Over a subset of the plans: the same answers there, False elsewhere.
        np.testing.assert_array_equal(rules_mask(fw, ctx, only=only), want[fw] & only,
                                      err_msg=fw)
    np.testing.assert_array_equal(runs_on(plans, req.model, req.training, FRAMEWORKS),
                                  np.logical_or.reduce([want[fw] for fw in FRAMEWORKS]))
    return {"plans": len(plans), **{fw: int(want[fw].sum()) for fw in FRAMEWORKS}}


@pytest.mark.parametrize("body", [
    {"model": {"preset": "qwen3-30b-a3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
     "training": {"global_batch_size": 256, "seq_length": 4096}},
    {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
     "training": {"global_batch_size": 512, "seq_length": 8192, "precision": "fp8"}},
    {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
     "training": {"global_batch_size": 64, "seq_length": 8192, "grad_dtype": "bf16",
                  "optimizer_state_dtype": "bf16", "dropout": True}},
    {"model": {"preset": "deepseek-v3"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
     "training": {"global_batch_size": 1024, "seq_length": 4096, "moe_dispatcher": "deepep"}},
], ids=["qwen3-30b-a3b", "llama3-70b-fp8", "llama3-8b-bf16-states", "deepseek-v3-deepep"])
def test_narrowed_rules_refuse_what_every_rule_refuses(body):
    assert _check(PlanRequest.model_validate(body))["plans"] > 1000


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed"])
def test_each_framework_over_the_plans_the_ones_before_it_do_not_run(framework):
    """Under a framework's own training (``FRAMEWORK_TRAINING``) it runs plans of its own."""
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
        "training": {"global_batch_size": 256, "seq_length": 8192},
        "search": {"framework": framework}})
    ran = _check(req)
    assert ran[framework] > 100


def test_narrowed_inputs_read_as_the_whole_ones_do():
    """A rule reading its inputs by ``c[key]``, ``c.get(key)`` or ``key in c`` sees the
    narrowed plans' values, whatever it read before."""
    from planner.frameworks import _Narrowed

    base = {"n": 4, "tp": np.array([1, 2, 4, 8]), "moe": True, "seq": 4096}
    keep = np.array([True, False, True, True])
    c = _Narrowed(_Narrowed(base, keep), np.array([False, True, True]))
    assert c["n"] == 2 and list(c.get("tp")) == [4, 8] and list(c["tp"]) == [4, 8]
    assert "seq" in c and c.get("seq") == 4096 and c["moe"] is True
    assert "missing" not in c and c.get("missing", 7) == 7


def test_random_requests_run_on_the_same_plans():
    rng = random.Random(5)
    sizes = [_check(random_request(rng))["plans"] for _ in range(25)]
    assert sum(sizes) > 1000
