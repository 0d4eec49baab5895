"""Calibration values: samples in, fits out (the public result shape)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.vocabulary import Collective, Tier

Source = Literal["sweep", "nccl-tests", "trace", "samples", "validation", "anchor"]


class Sample(BaseModel):
    """One measured collective: full-buffer size (nccl-tests convention) and time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Collective = Field(description="The collective (nccl-tests names, snake_case).")
    group_size: int = Field(ge=2, le=1_000_000)
    tier: Tier = "intra_node"
    message_bytes: float = Field(gt=0, le=1e13)
    time_us: float = Field(gt=0, le=1e10)
    predicted_us: float | None = Field(None, description="The fitted model's prediction.")
    ci_low_us: float | None = Field(None, ge=0, description="Sweeps: the 95% confidence "
                                    "interval of the median time, low end.")
    ci_high_us: float | None = Field(None, ge=0, description="Its high end.")
    repeats: int | None = Field(None, ge=1, description="Sweeps: batches the median is of.")


class Segment(BaseModel):
    """One alpha-beta line of a piecewise fit: time = latency + bytes / bandwidth, used for
    messages in [min_bytes, max_bytes] (prediction takes the fastest line, as NCCL does)."""

    model_config = ConfigDict(frozen=True)

    latency_us: float
    bandwidth_gb_per_s: float
    min_bytes: float
    max_bytes: float


class Fit(BaseModel):
    model_config = ConfigDict(frozen=True)

    op: str
    algorithm: str = Field(description="Algorithm whose step count and bus factor scale the fit "
                           "to other group sizes (ring).")
    tier: Tier
    group_size: int
    latency_us: float = Field(description="Time of an empty collective at this group size.")
    bandwidth_gb_per_s: float = Field(description="Algorithm bandwidth of large messages.")
    bus_bandwidth_gb_per_s: float = Field(description="nccl-tests bus bandwidth (algbw x bus "
                                          "factor): comparable across group sizes.")
    alpha_step_us: float = Field(description="Latency per algorithm step (latency / steps).")
    r2: float
    median_rel_err: float
    max_rel_err: float
    loo_max_rel_err: float = Field(description="Leave-one-out: each point predicted by a fit "
                                   "without it.")
    samples: int
    quality: Literal["good", "poor"]
    segments: tuple[Segment, ...] = Field(default=(), description="Lines of the piecewise "
                                          "model when one line does not fit the data.")


class AnchoredRun(BaseModel):
    """One measured run of an anchor (``planner.calibration.anchor``), before and after."""

    model_config = ConfigDict(frozen=True)

    name: str
    measured_step_time_s: float
    predicted_step_time_s: float = Field(description="The model's prediction with the run's "
                                         "own efficiency settings.")
    anchored_step_time_s: float = Field(description="The prediction at the fitted speeds.")
    error_pct: float = Field(description="measured / predicted - 1, in percent (positive: "
                             "the run was slower than predicted).")
    anchored_error_pct: float = Field(description="The same at the fitted speeds.")
    scale_alone: float = Field(description="The kernel speed that predicts this run by itself.")
    fits_in_memory: bool


class Calibration(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str | None = None
    source: Source
    backend: str
    fits: list[Fit]
    unsupported: list[str] = Field(default_factory=list)
    samples: list[Sample]
    notes: list[str] = Field(default_factory=list)
    matmul_tflops: float | None = Field(None, description="Achieved matmul rate (TFLOP/s) a "
                                        "probe measured on the plan's GEMM shapes.")
    compute_scale: float | None = Field(None, description="An anchor's fitted kernel speed "
                                        "(efficiency.compute_scale), which plans and estimates "
                                        "on the cluster take unless they set their own.")
    network_scale: float | None = Field(None, description="An anchor's fitted network speed "
                                        "(efficiency.network_scale), where it was fitted.")
    runs: list[AnchoredRun] = Field(default_factory=list, description="An anchor's measured "
                                    "runs, before and after.")
    stack: str | None = Field(None, description="The software stack an anchor's runs were "
                              "measured on, where it was named; a request takes that anchor by "
                              "naming the stack (cluster.stack).")


class CalibrationIn(BaseModel):
    """The calibration a request is costed with: its fits (a whole calibration object, as
    ``planner calibrate --json`` prints it, is accepted; only id and fits are used)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field("inline", max_length=64, description="Shown as the source of every "
                    "collective cost that comes from these fits.")
    fits: tuple[Fit, ...] = Field(min_length=1, max_length=1000)
