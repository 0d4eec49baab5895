"""Where Megatron-DeepSpeed's gap lies: BigScience's one-node runs.

The model predicts the DeepSpeed-pipeline stacks of 2021-22 (BLOOM, MT-NLG, GPT-NeoX-20B,
GLM-130B) 18-35% too fast. Before BLOOM's 48-node sweeps, BigScience measured the same
hidden size on one node with no pipeline and no data parallelism ("Max possible TFLOPs check
for NHIDDEN=14336", train/tr11-176B-ml/chronicles-prequel.md, 2022-02-21): 6 layers at tp 8,
micro-batches of 2, 130.43 and 119.19 s an iteration (two runs of one configuration), and 10
layers, micro-batches of 1, 205.52 s. The table's header says a batch of 512 where its
column says 2048; its TFLOP/s column is Megatron's formula with recompute,
96 B s l h^2 (1 + s / 6h + V / 16 l h), at a batch of 512 (143.48, 157.02 and 142.59 as
published, recomputed below). Those runs are not corpus runs (the batch read from the
arithmetic, not the table; a 9% spread between two runs of one configuration), so this module
replays them as variants of the corpus's 48-node row with the same software
(``bloom-prequel-181b-tp8pp12-mbs2``: fp16, full recompute, dropout, the blocking TP all-reduce):
the model predicts them 17-28% too fast, as it does the 48-node sweeps (+10% to +35%). So the
gap shows on one node without pipeline stages or a data-parallel reduction: it is not the
pipeline's bubble, its sends or the network, but what that software does on each GPU at tp 8
(BigScience's Megatron-DeepSpeed builds its GPT as ``GPTModelPipe``, a DeepSpeed pipeline
module, whenever DeepSpeed is on: ``pretrain_gpt.py`` ``model_provider`` at 0035f06a, so even one
stage runs in DeepSpeed's pipeline engine, whose per-micro-batch work is not ruled out); Megatron-LM's
own one-node run of that time (Korthikanti et al.'s 22B at tp 8) the model predicts within 3%.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import published_accuracy  # noqa: E402

RUNS = {r["id"]: r for r in published_accuracy.load_runs()}
BASE = "bloom-prequel-181b-tp8pp12-mbs2"
BATCH = 512
# (layers, micro-batch, measured s an iteration, published TFLOP/s)
ONE_NODE = ((6, 2, 130.43, 143.48), (6, 2, 119.19, 157.02), (10, 1, 205.52, 142.59))


def _one_node(layers: int, micro_batch: int) -> dict:
    """The 48-node row on one node, merged as ``published_accuracy.py --what-if`` merges."""
    patch = {"model": {"num_layers": layers}, "cluster": {"num_nodes": 1},
             "plan": {"dp": 1, "pp": 1, "micro_batch_size": micro_batch},
             "training": {"global_batch_size": BATCH}}
    base = RUNS[BASE]
    (run,) = published_accuracy.what_if([base], [f"{base['source']}={json.dumps(patch)}"])
    return run


def _error_pct(run: dict, measured_s: float) -> float:
    est, fits = published_accuracy.predict_run(run)
    assert fits
    return (measured_s / est.step_time_s - 1) * 100


def test_the_one_node_runs_batch_is_512_by_their_own_tflops():
    m = RUNS[BASE]["model"]
    h, v, s = m["hidden_size"], m["vocab_size"], RUNS[BASE]["training"]["seq_length"]
    for layers, _, seconds, published in ONE_NODE:
        flops = 96 * BATCH * s * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
        assert flops / (seconds * 8) / 1e12 == pytest.approx(published, abs=0.01)


def test_the_model_is_as_optimistic_on_one_node_as_on_48():
    errors = [round(_error_pct(_one_node(layers, mbs), seconds), 1)
              for layers, mbs, seconds, _ in ONE_NODE]
    assert errors == [28.1, 17.0, 23.9]
    est, _ = published_accuracy.predict_run(_one_node(6, 2))
    assert (est.pp, est.dp, est.breakdown["pipeline_bubble"], est.breakdown["dp_comm"]) == (
        1, 1, 0.0, 0.0)
    # The 48-node sweeps of the same day and software, and Megatron-LM's one-node run.
    sweep = [_error_pct(r, r["measured"]["step_time_s"]) for r in RUNS.values()
             if r["id"].startswith("bloom-prequel-")]
    assert (round(min(sweep), 1), round(max(sweep), 1)) == (10.2, 35.4)
    k22 = RUNS["korthikanti-22b-full"]
    assert abs(_error_pct(k22, k22["measured"]["step_time_s"])) < 3
