"""The plan request (DESIGN.md contract), shared by ``planner plan`` and ``POST /v1/plans``."""

from __future__ import annotations

import hashlib
import json

from pydantic import Field

from planner.request import SetupRequest
from planner.search.spec import SearchSpec


class PlanRequest(SetupRequest):
    """Find the best plans: ``planner plan`` and ``POST /v1/plans``."""

    search: SearchSpec = Field(default_factory=SearchSpec)

    def request_id(self) -> str:
        """Same request, same id: a hash of the canonical (fully expanded) request."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "plan-" + hashlib.sha256(canon.encode()).hexdigest()[:16]
