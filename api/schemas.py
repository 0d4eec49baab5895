"""Request and response schemas of the HTTP API (the planner's contract, plus references)."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.calibration.model import Calibration, Sample
from planner.request import EstimateRequest
from planner.search import PlanRequest, PlanResult
from planner.specs import ClusterSpec
from planner.vocabulary import Collective, ProbeCompute, ValidationModeChoice

T = TypeVar("T")


# A software stack's name, as an anchor is stored under it and a request names it.
Stack = Annotated[str, StringConstraints(min_length=1, max_length=64,
                                         pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._+/:-]*$")]


class ClusterRef(BaseModel):
    """A cluster stored with POST /v1/clusters."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64)
    stack: Stack | None = Field(None, description="The software stack that will run: "
                              "the newest anchor stored under that name gives the kernel and "
                              "network speeds. Without it, the newest anchor stored without a "
                              "stack does.", examples=["megatron-core 0.14"])


UNION_TAGS = ("~ref", "~spec")   # tags appear in error locations; problems.py drops them


def _cluster_kind(v: Any) -> str:
    return UNION_TAGS[0] if isinstance(v, dict) and "id" in v else UNION_TAGS[1]


ClusterField = Annotated[
    Annotated[ClusterRef, Tag(UNION_TAGS[0])] | Annotated[ClusterSpec, Tag(UNION_TAGS[1])],
    Discriminator(_cluster_kind),
    Field(description='A preset with overrides ({"preset": "dgx-h100", "num_nodes": 4}), '
                      'explicit fields, or a stored cluster ({"id": "cl-..."}).'),
]


class ValidationCreate(BaseModel):
    """Run a stored plan result's top plans as probe jobs on this machine's ranks."""

    model_config = ConfigDict(extra="forbid")
    top_k: int = Field(3, ge=1, le=10)
    launcher: Literal["local"] = Field("local", description="local: torchrun on the service "
                                       "host (gloo on CPU). Cluster validations are written and "
                                       "read back by the CLI (planner validate --launcher "
                                       "slurm|kubernetes, planner validate-import).")
    nproc: int = Field(4, ge=2, le=8, description="Ranks. A plan needing more runs sampled.")
    mode: ValidationModeChoice = Field(
        "auto", description="full: all of a plan's ranks; sampled: one representative group "
        "per strategy, the step composed from them; auto: full when the plan fits in nproc.")
    compute: ProbeCompute = Field(
        "auto", description="gemm: the probe runs the GEMMs; emulate: it sleeps for their "
        "benchmarked time; auto: emulate when the ranks outnumber the host's cores.")
    feed_calibration: bool = Field(False, description="Store the collectives the probes "
                                   "measured (and the matmul rate) as a calibration; its id is "
                                   "in the result as calibration_id.")
    cluster_id: str | None = Field(None, max_length=64, description="With feed_calibration: "
                                   "the stored cluster to file the calibration under (later "
                                   "plans on that cluster are costed with it). A plan request "
                                   "on a stored cluster sets it.")
    steps: int = Field(2, ge=1, le=20, description="Measured steps per plan.")
    timeout_s: float = Field(300, ge=10, le=3600, description="Per probe job.")


class PlanRequestIn(PlanRequest):
    cluster: ClusterField  # type: ignore[assignment]
    validation: ValidationCreate | None = Field(None, description="Also validate the top "
                                                "plans: starts a validation job (its link is "
                                                "in the answer's validation field).")


class EstimateRequestIn(EstimateRequest):
    cluster: ClusterField  # type: ignore[assignment]


class Page(BaseModel, Generic[T]):
    data: list[T]
    count: int = Field(description="Items matching the query, over all pages.")


class PlanSummary(BaseModel):
    id: str
    created_at: str
    model: str
    cluster: str
    status: str
    best: dict | None = Field(None, description="dp, tp, pp, cp, step_time_s, mfu of plan 1.")


class ClusterCreate(ClusterSpec):
    """A cluster to store: the same fields as an inline cluster (preset and overrides)."""


