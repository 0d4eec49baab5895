"""The built-in model, GPU and cluster presets."""

from __future__ import annotations

from fastapi import APIRouter

from api.routes.deps import READ
from api.schemas import PresetList
from planner.specs import ClusterSpec, GPUSpec, ModelSpec

router = APIRouter(prefix="/v1/presets", tags=["presets"], dependencies=READ)


def _listing(cls) -> dict:
    data = [{"preset": n, **cls.from_preset(n).model_dump(mode="json")}
            for n in cls.preset_names()]
    return {"data": data, "count": len(data)}


@router.get("/models", response_model=PresetList, summary="Model presets",
            operation_id="presets-models")
def models() -> dict:
    """Models usable as {"preset": name}, with their shapes."""
    return _listing(ModelSpec)


@router.get("/gpus", response_model=PresetList, summary="GPU presets",
            operation_id="presets-gpus")
def gpus() -> dict:
    """GPUs with datasheet peak FLOP/s, memory and HBM bandwidth."""
    return _listing(GPUSpec)


@router.get("/clusters", response_model=PresetList, summary="Cluster presets",
            operation_id="presets-clusters")
def clusters() -> dict:
    """Node types with their GPU and links (set num_nodes in a request)."""
    return _listing(ClusterSpec)
