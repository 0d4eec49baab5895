"""Validations: a plan result's top plans run as probe jobs, compared and re-ranked."""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Annotated

from fastapi import APIRouter, Body, Path, Request, Response

from api import store
from api.problems import MEDIA_TYPE, PROBLEM_RESPONSES, ApiProblem, Problem, not_found
from api.routes.deps import READ, WRITE, EngineDep, SettingsDep
from api.schemas import JobPublic, ValidationCreate
from api.service import check_cluster_id, get_plan_or_404

router = APIRouter(prefix="/v1", tags=["validations"], responses=PROBLEM_RESPONSES)


@router.post("/plans/{plan_id}/validations", status_code=202, response_model=JobPublic,
             dependencies=WRITE, summary="Validate a plan result", operation_id="validations-create",
             responses={403: {"model": Problem, "content": {MEDIA_TYPE: {}},
                              "description": "Probe jobs are switched off on this service."},
                        409: {"model": Problem, "content": {MEDIA_TYPE: {}},
                              "description": "A plan result over pools (probes run one "
                              "cluster's GPUs)."}})
def create_validation(
    plan_id: str, request: Request, response: Response, engine: EngineDep, settings: SettingsDep,
    body: Annotated[ValidationCreate, Body(openapi_examples={"top 3 on 4 ranks": {
        "summary": "The top 3 plans on 4 local gloo ranks",
        "value": {"top_k": 3, "nproc": 4, "steps": 2}}})],
):
    """Run the top plans of a stored plan result as short torch.distributed jobs shaped like
    their training step, measure them, compare with the prediction and re-rank (a job: 202 +
    Location; the validation's id is the job's)."""
    row = get_plan_or_404(plan_id, engine=engine)
    if (row["request"].get("cluster") or {}).get("pools"):
        raise ApiProblem(409, "Conflict", "validation probes one cluster's GPUs: this plan "
                         "result is over pools; plan on one pool to validate",
                         type_="/problems/not-probeable")
    check_cluster_id(body, engine=engine)
    if not settings.allow_local_sweeps:
        raise ApiProblem(403, "Forbidden", "this service does not run probe jobs "
                         "(PLANNER_ALLOW_LOCAL_SWEEPS=false)", type_="/problems/forbidden")
    job = store.create_job(engine=engine, kind="validation",
                           request={"plan_id": plan_id, "validation": body.model_dump()})
    request.app.state.jobs.submit(job["id"])
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    return job


def _validation_job(engine, validation_id: str) -> dict:
    job = store.get_job(engine=engine, job_id=validation_id)
    if job is None or job["kind"] != "validation":
        raise not_found("validation", validation_id)
    return job


@router.get("/validations/{validation_id}", dependencies=READ, summary="Read a validation",
            operation_id="validations-get")
def get_validation(validation_id: str, engine: EngineDep) -> dict:
    """The job's state and, once it succeeded, predicted vs measured per plan, the measured
    order and Kendall's tau between predicted and measured rankings."""
    job = _validation_job(engine, validation_id)
    return {"id": job["id"], "state": job["state"], "progress": job["progress"],
            "result": job["result"], "error": job["error"]}


@router.get("/validations/{validation_id}/trace/{n}", dependencies=READ,
            summary="Download a measured trace", operation_id="validations-trace",
            responses={200: {"content": {"application/json": {}}}})
def get_trace(validation_id: str, n: Annotated[int, Path(ge=1, le=10)], engine: EngineDep,
              settings: SettingsDep) -> Response:
    """The torch.profiler Chrome trace of the n-th validated plan's measured steps."""
    _validation_job(engine, validation_id)
    path = FsPath(settings.data_dir, "validations", validation_id, f"plan{n}-measured.json")
    if not path.is_file():
        raise not_found("trace", f"{validation_id}/{n}")
    return Response(path.read_bytes(), media_type="application/json")