class ClusterPublic(BaseModel):
    id: str
    name: str
    created_at: str
    spec: ClusterSpec


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobCreate(BaseModel):
    """A long-running piece of work, polled at /v1/jobs/{id}."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["plan"] = Field(description="plan: a plan search run in the background "
                                  "(for large spaces or long time limits).")
    request: PlanRequestIn

    @model_validator(mode="after")
    def _no_validation(self) -> JobCreate:
        # Silently dropping it would leave a caller waiting for a validation that never runs.
        if self.request.validation is not None:
            raise ValueError("request.validation: a plan job does not validate; ask with POST "
                             "/v1/plans or POST /v1/plans/{id}/validations")
        return self


class JobPublic(BaseModel):
    id: str
    kind: str
    state: JobState
    progress: float = Field(description="0 to 1.")
    result: dict | None = None
    error: dict | None = Field(None, description="A problem+json object when the job failed.")
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    attempts: int = Field(0, description="Runs started; a job whose replica stopped under it "
                          "is queued again (PLANNER_JOB_MAX_ATTEMPTS).")


class PresetList(BaseModel):
    data: list[dict]
    count: int


class SweepSpec(BaseModel):
    """A torch.distributed sweep run by the service on its own machine, as a job."""

    model_config = ConfigDict(extra="forbid")
    nproc: int = Field(4, ge=2, le=8, description="Local ranks.")
    backend: Literal["gloo", "nccl"] = "gloo"
    sizes: list[Annotated[int, Field(ge=4, le=2**30)]] = Field(
        default=[4096, 16384, 65536, 262144, 1048576, 4194304], min_length=3, max_length=32,
        description="Bytes: 4 B to 1 GiB on GPUs (nccl), to 64 MiB on CPUs (gloo).")
    ops: list[Collective] | None = Field(
        None, max_length=16)
    timeout_s: float = Field(600, ge=10, le=3600)
    repeats: int = Field(3, ge=1, le=1000, description="Batches per size per pass.")
    budget_s: float = Field(60, ge=0, le=3600, description="Seconds in all for more passes, "
                            "until every median's 95% interval is within 5% (0: one pass).")
    min_batch_ms: float = Field(20, ge=0.1, le=10_000,
                                description="Each timed batch repeats the call this long.")

    @model_validator(mode="after")
    def _cpu_memory(self) -> SweepSpec:
        if self.backend == "gloo" and max(self.sizes) > 64 * 2**20:
            raise ValueError(f"gloo sweeps run in this machine's memory: sizes up to 64 MiB, "
                             f"not {max(self.sizes)}")
        return self


# Calibration request fields that belong to one source: field -> (that source, what it gives).
_ONE_SOURCE = {"ranks": ("nccl-tests", "the group an nccl-tests log ran on"),
               "nodes": ("nccl-tests", "the group an nccl-tests log ran on"),
               "stack": ("anchor", "the stack of an anchor, whose runs it measured")}


class CalibrationCreate(BaseModel):
    """Measurements to fit: raw samples, nccl-tests logs (their text), a torch.profiler trace
    (its JSON), a sweep to run, or measured steps of your stack to anchor the model on."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["samples", "nccl-tests", "trace", "sweep", "anchor"]
    samples: list[Sample] | None = Field(None, max_length=100_000)
    logs: list[str] | None = Field(None, max_length=64, description="nccl-tests outputs.")
    op: str | None = Field(None, description="Collective of logs that do not name it.")
    ranks: int | None = Field(None, ge=1, le=1_000_000, description="nccl-tests: the ranks a "
                              "log without its '#  Rank' lines ran on.")
    nodes: int | None = Field(None, ge=1, le=1_000_000, description="nccl-tests: the nodes "
                              "those ranks spanned (more than one: the inter-node tier).")
    trace: dict | None = Field(None, description="Chrome trace JSON from torch.profiler.")
    sweep: SweepSpec | None = None
    runs: list[dict] | None = Field(None, max_length=32, description="anchor: measured runs, "
                                    "each an estimate request with its measured_step_time_s "
                                    "(as POST /v1/anchors takes them); a run without a "
                                    "cluster ran on this stored cluster.")
    network: Literal["auto", "fit", "spec"] = Field("auto", description="anchor: whether the "
                                                    "network's speed is fitted too (as POST "
                                                    "/v1/anchors).")
    stack: Stack | None = Field(None, description="anchor: the software stack the runs "
                              "measured (e.g. 'megatron-core 0.14', 'torchtitan 0.2'); a request "
                              "takes this anchor by naming it in cluster.stack. An anchor without "
                              "one serves requests that name no stack.")

    @field_validator("ranks", "nodes", "stack")
    @classmethod
    def _of_its_source(cls, v: object, info: ValidationInfo) -> object:
        source, what = _ONE_SOURCE[str(info.field_name)]
        given = info.data.get("source")
        if v is not None and given != source:
            raise ValueError(f"gives {what} (source {source!r}); a calibration from "
                             f"{given!r} has none")
        return v


class CalibrationPublic(Calibration):
    cluster_id: str | None = None
    created_at: str


class PlanCreated(PlanResult):
    """A plan result; with ``validation`` when the request asked for one: the job that runs it
    (poll /v1/jobs/{id}; the result is also at /v1/validations/{id})."""

    validation: JobPublic | None = None
