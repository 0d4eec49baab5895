"""What every estimate must hold, whatever the preset model, node, degrees and settings: a
scheduler acts on these numbers without reading them first.

Hypothesis draws a preset model and node preset, a node count, degrees that divide the GPUs,
a micro-batch, accumulation steps, a recompute mode, a ZeRO stage and a precision; draws the
plan rules refuse are skipped (``plan_violations``), every other is estimated and checked:
- the step is finite and positive, every part of its breakdown is finite, none is negative,
  and together they do not exceed it;
- MFU lies in (0, 1], and the hardware FLOPs (with recompute) are never below the model's;
- the memory parts are finite, none negative, and add up to the total; ``fits_in_memory`` says
  exactly whether the total is within the GPU's memory;
- full recompute is never faster than none, and keeps no more memory;
- twice the global batch (twice the micro-batches, the same plan) is never faster, and never
  more than twice as slow.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner.cost import EfficiencyModel, estimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations

EFF = EfficiencyModel()
MODELS = sorted(ModelSpec.preset_names())
# Every GPU node preset (the development VM's loopback cluster has no GPU rates to check).
NODES = sorted(name for name in ClusterSpec.preset_names() if name != "local-cpu")
POW2 = st.sampled_from([1, 2, 4, 8])


@st.composite
def draws(draw):
    model = ModelSpec.from_preset(draw(st.sampled_from(MODELS)))
    cluster = ClusterSpec.from_preset(draw(st.sampled_from(NODES)),
                                      num_nodes=draw(st.sampled_from([1, 2, 4, 16, 64])))
    gpus = cluster.num_nodes * cluster.gpus_per_node
    tp, pp, cp = draw(POW2), draw(POW2), draw(st.sampled_from([1, 2]))
    assume(gpus % (tp * pp * cp) == 0)
    dp = gpus // (tp * pp * cp)
    mbs, accum = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 8]))
    plan = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "micro_batch_size": mbs,
            "ep": draw(st.sampled_from([1, 2, 8])) if model.is_moe else 1,
            "vpp": draw(st.sampled_from([1, 2])), "zero_stage": draw(st.integers(0, 3)),
            "sequence_parallel": tp > 1 and draw(st.booleans())}
    training = {"seq_length": draw(st.sampled_from([2048, 4096, 8192])),
                "global_batch_size": dp * mbs * accum,
                "precision": draw(st.sampled_from(["bf16", "bf16", "fp8"]))}
    return model, cluster, plan, training


def _valid(model, cluster, plan, training) -> tuple[ParallelPlan, TrainingSpec] | None:
    try:
        p, t = ParallelPlan.model_validate(plan), TrainingSpec.model_validate(training)
    except ValueError:
        return None
    return None if plan_violations(p, model, cluster, t) else (p, t)


def _check_one(est) -> None:
    step = est.step_time_s
    assert math.isfinite(step) and step > 0
    parts = est.breakdown.values()
    assert all(math.isfinite(v) and v >= 0 for v in parts), est.breakdown
    assert sum(parts) <= step * (1 + 1e-9) + 1e-12, (sum(parts), step)
    assert 0 < est.mfu <= 1
    assert est.hardware_tflops_per_gpu >= est.tflops_per_gpu * (1 - 1e-9)
    memory = est.memory.model_dump()
    pieces = [v for k, v in memory.items() if k.endswith("_gib") and k != "total_gib"]
    assert all(math.isfinite(v) and v >= 0 for v in pieces), memory
    assert math.isclose(sum(pieces), memory["total_gib"], rel_tol=1e-6, abs_tol=1e-6)
    assert est.fits_in_memory == (est.memory_per_gpu_gib <= est.memory_capacity_gib)


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(draws())
def test_every_estimate_keeps_its_invariants(drawn):
    model, cluster, plan, training = drawn
    valid = _valid(model, cluster, {**plan, "recompute": "none"}, training)
    assume(valid is not None)
    p_none, t = valid
    full = _valid(model, cluster, {**plan, "recompute": "full"}, training)
    twice = _valid(model, cluster, {**plan, "recompute": "none"},
                   {**training, "global_batch_size": 2 * training["global_batch_size"]})
    none_est = estimate(model, cluster, t, p_none, EFF)
    _check_one(none_est)
    if full is not None:
        full_est = estimate(model, cluster, full[1], full[0], EFF)
        _check_one(full_est)
        assert full_est.step_time_s >= none_est.step_time_s * (1 - 1e-9)
        assert full_est.memory_per_gpu_gib <= none_est.memory_per_gpu_gib * (1 + 1e-9)
    if twice is not None:
        twice_est = estimate(model, cluster, twice[1], twice[0], EFF)
        _check_one(twice_est)
        assert none_est.step_time_s * (1 - 1e-9) <= twice_est.step_time_s
        assert twice_est.step_time_s <= 2 * none_est.step_time_s * (1 + 1e-9)
