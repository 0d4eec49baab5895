"""The search's capped ``compose`` drops the plans whose model states alone overflow before
costing the rest (``batch.compose``): what it returns must be what costing every plan
(``batch._compose``) returns, bit for bit, on every plan."""

from __future__ import annotations

import random

import numpy as np
import pytest

from planner.cost import batch
from planner.cost.tables import cost_tables
from planner.search import PlanRequest
from planner.search.space import build_space
from tests.test_search import random_request

FIELDS = ("step_time_s", "memory_bytes", "memory_stage", "model_flops", "hardware_flops", "m",
          "class_time", "class_memory", "layer_time", "class_layer_memory", "split_bound")


def _preset(model: str, nodes: int, gbs: int, seq: int, **search) -> PlanRequest:
    return PlanRequest.model_validate({
        "model": {"preset": model}, "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
        "training": {"global_batch_size": gbs, "seq_length": seq},
        "search": {"top_k": 3, **search}})


def _space(req: PlanRequest):
    space = build_space(req.model, req.cluster, req.training, req.search)
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    return space.plans, tables, req.cluster.gpu.memory_bytes * (1 - req.search.memory_headroom)


def _floors(plans, tables, any_split: bool) -> np.ndarray:
    """Per plan, the memory its model states and the reserve need (what ``compose`` drops
    a plan by)."""
    keys, inv = batch.unique_rows(batch.state_key(plans))
    kp = plans.take(batch._first_rows(inv, len(keys)))
    classes = batch.stage_classes(kp, tables.model.num_layers)
    st = batch.model_states(kp, tables, classes, classes[2], any_split, False)
    return (st.floor + tables.eff.memory_reserve_gib * 2**30)[inv]


def _dropped(plans, tables, cap: float, any_split: bool) -> int:
    """How many plans the states put over ``cap`` (what ``compose`` leaves out)."""
    return int((~(_floors(plans, tables, any_split) <= cap)).sum())


def _split_candidates(plans, bc: batch.BatchCost) -> np.ndarray:
    """Plans the uneven-split pass reads the terms of (``solver._uneven_splits``, without
    interleaved splits)."""
    return (np.isfinite(bc.split_bound) & (plans.pp > 1) & (plans.rnl == 0)
            & (plans.vpp == 1))


def assert_same(plans, a: batch.BatchCost, b: batch.BatchCost) -> None:
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for group in ("breakdown", "memory_parts"):
        x, y = getattr(a, group), getattr(b, group)
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{group}.{k}")
    if (a.split_terms is None) != (b.split_terms is None):
        # Equivalent where no plan is a candidate for an uneven split.
        assert not _split_candidates(plans, a).any()
    elif a.split_terms is not None and b.split_terms is not None:
        # (Read by the search only for plans with a finite split bound.)
        live = np.isfinite(a.split_bound)
        for k in a.split_terms:
            np.testing.assert_array_equal(a.split_terms[k][live], b.split_terms[k][live],
                                          err_msg=f"split_terms.{k}")


@pytest.mark.parametrize("any_split", [True, False])
@pytest.mark.parametrize("req", [
    _preset("llama3-405b", 128, 1024, 8192),
    _preset("llama3-70b", 16, 512, 8192, dp_replicate=[1, 2]),
    _preset("qwen3-30b-a3b", 4, 256, 4096),
    _preset("deepseek-v3", 64, 4096, 4096),
], ids=["llama3-405b", "llama3-70b-hybrid", "qwen3-30b-a3b", "deepseek-v3"])
def test_dropping_over_memory_plans_first_changes_nothing(req, any_split):
    plans, tables, cap = _space(req)
    dropped = _dropped(plans, tables, cap, any_split)
    assert 0 < dropped < len(plans)           # the path under test runs
    assert_same(plans, batch.compose(plans, tables, memory_cap=cap, any_split=any_split),
                batch._compose(plans, tables, memory_cap=cap, any_split=any_split))


def test_random_spaces_cost_the_same():
    """Random small spaces, under their own memory and under a cap between their plans'
    model states (so that some plans are dropped and some kept)."""
    rng = random.Random(20261205)
    ran = 0
    for _ in range(30):
        req = random_request(rng)
        plans, tables, cap = _space(req)
        if len(plans) < 2:
            continue
        for any_split in (True, False):
            floors = _floors(plans, tables, any_split)
            for c in (cap, float(np.median(floors))):
                assert_same(plans, batch.compose(plans, tables, memory_cap=c, any_split=any_split),
                            batch._compose(plans, tables, memory_cap=c, any_split=any_split))
                ran += 0 < _dropped(plans, tables, c, any_split) < len(plans)
    assert ran >= 20


def test_a_space_whose_every_plan_overflows_is_costed_whole():
    """Llama 3 405B on one node: no plan's states fit, and every plan reports its memory."""
    plans, tables, cap = _space(_preset("llama3-405b", 1, 64, 8192))
    assert _dropped(plans, tables, cap, True) == len(plans)
    a = batch.compose(plans, tables, memory_cap=cap, any_split=True)
    assert np.all(a.memory_bytes > cap) and np.all(np.isinf(a.step_time_s))
    assert_same(plans, a, batch._compose(plans, tables, memory_cap=cap, any_split=True))
