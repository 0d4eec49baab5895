"""What the cost tables work out once for every recompute mode.

A layer's GEMMs, attention and memory-bound kernels, and the collectives its TP, CP and EP
groups issue, do not depend on the recompute mode: only what the backward reruns, what the
forward stores and how many calls a layer makes do. ``layers.layer_works`` costs a layer for
all three modes in one pass, and ``CostTables`` prices each group's collectives once per
shape (``uses_of``). These tests hold the shared tables to tables that saw one mode only, so
nothing one mode leaves in a cache can change another's answer, and to ``layer_work`` of a
plan with that mode.
"""

from __future__ import annotations

import itertools

import pytest

from planner.cost import EfficiencyModel
from planner.cost.layers import LayerShape, layer_work
from planner.cost.tables import CostTables
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.vocabulary import RECOMPUTE

EFF = EfficiencyModel()
H100 = ClusterSpec.model_validate({"preset": "dgx-h100", "num_nodes": 4})
A100 = ClusterSpec.model_validate({"preset": "dgx-a100", "num_nodes": 4})


def _setup(model: str, cluster: ClusterSpec, **training):
    return (ModelSpec.model_validate({"preset": model}), cluster,
            TrainingSpec.model_validate({"global_batch_size": 64, "seq_length": 8192,
                                         **training}))


# (setup, layer keys (tp, cp, mbs, sp, npn, ep, etp))
DENSE_KEYS = [(tp, cp, mbs, sp, npn, 1, 1) for tp, cp, mbs, sp, npn in
              itertools.product((1, 2, 4), (1, 2, 4), (1, 2), (0, 1), (4, 8)) if sp <= (tp > 1)]
CASES = [
    (_setup("llama3-8b", H100), DENSE_KEYS),
    (_setup("llama3-8b", H100, ring_attention="torch", repeat_kv=True), DENSE_KEYS),
    (_setup("llama3-8b", H100, ring_attention="torch_allgather"), DENSE_KEYS),
    (_setup("llama3-8b", H100, ring_attention="a2a"), DENSE_KEYS),
    (_setup("llama3-70b", H100, ring_attention="a2a+p2p", cp_a2a_size=2),
     [k for k in DENSE_KEYS if k[1] == 4]),
    (_setup("llama3-8b", A100, selective_recompute="per_op", eager_elementwise=True),
     [k for k in DENSE_KEYS if k[1] == 1]),
    (_setup("gpt3-175b", A100, flash_attention=False, distribute_saved_activations=True,
            seq_length=2048), [k for k in DENSE_KEYS if k[3] == 0]),
    (_setup("mixtral-8x7b", H100, recompute_modules=["moe"], moe_dispatcher="deepep"),
     [(tp, 1, 1, int(tp > 1), 8, ep, etp) for tp, ep, etp in
      itertools.product((1, 2), (1, 2, 8), (1, 2))]),
    (_setup("deepseek-v3", H100, recompute_modules=["moe_act", "layernorm", "mla_up_proj"]),
     [(tp, cp, 1, int(tp > 1), 8, ep, 1) for tp, cp, ep in
      itertools.product((1, 2), (1, 2), (8, 32))]),
]


def _answers(tables: CostTables, key, rec: int):
    tp, cp, mbs, sp, npn, ep, etp = key
    return (tables.work(tp, cp, mbs, rec, sp, ep, etp),
            tables.layer(tp, cp, mbs, rec, sp, npn, ep, etp),
            tables.tp_uses(tp, cp, mbs, rec, sp, npn), tables.cp_uses(tp, cp, mbs, rec, sp, npn),
            tables.ep_uses(tp, cp, mbs, rec, sp, npn, ep, etp))


@pytest.mark.parametrize("setup,keys", CASES, ids=[
    "te", "torch-ring", "torch-allgather", "a2a", "a2a+p2p", "per-op", "distributed-input",
    "moe-deepep", "mla"])
def test_modes_share_nothing_but_what_they_share(setup, keys):
    model, cluster, training = setup
    shared = {order: CostTables(model, cluster, training, EFF) for order in ("up", "down")}
    differ = 0
    for key in keys:
        alone = {rec: _answers(CostTables(model, cluster, training, EFF), key, rec)
                 for rec in range(len(RECOMPUTE))}
        for rec in range(len(RECOMPUTE)):          # modes in turn, both ways round
            assert _answers(shared["up"], key, rec) == alone[rec], (key, RECOMPUTE[rec])
        for rec in reversed(range(len(RECOMPUTE))):
            assert _answers(shared["down"], key, rec) == alone[rec], (key, RECOMPUTE[rec])
        tp, cp, mbs, sp, _, ep, etp = key
        for rec, mode in enumerate(RECOMPUTE):
            assert alone[rec][0] == layer_work(model, training,
                                               LayerShape(tp, cp, mbs, mode, bool(sp), ep, etp),
                                               cluster.gpu, EFF)
        differ += alone[0][1:] != alone[2][1:]
    # The modes' layer costs and calls do differ: the comparison above can fail.
    assert differ >= len(keys) // 2


def test_layer_works_modes_differ_only_in_what_the_mode_changes():
    model, cluster, training = _setup("llama3-70b", H100)
    none, sel, full = (layer_work(model, training, LayerShape(4, 2, 1, mode, True),
                                  cluster.gpu, EFF) for mode in RECOMPUTE)
    assert none.recompute_s == 0 < sel.recompute_s < full.recompute_s == full.fwd_s
    assert full.stored_bytes < sel.stored_bytes < none.stored_bytes == none.working_bytes
    for w in (sel, full):
        assert (w.fwd_s, w.bwd_s, w.fwd_flops, w.working_bytes) == (
            none.fwd_s, none.bwd_s, none.fwd_flops, none.working_bytes)
