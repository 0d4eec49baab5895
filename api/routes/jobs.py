"""Jobs: long-running work as resources to poll (202 + Location)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response

from api import store
from api.links import links
from api.problems import PROBLEM_RESPONSES, ApiProblem, not_found
from api.routes.deps import READ, WRITE, EngineDep, Limit, Offset, SettingsDep
from api.schemas import JobCreate, JobPublic, JobState, Page
from api.service import to_plan_request

router = APIRouter(prefix="/v1", tags=["jobs"], responses=PROBLEM_RESPONSES)

JOB_EXAMPLES = {
    "plan in the background": {
        "summary": "A plan search for 128 DGX H100 nodes, polled as a job",
        "value": {"kind": "plan", "request": {
            "model": {"preset": "llama3-405b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 128},
            "training": {"global_batch_size": 2048, "seq_length": 8192},
            "search": {"top_k": 5, "time_limit_ms": 30000}}},
    },
}


@router.post("/jobs", status_code=202, response_model=JobPublic, dependencies=WRITE,
             summary="Start a job", operation_id="jobs-create",
             responses={202: links("job_id", "jobs-get", "jobs-cancel")})
def create_job(body: Annotated[JobCreate, Body(openapi_examples=JOB_EXAMPLES)],
               request: Request, response: Response, engine: EngineDep,
               settings: SettingsDep):
    """Queue a job and answer at once; poll the Location for its state and result."""
    # Resolve references now, so a bad request is a 4xx here, not a failed job later.
    req = to_plan_request(body.request, engine=engine,
                          max_time_limit_ms=settings.max_time_limit_ms)
    row = store.create_job(engine=engine, kind=body.kind, request=req.model_dump(mode="json"))
    request.app.state.jobs.submit(row["id"])
    response.headers["Location"] = f"/v1/jobs/{row['id']}"
    return row


@router.get("/jobs/{job_id}", response_model=JobPublic, dependencies=READ,
            summary="Read a job", operation_id="jobs-get")
def get_job(job_id: str, response: Response, engine: EngineDep):
    """State (queued, running, succeeded, failed, cancelled), progress, result or error."""
    row = store.get_job(engine=engine, job_id=job_id)
    if row is None:
        raise not_found("job", job_id)
    if row["state"] in store.ACTIVE_STATES:
        response.headers["Retry-After"] = "1"
    return row


@router.get("/jobs", response_model=Page[JobPublic], dependencies=READ,
            summary="List jobs", operation_id="jobs-list")
def list_jobs(engine: EngineDep, limit: Limit = 50, offset: Offset = 0,
              state: Annotated[JobState | None, Query(description="Only this state.")] = None):
    """Newest first."""
    rows, count = store.list_jobs(engine=engine, limit=limit, offset=offset, state=state)
    return {"data": rows, "count": count}


@router.delete("/jobs/{job_id}", response_model=JobPublic, dependencies=WRITE,
               summary="Cancel a job", operation_id="jobs-cancel",
               responses={409: {"description": "The job has already finished."}})
def cancel_job(job_id: str, engine: EngineDep):
    """Cancel a queued or running job (a running search finishes but its result is dropped)."""
    row = store.get_job(engine=engine, job_id=job_id)
    if row is None:
        raise not_found("job", job_id)
    if not store.update_job(engine=engine, job_id=job_id, only_if=store.ACTIVE_STATES,
                            state="cancelled", finished_at=store.now()):
        raise ApiProblem(409, "Conflict", f"job {job_id} already {row['state']}",
                         type_="/problems/job-finished")
    return store.get_job(engine=engine, job_id=job_id)
