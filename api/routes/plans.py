"""Plans: search for the best plans, read them back, list them."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Body, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse

from api import store
from api.links import links
from api.problems import MEDIA_TYPE, PROBLEM_RESPONSES, ApiProblem, Problem
from api.routes.deps import READ, WRITE, EngineDep, Limit, Offset, SettingsDep
from api.routes.examples import ESTIMATE_EXAMPLES, PLAN_EXAMPLES
from api.schemas import ClusterRef, EstimateRequestIn, Page, PlanCreated, PlanRequestIn, PlanSummary
from api.service import (
    check_cluster_id,
    estimate_answer,
    estimate_request,
    get_plan_or_404,
    kept_answer,
    plan_summary,
    reads_store,
    run_plan,
    stored_launch,
    to_plan_request,
)
from planner.errors import PlannerInputError
from planner.launch import FORMATS, LaunchFormat, NotRunnable, render
from planner.result import PlanEstimate
from planner.search import PlanResult

router = APIRouter(prefix="/v1", tags=["plans"], responses=PROBLEM_RESPONSES)
PLAN_LINKS = links("plan_id", "plans-get", "plans-launch", "plans-trace", "validations-create")


@router.post("/plans", status_code=201, response_model=PlanCreated, dependencies=WRITE,
             response_model_exclude_unset=True,   # "validation" only when one was asked for
             summary="Find the best plans", operation_id="plans-create",
             responses={200: {"model": PlanCreated,
                              "description": "The same request was planned before: its "
                                             "stored answer.", **PLAN_LINKS},
                        201: PLAN_LINKS,
                        403: {"model": Problem, "content": {MEDIA_TYPE: {}},
                              "description": "A validation was asked for; probe jobs are "
                                             "switched off on this service."}})
async def create_plan(
    body: Annotated[PlanRequestIn, Body(openapi_examples=PLAN_EXAMPLES)],
    request: Request, response: Response, engine: EngineDep, settings: SettingsDep,
):
    """Search every dp/tp/pp/cp/ep/vpp/micro-batch/recompute/ZeRO combination (and uneven
    stages, and the slices of a fragmented allocation) for the k fastest plans that fit in
    memory (exact search), each with its step time, memory and breakdown; or status
    INFEASIBLE with the reasons (an answer, not an error: 201 as well). The id is a hash of
    the request and of the planner's revision (``search.revision``), so an identical request
    returns the stored answer with 200 until the planner is upgraded, then is planned anew."""
    if body.validation is not None and not settings.allow_local_sweeps:
        raise ApiProblem(403, "Forbidden", "validation: this service does not run probe jobs "
                         "(PLANNER_ALLOW_LOCAL_SWEEPS=false)", type_="/problems/forbidden")
    if body.validation is not None:
        await anyio.to_thread.run_sync(lambda: check_cluster_id(body.validation, engine=engine))

    def work():   # database reads and the solve, off the event loop
        req = to_plan_request(body, engine=engine, max_time_limit_ms=settings.max_time_limit_ms)
        return run_plan(req, engine=engine, metrics=request.app.state.metrics)

    result, created = await anyio.to_thread.run_sync(work,
                                                      limiter=request.app.state.solve_limiter)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/plans/{result['id']}"
    if body.validation is not None and result["plans"]:
        spec = body.validation
        if isinstance(body.cluster, ClusterRef) and spec.cluster_id is None:
            spec = spec.model_copy(update={"cluster_id": body.cluster.id})
        job = await anyio.to_thread.run_sync(lambda: store.create_job(
            engine=engine, kind="validation",
            request={"plan_id": result["id"], "validation": spec.model_dump()}))
        request.app.state.jobs.submit(job["id"])
        response.headers["Link"] = f'</v1/jobs/{job["id"]}>; rel="validation"'
        return {**result, "validation": job}
    return result


@router.get("/plans/{plan_id}", response_model=PlanResult, dependencies=READ,
            summary="Read a plan result", operation_id="plans-get")
def get_plan(plan_id: str, engine: EngineDep):
    """The stored result of a plan search."""
    return get_plan_or_404(plan_id, engine=engine)["result"]


@router.get("/plans/{plan_id}/launch/{fmt}", dependencies=READ, response_class=PlainTextResponse,
            summary="Download a launch artifact", operation_id="plans-launch",
            responses={200: {"content": {m: {} for m, _ in FORMATS.values()},
                             "description": "The artifact as a file."},
                       409: {"model": Problem, "content": {MEDIA_TYPE: {}},
                             "description": "That framework cannot run this plan as predicted; "
                                            "the problem names what it lacks."}})
def get_launch(plan_id: str, fmt: Annotated[LaunchFormat, Path(description="Artifact.")],
               engine: EngineDep,
               rank: Annotated[int, Query(ge=1, le=100, description="Which plan (1 = best).")] = 1):
    """One launch artifact of a stored plan: Megatron-LM arguments, torchtitan TOML, DeepSpeed
    JSON, torchrun command (one per node on a fragmented allocation), sbatch script,
    Kubernetes JobSet or hostfile (fragmented allocations). A framework that cannot run the
    plan as predicted (see the plan's ``frameworks``) is refused with 409, never rendered as a
    different plan."""
    row = get_plan_or_404(plan_id, engine=engine)
    plans = row["result"].get("plans") or []
    if rank > len(plans):
        raise ApiProblem(404, "Not Found", f"plan {plan_id} has {len(plans)} plan(s); no rank "
                         f"{rank}", type_="/problems/not-found")
    launch = stored_launch(row, rank)
    try:
        text = render(launch, fmt)
    except NotRunnable as exc:
        raise ApiProblem(409, "Conflict", str(exc), type_="/problems/framework-cannot-run-plan",
                         framework=exc.framework, missing=exc.reasons) from None
    media, ext = FORMATS[fmt]
    return Response(text, media_type=media, headers={
        "Content-Disposition": f'attachment; filename="{plan_id}-{rank}.{ext}"'})


@router.get("/plans/{plan_id}/trace", dependencies=READ, summary="Predicted step trace",
            operation_id="plans-trace",
            responses={200: {"content": {"application/json": {}},
                             "description": "Chrome trace JSON (open in Perfetto)."},
                       409: {"model": Problem, "content": {MEDIA_TYPE: {}},
                             "description": "A pipeline over pools: its stages run on "
                             "different GPUs, the trace is not drawn."}})
def get_trace(plan_id: str, engine: EngineDep,
              rank: Annotated[int, Query(ge=1, le=100, description="Which plan (1 = best).")] = 1):
    """The predicted training step of a stored plan as a Chrome trace: one process per
    pipeline stage, forward and backward of every micro-batch in 1F1B order, send/recv, the
    gradient reduction and the optimizer."""
    from planner.search import PlanRequest
    from planner.validation.predicted_trace import predicted_trace

    row = get_plan_or_404(plan_id, engine=engine)
    plans = row["result"].get("plans") or []
    if rank > len(plans):
        raise ApiProblem(404, "Not Found", f"plan {plan_id} has {len(plans)} plan(s); no rank "
                         f"{rank}", type_="/problems/not-found")
    req = PlanRequest.model_validate(row["request"])
    est = PlanEstimate.model_validate(plans[rank - 1])
    try:
        doc = predicted_trace(est, req.model, req.cluster, req.training, req.efficiency)
    except PlannerInputError as exc:    # a pipeline over pools
        raise ApiProblem(409, "Conflict", exc.reason,
                         type_="/problems/trace-not-available") from None
    return Response(json.dumps(doc), media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="{plan_id}-{rank}-predicted.json"'})


@router.get("/plans", response_model=Page[PlanSummary], dependencies=READ,
            summary="List plan results", operation_id="plans-list")
def list_plans(engine: EngineDep, limit: Limit = 50, offset: Offset = 0,
               model: Annotated[str | None, Query(max_length=200,
                                                  description="Model name.")] = None,
               cluster: Annotated[str | None, Query(max_length=200,
                                                    description="Cluster name.")] = None):
    """Newest first; filter by model and cluster name."""
    rows, count = store.list_plans(engine=engine, limit=limit, offset=offset, model=model,
                                   cluster=cluster)
    return {"data": [plan_summary(r) for r in rows], "count": count}


@router.post("/estimates", response_model=PlanEstimate, dependencies=WRITE,
             summary="Cost one fixed plan", operation_id="estimates-create")
async def create_estimate(
    body: Annotated[EstimateRequestIn, Body(openapi_examples=ESTIMATE_EXAMPLES)],
    engine: EngineDep,
    include: Annotated[Literal["launch"] | None, Query(
        description="'launch': add the plan's launch artifacts (Megatron-LM arguments, "
        "torchrun, sbatch, ...); left out by default to keep the answer small.")] = None,
):
    """Step time, memory of the most loaded GPU, time breakdown and the collectives of one
    given plan; with ``?include=launch`` its launch artifacts too. A request answered before
    is answered from memory on the event loop; any other runs in a worker thread (the
    estimate, and the stored-cluster read, never hold the event loop)."""
    launch = include == "launch"
    if reads_store(body):               # the stored cluster and calibration: a thread too
        text = await anyio.to_thread.run_sync(lambda: estimate_answer(
            estimate_request(body, engine=engine), launch))
        return Response(text, media_type="application/json")
    req = estimate_request(body, engine=None)
    hit = kept_answer(req, launch)
    if hit is None:
        hit = await anyio.to_thread.run_sync(estimate_answer, req, launch)
    return Response(hit, media_type="application/json")
