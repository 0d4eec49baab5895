"""The result object of ``planner plan`` and ``POST /v1/plans`` (DESIGN.md contract)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.result import PlanEstimate
from planner.search.hints import SettingsHint
from planner.search.spec import Status


class SearchStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: Status = Field(description="OPTIMAL (proven), FEASIBLE (time limit hit) or "
                           "INFEASIBLE (nothing fits; see infeasible_reasons).")
    solve_ms: float = Field(description="Wall time of the whole search, ms.")
    space_size: int = Field(description="Plans satisfying the structural constraints.")
    memory_feasible: int = Field(description="Of those, plans that fit in memory.")
    lattice_points: int = Field(description="(dp, tp, pp, cp) combinations considered.")
    solver_candidates: int = Field(description="Plans the ranking considered: every plan that "
                                   "fits (enumeration ranks them all; kept for the contract).")
    revision: str | None = Field(None, description="The planner revision that computed the "
                                 "answer (a digest of its rules, planner.revision; GET /healthz "
                                 "reports the running one); the plan id hashes it with the "
                                 "request. None: an answer stored before revisions were kept.")
    gap_pct: float | None = Field(
        None, description="FEASIBLE answers with a bound: how much faster, at most, the best "
        "plan of the space could be than the first one returned, % of its step time.")


class SpacePoint(BaseModel):
    """One plan of the searched space, costed with its default layer split."""

    model_config = ConfigDict(frozen=True)

    step_time_s: float = Field(description="Predicted step time, s.")
    memory_gib: float = Field(description="Memory of the most loaded GPU, GiB.")
    fits: bool = Field(description="Within the GPU's memory less the headroom.")
    frontier: bool = Field(description="No fitting plan is both faster and lighter.")


class PlanResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Deterministic id of the request (hash of its canonical JSON).")
    plans: list[PlanEstimate]
    search: SearchStats
    infeasible_reasons: list[str] = Field(default_factory=list)
    settings_hints: list[SettingsHint] = Field(
        default_factory=list, description="Training settings the request does not use under "
        "which the best plan is at least 5% faster (MoE: DeepEP dispatch with the all-to-alls "
        "overlapped), each with that plan and its step time.")
    space_sample: list[SpacePoint] = Field(
        default_factory=list, description="With search.space_sample: the Pareto frontier of "
        "the fitting plans, then evenly spaced others, for a step-time/memory plot.")
