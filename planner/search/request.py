"""The plan request (DESIGN.md contract), shared by ``planner plan`` and ``POST /v1/plans``."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

from planner.cost import EfficiencyModel
from planner.search.spec import SearchSpec
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec


class PlanRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec = Field(description='Preset ({"preset": "llama3-70b"}), explicit fields '
                             'or {"hf_config": {...}}.')
    cluster: ClusterSpec = Field(description='Preset ({"preset": "dgx-h100", "num_nodes": 4}) '
                                 "or explicit fields.")
    training: TrainingSpec
    search: SearchSpec = Field(default_factory=SearchSpec)
    efficiency: EfficiencyModel = Field(default_factory=EfficiencyModel)

    def request_id(self) -> str:
        """Same request, same id: a hash of the canonical (fully expanded) request."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "plan-" + hashlib.sha256(canon.encode()).hexdigest()[:16]
