"""Calibrations: measured collective costs, attached to a stored cluster."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response

from api import store
from api.links import links
from api.problems import MEDIA_TYPE, PROBLEM_RESPONSES, ApiProblem, Problem, not_found
from api.routes.deps import READ, WRITE, EngineDep, Limit, Offset, SettingsDep
from api.schemas import CalibrationCreate, CalibrationPublic, JobPublic, Page, SweepSpec
from api.service import anchor, calibrate
from planner.calibration.anchor import AnchorFit, AnchorRequest, fit_anchor
from planner.calibration.model import Source

router = APIRouter(prefix="/v1", tags=["calibrations"], responses=PROBLEM_RESPONSES)

EXAMPLES = {
    "samples": {"summary": "Measured samples",
                "value": {"source": "samples", "samples": [
                    {"op": "all_reduce", "group_size": 8, "message_bytes": m, "time_us": t}
                    for m, t in ((65536, 18.0), (1048576, 31.0), (16777216, 140.0),
                                 (268435456, 2100.0))]}},
    "sweep": {"summary": "A 4-rank gloo sweep run as a job",
              "value": {"source": "sweep", "sweep": {"nproc": 4, "backend": "gloo"}}},
    "anchor": {"summary": "A measured step of your stack on this cluster (the stack's speeds, "
                          "which plans and estimates on the cluster then take)",
               "value": {"source": "anchor", "stack": "megatron-core 0.14", "runs": [{
                   "measured_step_time_s": 12.78, "model": {"preset": "llama3-8b"},
                   "training": {"global_batch_size": 128, "seq_length": 8192},
                   "plan": {"dp": 4, "cp": 2, "micro_batch_size": 1, "zero_stage": 1}}]}},
}


# Rank 0's log of Megatron-LM's Llama 3 8B fp8 example on 32 H100 (the arguments a run is
# read from, trimmed to those; tests/data/megatron holds the whole block).
MEGATRON_LOG = (
    '------------------------ arguments ------------------------\n'
    '  attention_dropout ............................... 0.0\n'
    '  bf16 ............................................ True\n'
    '  context_parallel_size ........................... 2\n'
    '  ffn_hidden_size ................................. 14336\n'
    '  fp8 ............................................. hybrid\n'
    '  global_batch_size ............................... 128\n'
    '  group_query_attention ........................... True\n'
    '  hidden_dropout .................................. 0.0\n'
    '  hidden_size ..................................... 4096\n'
    '  micro_batch_size ................................ 1\n'
    '  num_attention_heads ............................. 32\n'
    '  num_layers ...................................... 32\n'
    '  num_query_groups ................................ 8\n'
    '  overlap_grad_reduce ............................. True\n'
    '  overlap_param_gather ............................ True\n'
    '  pipeline_model_parallel_size .................... 1\n'
    '  seq_length ...................................... 8192\n'
    '  sequence_parallel ............................... True\n'
    '  swiglu .......................................... True\n'
    '  tensor_model_parallel_size ...................... 2\n'
    '  untie_embeddings_and_output_weights ............. True\n'
    '  use_distributed_optimizer ....................... True\n'
    '  world_size ...................................... 32\n'
    '-------------------- end of arguments ---------------------\n'
    ' > padded vocab (size: 128256) with 0 dummy tokens (new size: 128256)\n'
    ' iteration        1/      50 | elapsed time per iteration (ms): 24310.5 |\n'
    ' iteration        2/      50 | elapsed time per iteration (ms): 3120.4 |\n'
    ' iteration        3/      50 | elapsed time per iteration (ms): 3115.9 |\n'
)


# A torchtitan job config (Llama 3 8B on 8 H100, FSDP, per-op selective recompute, compiled)
# and the lines of its log a run is read from.
TORCHTITAN_CONFIG = (
    '[model]\n'
    'name = "llama3"\n'
    'flavor = "8B"\n'
    '[training]\n'
    'local_batch_size = 1\n'
    'seq_len = 8192\n'
    '[parallelism]\n'
    'data_parallel_replicate_degree = 1\n'
    'data_parallel_shard_degree = -1\n'
    'tensor_parallel_degree = 1\n'
    'pipeline_parallel_degree = 1\n'
    'context_parallel_degree = 1\n'
    '[activation_checkpoint]\n'
    'mode = "selective"\n'
    'selective_ac_option = "op"\n'
    '[compile]\n'
    'enable = true\n'
    'components = ["model", "loss"]\n'
)
TORCHTITAN_LOG = (
    'Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, '
    'tp=1, ep=1, etp=1\n'
    'step:  1  loss: 11.90000  memory: 66.71GiB(83.81%)  tps: 512  mfu: 2.74%\n'
    'step: 10  loss: 11.00000  memory: 68.02GiB(85.45%)  tps: 7,124  mfu: 38.16%\n'
    'step: 20  loss: 10.00000  memory: 68.02GiB(85.45%)  tps: 7,135  mfu: 38.22%\n'
)


ANCHOR_EXAMPLES = {
    "one-run": {"summary": "One measured step of Llama 3.1 8B on 8 H100 (DGX Cloud "
                           "Benchmarking 25.02)",
                "value": {"runs": [{
                    "name": "Llama 3.1 8B, 8 H100", "measured_step_time_s": 12.78,
                    "model": {"name": "Llama 3.1 8B", "num_layers": 32, "hidden_size": 4096,
                              "num_attention_heads": 32, "num_kv_heads": 8,
                              "ffn_hidden_size": 14336, "ffn_type": "swiglu",
                              "vocab_size": 128256, "tied_embeddings": False},
                    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
                    "training": {"global_batch_size": 128, "seq_length": 8192,
                                 "precision": "bf16", "grad_dtype": "bf16"},
                    "plan": {"dp": 4, "tp": 1, "pp": 1, "cp": 2, "vpp": 1,
                             "micro_batch_size": 1, "recompute": "none", "zero_stage": 1,
                             "sequence_parallel": False}}]}},
    "torchtitan": {"summary": "A torchtitan job config and its log, read into their run (the "
                              "model, batch and parallelism; the device mesh, tokens per "
                              "second)",
                   "value": {"runs": [{"name": "Llama 3 8B, 8 H100 (torchtitan)",
                                       "torchtitan_config": TORCHTITAN_CONFIG,
                                       "torchtitan_log": TORCHTITAN_LOG,
                                       "cluster": {"preset": "dgx-h100"}}]}},
    "megatron-log": {"summary": "A Megatron-LM training log, read into its run (the arguments "
                                "it prints at start-up, its iteration times)",
                     "value": {"runs": [{"name": "Llama 3 8B fp8, 32 H100",
                                         "megatron_log": MEGATRON_LOG,
                                         "cluster": {"preset": "dgx-h100"}}]}},
}


def _public(row: dict) -> dict:
    return {**row["body"], "cluster_id": row["cluster_id"], "created_at": row["created_at"]}


@router.post("/clusters/{cluster_id}/calibrations", status_code=201, dependencies=WRITE,
             response_model=CalibrationPublic, summary="Calibrate a cluster",
             operation_id="calibrations-create",
             responses={201: links("calibration_id", "calibrations-get",
                                   "calibrations-plot"),
                        202: {"model": JobPublic, "description": "A sweep: the job to poll.",
                              **links("job_id", "jobs-get", "jobs-cancel")},
                        403: {"model": Problem, "content": {MEDIA_TYPE: {}},
                              "description": "Sweeps are switched off on this service."}})
def create_calibration(
    cluster_id: str, body: Annotated[CalibrationCreate, Body(openapi_examples=EXAMPLES)],
    request: Request, response: Response, engine: EngineDep, settings: SettingsDep,
):
    """Fit alpha-beta models to measurements and attach them to the cluster: plans and
    estimates that reference the cluster by id are then costed with them. Samples, logs and
    traces are fitted at once (201); a sweep runs as a job (202 + Location of the job). An
    anchor (``source`` 'anchor': measured steps, as ``POST /v1/anchors`` takes them, a run
    without a cluster having run on this one) fits the stack's kernel and network speeds,
    which plans and estimates on the cluster then take unless they set
    ``efficiency.compute_scale`` or ``network_scale`` themselves; the newest anchor and the
    newest collective calibration apply side by side. An anchor stored with a ``stack`` name
    serves the requests naming that stack (``cluster: {"id": ..., "stack": ...}``), one
    without serves those naming none: a cluster that runs two stacks keeps an anchor of
    each."""
    cluster = store.get_cluster(engine=engine, cluster_id=cluster_id)
    if cluster is None:
        raise not_found("cluster", cluster_id)
    if body.source == "sweep":
        if not settings.allow_local_sweeps:
            raise ApiProblem(403, "Forbidden", "this service does not run sweeps "
                             "(PLANNER_ALLOW_LOCAL_SWEEPS=false)", type_="/problems/forbidden")
        sweep = body.sweep or SweepSpec()
        job = store.create_job(engine=engine, kind="calibration-sweep",
                               request={"cluster_id": cluster_id,
                                        "sweep": sweep.model_dump(mode="json")})
        request.app.state.jobs.submit(job["id"])
        return Response(JobPublic.model_validate(job).model_dump_json(), status_code=202,
                        media_type="application/json",
                        headers={"Location": f"/v1/jobs/{job['id']}"})
    fitted = anchor(body, cluster["spec"]) if body.source == "anchor" else calibrate(body)
    row = store.save_calibration(engine=engine, cluster_id=cluster_id, body=fitted)
    response.headers["Location"] = f"/v1/calibrations/{row['id']}"
    return _public(row)


@router.get("/calibrations/{calibration_id}", response_model=CalibrationPublic,
            dependencies=READ, summary="Read a calibration", operation_id="calibrations-get")
def get_calibration(calibration_id: str, engine: EngineDep):
    """Fits with their quality, and every sample with the fitted model's prediction."""
    row = store.get_calibration(engine=engine, calibration_id=calibration_id)
    if row is None:
        raise not_found("calibration", calibration_id)
    return _public(row)


