"""Request bodies shared by the CLI and the API (DESIGN.md contract), and their parsing."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

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

    @model_validator(mode="after")
    def _recompute_fits_the_model(self) -> SetupRequest:
        # A cluster given by reference (the API's stored clusters) is checked once resolved.
        problem = recompute_problem(self.model, self.training) or (
            gpu_problem(self.cluster, self.training)
            if isinstance(self.cluster, ClusterSpec) else None)
        if problem:
            field, reason = problem
            raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                type=PydanticCustomError("value_error", reason),
                loc=("training", field), input=getattr(self.training, field))])
        return self


def recompute_problem(model: ModelSpec, training: TrainingSpec) -> tuple[str, str] | None:
    """(training field, reason) when the selective recompute names what ``model`` lacks
    (Megatron-LM refuses mla_up_proj without multi-latent attention), or DeepSpeed's ZeRO-3
    reuse distance is set on a model it is not costed for; or None."""
    if training.zero3_max_reuse_params is not None and model.is_moe:
        return ("zero3_max_reuse_params", "DeepSpeed's reuse distance is costed for dense "
                "models (not mixture-of-experts)")
    mods = training.recompute_modules
    if training.selective_recompute == "per_op":
        if mods != ("core_attn",):
            return ("recompute_modules", "recompute_modules are Megatron-LM's; with "
                    "selective_recompute 'per_op' leave them at the default")
        if model.is_moe or model.kv_lora_rank is not None:
            return ("selective_recompute", "'per_op' is costed for dense layers with "
                    "standard attention (not mixture-of-experts or multi-latent attention)")
    if "mla_up_proj" in mods and model.kv_lora_rank is None:
        return ("recompute_modules", "mla_up_proj needs multi-latent attention (kv_lora_rank)")
    moe_only = [m for m in ("moe", "moe_act", "shared_experts") if m in mods]
    if moe_only and not model.is_moe:
        verb = "needs" if len(moe_only) == 1 else "need"
        return ("recompute_modules", f"{', '.join(moe_only)} {verb} a mixture-of-experts model")
    if "shared_experts" in mods and not model.shared_ffn:
        return ("recompute_modules", "shared_experts needs a model with shared experts")
    return None


def gpu_problem(cluster: ClusterSpec, training: TrainingSpec) -> tuple[str, str] | None:
    """(training field, reason) when a GPU of the cluster (of any of its pools) cannot run the
    training: it lacks its precision (V100 has no bf16, only Hopper and later fp8), the
    block-scaled tensor cores of the 'mxfp8' recipe, or a rate for the named attention
    kernel; else None."""
    for pool in cluster.pools or (cluster,):
        try:
            pool.gpu.peak_flops(training.precision)
        except ValueError as exc:
            return ("precision", str(exc))
        if training.precision == "fp4" and pool.gpu.fp4_matmul_efficiency is None:
            return ("precision", f"GPU {pool.gpu.name!r} has an fp4 peak but no NVFP4 GEMM "
                    "rate: give gpu.fp4_matmul_efficiency")
        if (training.precision == "fp8" and training.fp8_recipe == "mxfp8"
                and pool.gpu.mxfp8_matmul_efficiency is None):
            return ("fp8_recipe", f"GPU {pool.gpu.name!r} has no block-scaled fp8 tensor cores "
                    "(MXFP8 runs on Blackwell, sm100, and later: Megatron-LM's 'mxfp8 for "
                    "Blackwell architecture only'); use 'tensorwise' or 'blockwise', or give "
                    "the GPU's gpu.mxfp8_matmul_efficiency")
        try:
            pool.gpu.attention_rate(training.attention_kernel)
        except ValueError as exc:
            return ("attention_kernel", str(exc))
    return None


class EstimateRequest(SetupRequest):
    """Cost of one fixed plan: ``planner estimate`` and ``POST /v1/estimates``."""

    plan: ParallelPlan


def validation_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(dotted field path, reason) for each error pydantic found."""
    out = []
    for err in exc.errors():
        # (Union tags, '~run', and function validators' names are not fields.)
        loc = ".".join(str(p) for p in err["loc"]
                       if not str(p).startswith(("function-", "~")))
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
