"""The predicted training step as a Chrome trace (the format torch.profiler exports), so the
prediction and a measured step open side by side in Perfetto or chrome://tracing.

One process per pipeline stage, with a compute track and a communication track. The schedule
(1F1B, or Megatron-LM's interleaved schedule with the plan's micro-batch groups) is simulated
event by event (``planner.cost.pipeline.simulate``): a chunk's forward of a micro-batch starts
when the previous stage has finished it and its activations have arrived (one send/recv), a
backward when the next stage has finished its backward. Each chunk's forward and backward take
what the step model gives them (``cost.batch``: its layers' periods with their exposed TP, CP and
ZeRO-3 communication, the embedding and head, the fixed costs of a micro-batch), so the trace
and the estimate are one model: the closed form the estimate uses equals this simulation for
stages of equal work, and the tests bound the difference otherwise.
"""

from __future__ import annotations

from planner.cost.batch import PlanArrays, compose
from planner.cost.efficiency import EfficiencyModel
from planner.cost.pipeline import Timeline, simulate
from planner.cost.pipeline import chunk_times as pipeline_chunk_times
from planner.cost.tables import CostTables
from planner.result import PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.layout import explicit_layout


def _detail(est: PlanEstimate, tables: CostTables) -> dict[str, float]:
    layout = explicit_layout(tuple(est.layers_per_stage), est.vpp, est.mtp_standalone,
                             tables.model.mtp_num_layers)
    bc = compose(PlanArrays.from_plans([ParallelPlan.of(est.model_dump())]), tables, layout=layout,
                 group=est.microbatch_group_size)
    assert bc.detail is not None          # set whenever no memory cap is given
    return {k: float(v[0]) for k, v in bc.detail.items()}


def _tails(est: PlanEstimate, tables: CostTables) -> dict[str, float]:
    d = _detail(est, tables)
    return {"dp_tail": d["dp_tail"], "gather_tail": d["gather_tail"]}


def chunk_times(est: PlanEstimate, tables: CostTables
                ) -> tuple[list[list[float]], list[list[float]], float]:
    """(forward[s][c], backward[s][c], send/recv seconds) of one micro-batch per stage and
    model chunk, from the step model's components."""
    layout = explicit_layout(tuple(est.layers_per_stage), est.vpp, est.mtp_standalone,
                             tables.model.mtp_num_layers)
    d = _detail(est, tables)
    fwd, bwd = pipeline_chunk_times(d, layout)
    return fwd, bwd, d["p2p"]


def stage_times(est: PlanEstimate, tables: CostTables) -> list[tuple[float, float]]:
    """(forward, backward) seconds of one micro-batch on each stage, all chunks."""
    fwd, bwd, _ = chunk_times(est, tables)
    return [(sum(f), sum(b)) for f, b in zip(fwd, bwd, strict=True)]


def simulate_step(est: PlanEstimate, tables: CostTables) -> Timeline:
    fwd, bwd, p2p = chunk_times(est, tables)
    return simulate(fwd, bwd, est.grad_accum_steps, p2p if est.pp > 1 else 0.0,
                    est.microbatch_group_size, tables.training.overlap_p2p_comm)


def predicted_trace(est: PlanEstimate, model: ModelSpec, cluster: ClusterSpec,
                    training: TrainingSpec, eff: EfficiencyModel | None = None,
                    tables: CostTables | None = None) -> dict:
    from planner.search.pools import pool_of

    cluster = pool_of(est, cluster)          # a plan of a cluster of pools: its pool
    tables = tables or CostTables(model, cluster, training, eff or EfficiencyModel())
    timeline = simulate_step(est, tables)
    tails = _tails(est, tables)
    us = 1e6
    events: list[dict] = []
    for s, ops in enumerate(timeline.ops):
        events.append({"ph": "M", "name": "process_name", "pid": s,
                       "args": {"name": f"stage {s} ({est.layers_per_stage[s]} layers)"}})
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": 0,
                       "args": {"name": "compute"}})
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": 1,
                       "args": {"name": "communication"}})
        for start, dur, waits in timeline.exchanges[s]:
            # An exchange the stage waits for (1F1B, or interleaved without overlap_p2p_comm)
            # holds up its compute track; an overlapped one runs beside it.
            events.append({"ph": "X", "pid": s, "tid": 1, "cat": "predicted",
                           "name": "send_recv", "ts": start * us, "dur": dur * us,
                           "args": {"blocking": waits}})
        for kind, chunk, i, start, stop in ops:
            label = "forward" if kind == "F" else "backward"
            if est.vpp > 1:
                label += f" c{chunk}"
            events.append({"ph": "X", "pid": s, "tid": 0, "cat": "predicted",
                           "name": f"{label} mb{i}", "ts": start * us,
                           "dur": (stop - start) * us,
                           "args": {"micro_batch": i, "stage": s, "chunk": chunk}})
        tail = timeline.makespan
        for name, dur in (("gradient reduction", tails["dp_tail"]),
                          ("weight all-gather", tails["gather_tail"]),
                          ("optimizer", est.breakdown.get("optimizer", 0.0))):
            if dur > 0:
                events.append({"ph": "X", "pid": s, "tid": 1 if name != "optimizer" else 0,
                               "cat": "predicted", "name": name, "ts": tail * us,
                               "dur": dur * us})
                tail += dur
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": {"source": "parallelism-planner prediction",
                         "plan": {k: getattr(est, k) for k in ("dp", "tp", "pp", "cp", "ep",
                                                               "etp", "vpp",
                                                               "micro_batch_size",
                                                               "grad_accum_steps")},
                         "predicted_step_time_s": est.step_time_s,
                         "simulated_pipeline_s": timeline.makespan}}