@router.get("/calibrations/{calibration_id}/plot", dependencies=READ,
            summary="Plot a calibration", operation_id="calibrations-plot",
            responses={200: {"content": {"image/svg+xml": {}}}})
def plot_calibration(calibration_id: str, engine: EngineDep) -> Response:
    """Measured points and fitted lines, log-log, one panel per fit (SVG)."""
    from planner.calibration.model import Calibration
    from planner.calibration.plot import svg

    row = store.get_calibration(engine=engine, calibration_id=calibration_id)
    if row is None:
        raise not_found("calibration", calibration_id)
    return Response(svg(Calibration.model_validate(row["body"])), media_type="image/svg+xml")


@router.get("/clusters/{cluster_id}/calibrations", response_model=Page[CalibrationPublic],
            dependencies=READ, summary="List a cluster's calibrations",
            operation_id="calibrations-list")
def list_calibrations(
    cluster_id: str, engine: EngineDep, limit: Limit = 50, offset: Offset = 0,
    source: Annotated[Source | None, Query(description="Only this kind.")] = None,
    stack: Annotated[str | None, Query(min_length=1, max_length=64,
                                       description="Only anchors of this stack.")] = None,
):
    """Newest first; the newest of collectives and the newest anchor of the stack a request
    names (``cluster.stack``) are the ones plans use. Filter by kind (``source``) and, for
    anchors, by ``stack``."""
    if store.get_cluster(engine=engine, cluster_id=cluster_id) is None:
        raise not_found("cluster", cluster_id)
    rows, count = store.list_calibrations(engine=engine, cluster_id=cluster_id, limit=limit,
                                          offset=offset, source=source, stack=stack)
    return {"data": [_public(r) for r in rows], "count": count}


@router.post("/anchors", response_model=AnchorFit, dependencies=WRITE,
             summary="Anchor the model on measured steps", operation_id="anchors-create")
def create_anchor(body: Annotated[AnchorRequest, Body(openapi_examples=ANCHOR_EXAMPLES)]):
    """Fit the speed of the model's kernels (``efficiency.compute_scale``) to step times
    measured on your own stack (framework, version, settings), each run an estimate request
    with its ``measured_step_time_s``: one run fixes it exactly, several in the least-squares
    sense on the logarithm of the step times. Where the runs' own kernel speeds differ by more
    than 15% (``network`` 'auto'; 'fit': always, 'spec': never), the network's speed across
    nodes (``efficiency.network_scale``) is fitted with it. The answer gives each run's
    prediction before and after, the kernel speed each run alone would give and notes; add its
    ``efficiency`` to plan and estimate requests. Nothing is stored."""
    return fit_anchor(body)
