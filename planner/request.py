"""Request bodies shared by the CLI and the API (DESIGN.md contract), and their parsing."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.calibration.model import CalibrationIn
from planner.cost import EfficiencyModel
from planner.errors import PlannerInputError
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec


class SetupRequest(BaseModel):
    """What every request names: the model, the cluster, the training shape (and optional
    overrides of the kernel efficiency model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec = Field(description='Preset ({"preset": "llama3-70b"}), explicit fields '
                             'or {"hf_config": {...}}.')
    cluster: ClusterSpec = Field(description='Preset ({"preset": "dgx-h100", "num_nodes": 4}) '
                                 "or explicit fields.")
    training: TrainingSpec
    efficiency: EfficiencyModel = Field(default_factory=EfficiencyModel,
                                        description="Overrides of the kernel efficiency model.")
    calibration: CalibrationIn | None = Field(
        None, description="Measured collective fits (from `planner calibrate`) to cost "
        "communication with instead of the cluster spec's links, where they cover an op and tier.")


class EstimateRequest(SetupRequest):
    """Cost of one fixed plan: ``planner estimate`` and ``POST /v1/estimates``."""

    plan: ParallelPlan


def validation_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(dotted field path, reason) for each error pydantic found."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        out.append((loc or "(body)", msg))
    return out


def parse_request(cls: type[BaseModel], data: Any) -> Any:
    """Validate ``data`` as ``cls``; raise PlannerInputError naming the first bad field."""
    if not isinstance(data, dict):
        raise PlannerInputError("(body)", "the request must be a JSON object")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        field, reason = validation_errors(exc)[0]
        raise PlannerInputError(field, reason) from exc
