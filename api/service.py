"""What the routes do, apart from HTTP: resolve references, plan, estimate, store."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from api import store
from api.problems import ApiProblem, not_found
from api.schemas import ClusterRef
from planner.calibration.model import CalibrationIn
from planner.cost import EfficiencyModel, estimate
from planner.cost.tables import cost_tables
from planner.errors import PlannerInputError
from planner.kept import Kept
from planner.launch import build_launch, with_launch
from planner.request import EstimateRequest, gpu_problem, parse_request
from planner.result import LaunchSpec, PlanEstimate
from planner.search import PlanRequest, PlanResult, answer
from planner.specs import ClusterSpec, TrainingSpec


def attached_calibration(body: Any, *, engine: Engine | None) -> CalibrationIn | None:
    """The request's own calibration, or the latest one stored for its referenced cluster
    (``engine`` is needed only for a referenced cluster)."""
    if body.calibration is not None:
        return body.calibration
    if isinstance(body.cluster, ClusterRef):
        assert engine is not None, "a stored cluster is read from the database"
        row = store.latest_calibration(engine=engine, cluster_id=body.cluster.id)
        if row is not None and row["body"].get("fits"):
            return CalibrationIn.model_validate(row["body"])
    return None


def attached_efficiency(body: Any, *, engine: Engine | None) -> EfficiencyModel:
    """The request's efficiency, with the stack's speeds of its referenced cluster's newest
    anchor of the stack it names (``cluster.stack``; none named: of no named stack) where the
    request sets neither ``compute_scale`` nor ``network_scale`` itself. A stack the cluster
    holds no anchor of is refused (422 naming ``cluster.stack`` and the stacks it holds)."""
    eff = body.efficiency
    if not isinstance(body.cluster, ClusterRef):
        return eff
    assert engine is not None, "a stored cluster is read from the database"
    ref = body.cluster
    row = store.latest_calibration(engine=engine, cluster_id=ref.id, anchor=True,
                                   stack=ref.stack)
    if row is None and ref.stack is not None:
        held = store.anchor_stacks(engine=engine, cluster_id=ref.id)
        raise ApiProblem(422, "Invalid request", f"cluster.stack: cluster {ref.id!r} holds no "
                         f"anchor of stack {ref.stack!r} (its anchored stacks: "
                         f"{', '.join(map(repr, held)) or 'none'})",
                         type_="/problems/invalid-request",
                         errors=[{"pointer": "#/cluster/stack", "field": "cluster.stack",
                                  "detail": "no anchor of this stack on the cluster"}])
    if row is None or eff.model_fields_set & {"compute_scale", "network_scale"}:
        return eff
    speeds = {k: row["body"][k] for k in ("compute_scale", "network_scale")
              if row["body"].get(k) is not None}
    speeds["anchor"] = row["id"]
    return eff.model_copy(update=speeds)


def resolve_cluster(cluster: Any, training: TrainingSpec, *, engine: Engine | None
                    ) -> ClusterSpec:
    """The request's cluster, a stored one read by its id; its GPUs checked against the
    request's training (what the request schema checks of a cluster given in full)."""
    if isinstance(cluster, ClusterRef):
        assert engine is not None, "a stored cluster is read from the database"
        row = store.get_cluster(engine=engine, cluster_id=cluster.id)
        if row is None:
            raise ApiProblem(422, "Invalid request", f"cluster.id: no stored cluster with id "
                             f"{cluster.id!r}", type_="/problems/invalid-request",
                             errors=[{"pointer": "#/cluster/id", "field": "cluster.id",
                                      "detail": "unknown cluster id"}])
        cluster = ClusterSpec.model_validate(row["spec"])
        problem = gpu_problem(cluster, training)
        if problem:
            raise PlannerInputError(f"training.{problem[0]}", problem[1])
    return cluster


def to_plan_request(body: Any, *, engine: Engine, max_time_limit_ms: int) -> PlanRequest:
    cluster = resolve_cluster(body.cluster, body.training, engine=engine)
    search = body.search
    if search.time_limit_ms > max_time_limit_ms:
        search = search.model_copy(update={"time_limit_ms": max_time_limit_ms})
    return PlanRequest(model=body.model, cluster=cluster, training=body.training, search=search,
                       efficiency=attached_efficiency(body, engine=engine),
                       calibration=attached_calibration(body, engine=engine))


def run_plan(req: PlanRequest, *, engine: Engine, metrics=None) -> tuple[dict, bool]:
    """Plan (or find the identical request's stored answer); (result JSON, newly created)."""
    existing = store.get_plan(engine=engine, plan_id=req.request_id())
    if existing is not None:
        return existing["result"], False
    result: PlanResult = answer(req)
    if metrics is not None:
        metrics.solve.labels(result.search.status).observe(result.search.solve_ms / 1e3)
    body = result.model_dump(mode="json")
    row, created = store.save_plan(
        engine=engine, plan_id=result.id, model_name=req.model.name,
        cluster_name=req.cluster.name, status=result.search.status,
        request=req.model_dump(mode="json"), result=body)
    return row["result"], created


def stored_launch(row: dict, rank: int) -> LaunchSpec:
    """The launch object of a stored plan. Plans stored before plans listed the frameworks
    that run them carry artifacts built without that check; theirs are rebuilt from the stored
    request, so no artifact runs a different plan than the one predicted."""
    est = row["result"]["plans"][rank - 1]
    if "frameworks" in (est.get("launch") or {}):
        return LaunchSpec.model_validate(est["launch"])
    req = PlanRequest.model_validate(row["request"])
    return build_launch(PlanEstimate.model_validate({**est, "launch": None}), req.model,
                        req.cluster, req.training, efficiency=req.efficiency)


