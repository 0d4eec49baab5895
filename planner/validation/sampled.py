"""Sampled validation: a plan needs more ranks than the probe has, so one representative group
of each strategy runs on its own and the step is composed from what they measured.

- the stage: one TP x CP group running the most loaded pipeline stage's micro-batches
  (compute, TP collectives, context-parallel ring), with no pipeline neighbours;
- the pipeline: two ranks passing the plan's activation and gradient messages, m of each;
- the data-parallel group (dp x cp ranks): the gradient buckets and ZeRO's gathers, when
  it fits in the ranks available; otherwise those components keep their prediction, and the
  result says so.

The composed step charges the 1F1B bubble as (p - 1) / m of the stage's busy time
(Narayanan et al. SC'21, section 2.2), then adds the pipeline messages and the data-parallel
communication, which the probe runs without overlap, as the full-mode probe does.
"""

from __future__ import annotations

from planner.validation.compare import COMM, measured_components
from planner.validation.pattern import StepPattern


def stage_to_sample(layers: list[int], stage_seconds: list[float]) -> int:
    """The stage whose micro-batch takes longest (the pipeline's critical stage)."""
    return max(range(len(layers)), key=lambda i: (stage_seconds[i], i))


def experts_inside(tp: int, cp: int, ep: int, etp: int) -> bool:
    """Whether the EP x ETP groups fold inside one TP x CP group (the stage run measures
    them)."""
    return (tp * cp) % (ep * etp) == 0


def sampled_runs(pattern: StepPattern, stage: int, nproc: int
                 ) -> tuple[dict[str, dict], list[str]]:
    """The probe runs of a sampled validation ({name: pattern}) and notes on what was left to
    the prediction."""
    runs, notes = {}, []
    tp, cp, dp, pp = pattern["tp"], pattern["cp"], pattern["dp"], pattern["pp"]
    layers = pattern["layers"][stage]
    nothing = {"zero3": [], "dp_ops": [], "pp_bytes": 0.0}
    # The EP groups are measured when they fold inside one TP x CP group; otherwise their
    # all-to-alls are predicted.
    ep, etp = pattern.get("ep", 1), pattern.get("etp", 1)
    experts = ({"ep": ep, "etp": etp} if experts_inside(tp, cp, ep, etp)
               else {"ep": 1, "etp": 1, "ep_fwd": [], "ep_bwd": []})
    if ep * etp > 1 and experts["ep"] == 1:
        notes.append(f"the EP x ETP groups ({ep * etp} ranks) span data-parallel ranks: the "
                     "all-to-alls are predicted, not measured")
    if tp * cp > nproc:
        notes.append(f"the TP x CP group needs {tp * cp} ranks, {nproc} were given: compute, "
                     "TP and CP are predicted, not measured")
    else:
        runs["stage"] = {**pattern, **nothing, **experts, "dp": 1, "pp": 1, "layers": [layers],
                         "head_gemm": pattern["head_gemm"] if stage == pp - 1 else None}
    bare: dict[str, object] = {"gemms": [], "attn_bmm": [], "head_gemm": None, "tp_fwd": [], "tp_bwd": [],
            "cp_fwd": [], "cp_bwd": [], "tp": 1, "cp": 1, "cpa": 1, "moe_gemms": [],
            "expert_bmm": [],
            "ep_fwd": [], "ep_bwd": [], "ep": 1, "etp": 1}
    if pp > 1:
        runs["pipeline"] = {**pattern, **bare, **nothing, "dp": 1, "pp": 2, "layers": [0, 0],
                            "pp_bytes": pattern["pp_bytes"]}
    if dp * cp > 1 and (pattern["dp_ops"] or pattern["zero3"]):
        if dp * cp > nproc:
            notes.append(f"the data-parallel group has {dp * cp} ranks, {nproc} were given: "
                         "its communication is predicted, not measured")
        else:
            dp_ops = [op for op in pattern["dp_ops"] if op[4:] != ["edp"]]
            zero3 = [op for op in pattern["zero3"] if op[3:] != ["edp"]]
            runs["data"] = {**pattern, **bare, "dp": dp * cp, "pp": 1, "layers": [layers],
                            "pp_bytes": 0.0, "dp_ops": dp_ops, "zero3": zero3}
            if len(dp_ops) < len(pattern["dp_ops"]) or len(zero3) < len(pattern["zero3"]):
                notes.append("the experts' gradient reduction (expert data parallel group) is "
                             "predicted, not measured")
    return runs, notes


def measured_step(raws: dict[str, dict], predicted: dict[str, float], m: int, pp: int,
            ep_measured: bool = True) -> tuple[dict[str, float], list[str]]:
    """The measured step composed from the sampled runs; components no run measured keep their
    prediction and are listed."""
    parts = {name: measured_components(raw) for name, raw in raws.items()}
    out, kept = {}, []

    def take(run: str, keys: tuple[str, ...]) -> None:
        for k in keys:
            if run in parts:
                out[k] = parts[run][k]
            else:
                out[k] = predicted.get(k, 0.0)
                if out[k] > 0:
                    kept.append(k)

    take("stage", ("compute", "tp_comm", "cp_comm"))
    take("stage" if ep_measured else "", ("ep_comm",))
    take("pipeline", ("pp_comm",))
    take("data", ("dp_comm", "zero_comm"))
    busy = out["compute"] + out["tp_comm"] + out["cp_comm"] + out["ep_comm"]
    out["pipeline_bubble"] = (pp - 1) / m * busy
    out["communication"] = sum(out[k] for k in COMM)
    out["step_time_s"] = busy + out["pipeline_bubble"] + out["pp_comm"] + out["dp_comm"] \
        + out["zero_comm"]
    return out, kept
