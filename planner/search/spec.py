"""The ``search`` part of a plan request: top-k, time limit, and restrictions per variable."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from planner.frameworks import ANY_FRAMEWORK, FrameworkChoice
from planner.specs.plan import Recompute


class Range(BaseModel):
    """Inclusive bounds; either may be left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min({self.min}) > max({self.max})")
        return self


def _parse_choice(value: Any) -> Any:
    """Turn a range object into a Range here, so its own error (not the union's) is reported."""
    if isinstance(value, dict):
        try:
            return Range.model_validate(value)
        except ValidationError as exc:
            raise ValueError("; ".join(e["msg"].removeprefix("Value error, ")
                                       for e in exc.errors())) from None
    if isinstance(value, list) and not value:
        raise ValueError("an empty list allows nothing; leave the field out to allow all")
    # Degrees, sizes and the ZeRO stage are never negative: a request error, not an empty space.
    negative = [v for v in (value if isinstance(value, list) else [value])
                if isinstance(v, int) and v < 0]
    if negative:
        raise ValueError(f"{negative[0]} is negative; the values are degrees, sizes or stages")
    return value


IntChoice = Annotated[int | list[int] | Range, BeforeValidator(_parse_choice)]


def allows(choice: IntChoice | None, value: int) -> bool:
    """Whether a restriction (a value, a list of values or a range) admits ``value``."""
    if choice is None:
        return True
    if isinstance(choice, int):
        return value == choice
    if isinstance(choice, list):
        return value in choice
    return (choice.min is None or value >= choice.min) and (choice.max is None or value <= choice.max)


class SearchSpec(BaseModel):
    """How to search. Any plan variable may be restricted to a single value (``"pp": 8``), a list
    (``"tp": [4, 8]``) or a range (``"micro_batch_size": {"min": 2}``); unset means the whole
    range the model, batch and cluster allow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    top_k: int = Field(5, ge=1, le=100, description="How many plans to return, best first.")
    space_sample: int = Field(0, ge=0, le=5000, description="Also return up to this many "
                              "plans of the searched space (step time, memory): the Pareto "
                              "frontier first, then evenly spaced others; 0: none.")
    time_limit_ms: int = Field(
        10_000, ge=1, le=600_000, description="Wall-clock bound of the solve; the best plans "
        "found by then come back with status FEASIBLE."
    )
    allow_cross_node_tp: bool = Field(False, description="Let tensor parallelism span nodes.")
    allow_idle_gpus: bool = Field(
        False, description="Allow dp*tp*pp*cp below the GPU count (down to half of it)."
    )
    memory_headroom: float = Field(
        0.05, ge=0, lt=1, description="Fraction of each GPU's memory kept free on top of the "
        "model's own reserve (allocator spikes, NCCL buffers growing at scale)."
    )
    rebalance_stages: bool = Field(
        True, description="Let the solver move layers between pipeline stages (uneven stages) "
        "to shorten the slowest stage under each stage's memory."
    )
    rebalance_interleaved: bool = Field(
        False, description="With rebalance_stages, also move layers between the stages of "
        "interleaved plans (each rank's layers spread evenly over its chunks; Megatron-LM's "
        "--pipeline-model-parallel-layout). Exact, but off by default: at 16,384 GPUs it "
        "slows the search by about half, and the interleaved default layouts (even, or the "
        "embedding and loss counted as layers) are already balanced: it changed the winner "
        "of one of the six benchmark requests, by 0.1%.")
    partial_recompute: bool = Field(
        True, description="Also consider full recompute of only the first N layers of each "
        "model chunk (Megatron-LM's --recompute-method block --recompute-num-layers N), with "
        "the fewest N that fits, for plans that do not fit without recompute (when the search "
        "allows both 'none' and 'full'). Only Megatron-LM runs such plans.")
    cpu_offload: bool = Field(
        True, description="On clusters with cluster.host_link_gb_per_s (gb200-nvl72), also "
        "consider offloading the activations of the first N layers to host memory (Megatron-"
        "Core's --cpu-offloading-num-layers N), with the fewest N that fits, for plans without "
        "pipelining or recompute that do not fit otherwise. Only Megatron-LM runs such plans.")
    framework: FrameworkChoice | None = Field(
        None, description="Only plans this framework runs as predicted (megatron, torchtitan, "
        "deepspeed). Default: plans at least one of them runs. 'any': every plan the step "
        "model costs, whether or not a framework of today runs it as predicted (to replay "
        "published runs of older software, such as DeepSpeed's ZeRO-3 of 2021 or Megatron-LM "
        "before its TP all-reduce overlap); such plans list no framework in 'frameworks'.")
    dp: IntChoice | None = None
    tp: IntChoice | None = None
    pp: IntChoice | None = None
    cp: IntChoice | None = None
    ep: IntChoice | None = None
    etp: IntChoice | None = None
    vpp: IntChoice | None = None
    micro_batch_size: IntChoice | None = None
    grad_accum_steps: IntChoice | None = None
    zero_stage: IntChoice | None = None
    dp_replicate: IntChoice | None = Field(
        None, description="Hybrid sharding's replica counts (plan.dp_replicate). Default: 1 "
        "and every count whose replicas span whole nodes (HSDP's layout: shard inside a node "
        "or a few, replicate across them); a restriction admits any count that leaves a "
        "shard group of at least two ranks.")
    recompute: Recompute | list[Recompute] | None = None
    sequence_parallel: bool | list[bool] | None = None

    @property
    def any_framework(self) -> bool:
        """Whether the search skips the frameworks' capability filter."""
        return self.framework == ANY_FRAMEWORK

    @property
    def megatron_allowed(self) -> bool:
        """Whether plans only Megatron-LM runs (block recompute, pipelines over GPU pools) may
        be offered."""
        return self.framework in (None, "megatron", ANY_FRAMEWORK)

    def allows_recompute(self, mode: str) -> bool:
        r = self.recompute
        return r is None or (mode == r if isinstance(r, str) else mode in r)

    def allows_sp(self, value: bool) -> bool:
        s = self.sequence_parallel
        return s is None or (value == s if isinstance(s, bool) else value in s)


Status = Literal["OPTIMAL", "FEASIBLE", "INFEASIBLE"]