def estimate_request(body: Any, *, engine: Engine | None) -> EstimateRequest:
    """The request with its stored cluster and calibration resolved (``engine`` may be None
    when the body references nothing stored: ``reads_store``)."""
    cluster = resolve_cluster(body.cluster, body.training, engine=engine)
    return EstimateRequest(model=body.model, cluster=cluster, training=body.training,
                           plan=body.plan, efficiency=attached_efficiency(body, engine=engine),
                           calibration=attached_calibration(body, engine=engine))


def reads_store(body: Any) -> bool:
    """Whether answering the body reads the database (a stored cluster and its calibration)."""
    return isinstance(body.cluster, ClusterRef)


# Estimates are pure functions of the (immutable) request: a scheduler asking again for a
# configuration it asked about before gets the JSON answer without recomputing it.
_ANSWERS: Kept[bytes] = Kept(4096)


def kept_answer(req: EstimateRequest, launch: bool) -> bytes | None:
    """The JSON answer of a request answered before, or None (cheap: no estimate is run)."""
    return _ANSWERS.get((req, launch))


def estimate_answer(req: EstimateRequest, launch: bool) -> bytes:
    """The estimate as JSON (with its launch artifacts, built at the edge, when asked for),
    kept for the next identical request."""
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    est = estimate(req.model, req.cluster, req.training, req.plan, req.efficiency,
                   tables=tables)
    if launch:
        est = with_launch(est, req.model, req.cluster, req.training, req.efficiency)
    return _ANSWERS.put((req, launch), est.model_dump_json().encode())


def plan_summary(row: dict) -> dict:
    result = row["result"]
    best = result["plans"][0] if result.get("plans") else None
    return {
        "id": row["id"], "created_at": row["created_at"], "model": row["model_name"],
        "cluster": row["cluster_name"], "status": row["status"],
        "best": None if best is None else {k: best[k] for k in
                                           ("dp", "tp", "pp", "cp", "step_time_s", "mfu")},
    }


def get_plan_or_404(plan_id: str, *, engine: Engine) -> dict:
    row = store.get_plan(engine=engine, plan_id=plan_id)
    if row is None:
        raise not_found("plan", plan_id)
    return row


def anchor(body: Any, cluster_spec: dict) -> dict:
    """An anchor of a stored cluster: the stack's speeds fitted to the measured runs (each run
    without a cluster of its own ran on the stored cluster, ``cluster_spec``), as a
    calibration body."""
    from planner.calibration.anchor import AnchorRequest, fit_anchor
    from planner.calibration.model import Calibration

    runs = body.runs
    if not runs:
        raise ApiProblem(422, "Invalid request", "runs: required when source is 'anchor'",
                         type_="/problems/invalid-request",
                         errors=[{"pointer": "#/runs", "field": "runs", "detail": "required"}])
    runs = [{"cluster": cluster_spec, **r} for r in runs]
    fit = fit_anchor(parse_request(AnchorRequest, {"runs": runs, "network": body.network}))
    return Calibration(source="anchor", backend="steps", fits=[], samples=[], notes=fit.notes,
                       stack=body.stack, compute_scale=fit.compute_scale,
                       network_scale=fit.network_scale if fit.network_fitted else None,
                       runs=fit.runs).model_dump(mode="json")


def calibrate(body: Any) -> dict:
    """Fit measurements given in a request (samples, nccl-tests logs or a trace)."""
    from planner.calibration.fit import fit_samples
    from planner.calibration.model import Calibration
    from planner.calibration.nccl_tests import NcclTestsFormatError, parse
    from planner.calibration.trace import TraceFormatError, calibration_from_trace, read_trace

    def need(field: str, value):
        if not value:
            raise ApiProblem(422, "Invalid request", f"{field}: required when source is "
                             f"{body.source!r}", type_="/problems/invalid-request",
                             errors=[{"pointer": f"#/{field}", "field": field,
                                      "detail": "required"}])
        return value

    if body.source == "samples":
        fits, samples, notes = fit_samples(need("samples", body.samples))
        cal = Calibration(source="samples", backend="unknown", fits=fits, samples=samples,
                          notes=notes)
    elif body.source == "nccl-tests":
        samples, notes = [], []
        for i, text in enumerate(need("logs", body.logs)):
            try:
                log = parse(text, op=body.op, ranks=body.ranks, nodes=body.nodes)
            except NcclTestsFormatError as exc:
                raise ApiProblem(422, "Invalid request", f"logs.{i}: {exc}",
                                 type_="/problems/invalid-request") from None
            samples += log.samples()
            notes += [f"log {i}: {n}" for n in log.notes]
        fits, fitted, more = fit_samples(samples)
        cal = Calibration(source="nccl-tests", backend="nccl", fits=fits, samples=fitted,
                          notes=notes + more)
    else:   # trace
        try:
            cal = calibration_from_trace(read_trace(need("trace", body.trace)))
        except TraceFormatError as exc:
            raise ApiProblem(422, "Invalid request", f"trace: {exc}",
                             type_="/problems/invalid-request") from None
    return cal.model_dump(mode="json")


def check_cluster_id(body: Any, *, engine) -> None:
    if body.cluster_id is not None and store.get_cluster(engine=engine,
                                                         cluster_id=body.cluster_id) is None:
        raise ApiProblem(422, "Invalid request", f"cluster_id: no stored cluster with id "
                         f"{body.cluster_id!r}", type_="/problems/invalid-request",
                         errors=[{"pointer": "#/cluster_id", "field": "cluster_id",
                                  "detail": "unknown cluster id"}])
