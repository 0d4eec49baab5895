"""Predicted vs measured: per component relative errors, re-ranking, Kendall's tau."""

from __future__ import annotations

COMM = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "zero_comm")
COMPONENTS = ("compute", *COMM, "pipeline_bubble")


STRATEGY_COMPONENT = {"TP": "tp_comm", "PP": "pp_comm", "DP": "dp_comm", "ZeRO": "zero_comm",
                      "CP": "cp_comm", "EP": "ep_comm"}


def predicted_components(breakdown: dict[str, float], communication: list) -> dict[str, float]:
    """The prediction in the probe's components. Communication is compared by its total time
    per strategy (what the collectives cost, overlapped or not), and the step by the predicted
    step without the optimizer, which the probe does not run."""
    out = {"compute": breakdown.get("compute", 0.0) + breakdown.get("recompute", 0.0),
           "pipeline_bubble": breakdown.get("pipeline_bubble", 0.0)}
    for k in STRATEGY_COMPONENT.values():
        out[k] = 0.0
    for item in communication:
        out[STRATEGY_COMPONENT[item.strategy]] += item.total_time_s
    out["step_time_s"] = sum(v for k, v in breakdown.items() if k != "optimizer")
    out["communication"] = sum(out[k] for k in COMM)
    return out


def measured_components(raw: dict) -> dict[str, float]:
    """The probe's step split into components: compute of the busiest rank; per strategy the
    transfer time of the busiest rank (waiting for peers excluded, see ``transfers``), the
    pipeline's per stage boundary; the step of the slowest rank; what the step did not spend
    computing or transferring it spent idle (the bubble, waits, imbalance)."""
    ranks = raw["ranks"]
    out = {"compute": max(r["compute"] for r in ranks)}
    for k in COMM:
        out[k] = raw["pp_comm"] if k == "pp_comm" else max(r.get(k, 0.0) for r in ranks)
    out["step_time_s"] = max(r["step_time_s"] for r in ranks)
    out["communication"] = sum(out[k] for k in COMM)
    out["pipeline_bubble"] = max(0.0, out["step_time_s"] - out["compute"]
                                 - out["communication"])
    return out


def relative_errors(pred: dict[str, float], meas: dict[str, float],
                    floor_s: float = 1e-4) -> dict[str, float]:
    """(predicted - measured) / measured, for components that took measurable time."""
    return {k: (pred[k] - meas[k]) / meas[k] for k in (*COMPONENTS, "communication",
                                                       "step_time_s")
            if meas.get(k, 0.0) > floor_s}


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a between two orderings of the same items (1: same order)."""
    n = len(a)
    if n < 2:
        return 1.0
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            x, y = a[i] - a[j], b[i] - b[j]
            s += (x * y > 0) - (x * y < 0)
    return s / (n * (n - 1) / 2)
