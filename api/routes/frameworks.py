"""Which framework runs which plan: the capability matrix the plans' ``frameworks`` come from."""

from __future__ import annotations

from fastapi import APIRouter

from api.routes.deps import READ
from planner.frameworks import capability_matrix, refusal_rules

router = APIRouter(prefix="/v1", tags=["presets"], dependencies=READ)


@router.get("/frameworks", summary="Framework capability matrix", operation_id="frameworks")
def frameworks() -> dict:
    """For Megatron-LM, torchtitan and DeepSpeed: each capability's support (yes, partial,
    no), the framework's own flag or config key and the source that defines it; and the rules
    that keep a plan off a framework's list (a plan lists in ``frameworks`` those that run it as
    predicted; ``GET /v1/plans/{id}/launch/{framework}`` answers 409 for the others)."""
    return {"capabilities": capability_matrix(), "rules": refusal_rules()}
