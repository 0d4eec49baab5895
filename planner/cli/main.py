"""``planner``: estimate a plan's cost, list presets (and, as they land, plan, calibrate...).

Results go to stdout (tables for people, ``--json`` for machines); errors go to stderr with a
non-zero exit status and name the offending field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from planner.cli.errors import fail as _fail
from planner.cost import estimate
from planner.errors import PlannerInputError
from planner.launch import with_launch
from planner.request import EstimateRequest, parse_request
from planner.specs import ClusterSpec, GPUSpec, ModelSpec
from planner.vocabulary import ValidationModeChoice

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Parallelism planner for large-model training.")



def _add_subcommands() -> None:
    from planner.cli.calibrate import app as calibrate_app

    app.add_typer(calibrate_app, name="calibrate")


_add_subcommands()




def load_json(path: Path) -> Any:
    """Read a JSON request from ``path`` (``-`` for stdin) or exit with a clear message."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror or exc}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")


def stdout_console() -> Console:
    """Tables for stdout; wide enough for the communication table when piped to a file."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


@app.command("estimate")
def estimate_cmd(
    request: Annotated[Path, typer.Argument(help="JSON request with model, cluster, training "
                                                 "and plan; '-' reads stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the contract JSON.")] = False,
    emit: Annotated[str | None, typer.Option(
        help="Print one launch artifact instead: megatron, torchtitan, deepspeed, torchrun, "
             "sbatch or kubernetes.")] = None,
    trace: Annotated[Path | None, typer.Option(
        help="Also write the predicted step as a Chrome trace (open in Perfetto).")] = None,
) -> None:
    """Predict one plan's step time, memory and communication."""
    data = load_json(request)
    try:
        req = parse_request(EstimateRequest, data)
        est = with_launch(estimate(req.model, req.cluster, req.training, req.plan,
                                   req.efficiency, calibration=req.calibration),
                          req.model, req.cluster, req.training, req.efficiency)
    except PlannerInputError as exc:
        _fail(f"{exc.field}: {exc.reason}")
    if trace is not None:
        write_trace(trace, est, req)
    if emit is not None:
        emit_artifact(est.launch, emit)
    elif as_json:
        emit_json(est.model_dump(mode="json"))
    else:
        from planner.cli.render import print_estimate

        print_estimate(stdout_console(), est)


@app.command("plan")
def plan_cmd(
    request: Annotated[Path, typer.Argument(help="JSON request with model, cluster, training "
                                                 "and optional search; '-' reads stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the contract JSON.")] = False,
    top_k: Annotated[int | None, typer.Option("--top-k", min=1, max=100,
                                              help="Override search.top_k.")] = None,
    emit: Annotated[str | None, typer.Option(
        help="Print one launch artifact of the best plan instead: megatron, torchtitan, "
             "deepspeed, torchrun, sbatch or kubernetes.")] = None,
    trace: Annotated[Path | None, typer.Option(
        help="Also write the best plan's predicted step as a Chrome trace.")] = None,
) -> None:
    """Find the best plans (exact search over the whole plan space) or say why nothing fits."""
    from planner.search import PlanRequest, answer

    data = load_json(request)
    if top_k is not None and isinstance(data, dict):
        data = {**data, "search": {**(data.get("search") or {}), "top_k": top_k}}
    try:
        req = parse_request(PlanRequest, data)
        result = answer(req)
    except PlannerInputError as exc:
        _fail(f"{exc.field}: {exc.reason}")
    if result.search.status == "INFEASIBLE" and emit is None and not as_json:
        from planner.cli.render import print_plan_result

        print_plan_result(stdout_console(), result)
        raise typer.Exit(1)
    if trace is not None and result.plans:
        write_trace(trace, result.plans[0], req)
    if emit is not None:
        if not result.plans:
            _fail("no plan fits, so there is nothing to launch: " +
                  "; ".join(result.infeasible_reasons))
        emit_artifact(result.plans[0].launch, emit)
    elif as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        from planner.cli.render import print_plan_result

        print_plan_result(stdout_console(), result)
    if result.search.status == "INFEASIBLE":
        raise typer.Exit(1)


def write_trace(path: Path, est, req) -> None:
    from planner.validation.predicted_trace import predicted_trace

    try:
        doc = predicted_trace(est, req.model, req.cluster, req.training, req.efficiency)
    except PlannerInputError as exc:
        _fail(f"--trace: {exc}")
    try:
        path.write_text(json.dumps(doc))
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


def emit_artifact(launch, fmt: str) -> None:
    from planner.launch import FORMATS, render

    if fmt not in FORMATS:
        _fail(f"--emit: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        sys.stdout.write(render(launch, fmt))
    except ValueError as exc:
        _fail(f"--emit {fmt}: {exc}")


@app.command("validate")
def validate_cmd(
    request: Annotated[Path, typer.Argument(help="A plan request; '-' reads stdin.")],
    nproc: Annotated[int, typer.Option(min=2, max=64, help="Local ranks (gloo on CPU).")] = 4,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=20)] = 3,
    steps: Annotated[int, typer.Option(min=1, max=50, help="Measured steps per plan.")] = 2,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds per probe job.")] = 300,
    mode: Annotated[str, typer.Option(help="full: all of a plan's ranks; sampled: one group "
                                      "per strategy; auto: full when the plan fits.")] = "auto",
    compute: Annotated[str, typer.Option(help="gemm: run the GEMMs; emulate: sleep for their "
                                         "benchmarked time; auto: emulate when ranks "
                                         "outnumber cores.")] = "auto",
    trace_dir: Annotated[Path | None, typer.Option(help="Write measured Chrome traces here.")] =
        None,
    calibration_out: Annotated[Path | None, typer.Option(
        help="Write the measured collectives and matmul rate as a calibration JSON.")] = None,
    launcher: Annotated[str, typer.Option(help="local (run here), slurm or kubernetes (write "
                                          "the jobs to --job-dir; read them back with "
                                          "validate-import).")] = "local",
    job_dir: Annotated[Path | None, typer.Option(help="Cluster launchers: the job folder.")] =
        None,
    gpus_per_node: Annotated[int | None, typer.Option(
        min=1, max=1024, help="Cluster launchers: GPUs per host. Default: the request "
        "cluster's (gpus_per_host where set, 4 on an NVL72 rack; else gpus_per_node).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result JSON.")] = False,
) -> None:
    """Run the top plans as short torch.distributed probe jobs, compare, re-rank."""
    from rich.progress import Progress

    from planner.probe.local import ProbeError
    from planner.probe.validate import validate
    from planner.search import PlanRequest
    from planner.vocabulary import PROBE_COMPUTE, VALIDATION_MODES

    if mode not in VALIDATION_MODES:
        _fail(f"--mode: {mode!r} is not one of {', '.join(VALIDATION_MODES)}")
    if compute not in PROBE_COMPUTE:
        _fail(f"--compute: {compute!r} is not one of {', '.join(PROBE_COMPUTE)}")
    data = load_json(request)
    try:
        req = parse_request(PlanRequest, data)
    except PlannerInputError as exc:
        _fail(f"{exc.field}: {exc.reason}")
    if launcher != "local":
        write_cluster_validation(launcher, req, job_dir, nproc=nproc, top_k=top_k, mode=mode,
                                 steps=steps, gpus_per_node=gpus_per_node or req.cluster.host_gpus)
        return
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
    err = Console(stderr=True)
    with Progress(console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task("validating", total=top_k)
        try:
            result = validate(req, nproc=nproc, top_k=top_k, steps=steps, timeout_s=timeout,
                              trace_dir=trace_dir, mode=mode, compute=compute,
                              on_progress=lambda d, t: bar.update(task, completed=d, total=t))
        except (ProbeError, PlannerInputError) as exc:
            _fail(str(exc))
    report_validation(result, as_json, calibration_out)


def write_cluster_validation(launcher: str, req, job_dir: Path | None, *, nproc: int,
                             top_k: int, mode: str, steps: int, gpus_per_node: int) -> None:
    from planner.probe.remote import submit
    from planner.probe.validation_jobs import write_validation_job
    from planner.validation.evaluate import prepare

    if job_dir is None:
        _fail(f"--launcher {launcher}: give --job-dir, a folder on the cluster's shared file "
              "system")
    try:
        probes = prepare(req, nproc=nproc, top_k=top_k, mode=cast(ValidationModeChoice, mode))
        artifacts = write_validation_job(launcher, req, probes, job_dir, steps=steps,
                                         gpus_per_node=gpus_per_node)
    except (ValueError, OSError) as exc:
        _fail(f"--launcher {launcher}: {exc}")
    for path in artifacts:
        try:
            print(f"{path}: {submit(launcher, path)}")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            _fail(f"submitting {path}: {exc}")
    print(f"when the jobs are done: planner validate-import {job_dir}")


def report_validation(result, as_json: bool, calibration_out: Path | None) -> None:
    if calibration_out is not None:
        from planner.validation.evaluate import as_calibration

        try:
            cal = as_calibration(result)
            calibration_out.write_text(json.dumps(cal.model_dump(mode="json"), indent=1))
        except ValueError as exc:
            _fail(f"--calibration-out: {exc}")
        except OSError as exc:
            _fail(f"cannot write {calibration_out}: {exc.strerror or exc}")
    if as_json:
        emit_json(result.model_dump(mode="json"))
        return
    from planner.cli.render import validation_table

    stdout_console().print(validation_table(result))


@app.command("validate-import")
def validate_import_cmd(
    job_dir: Annotated[Path, typer.Argument(help="The job folder validate --launcher wrote.")],
    calibration_out: Annotated[Path | None, typer.Option(
        help="Write the measured collectives and matmul rate as a calibration JSON.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result JSON.")] = False,
) -> None:
    """Compare what a cluster validation's probe jobs measured with the prediction."""
    from pydantic import ValidationError

    from planner.probe.validation_jobs import MANIFEST, import_validation

    if not (job_dir / MANIFEST).is_file():
        _fail(f"{job_dir}: no {MANIFEST} here (write one with validate --launcher)")
    try:
        result = import_validation(job_dir)
    except (ValueError, KeyError, TypeError, ValidationError, OSError) as exc:
        _fail(f"{job_dir}: unreadable validation job or result: "
              f"{str(exc).splitlines()[0][:300]}")
    report_validation(result, as_json, calibration_out)


@app.command("frameworks")
def frameworks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Which framework runs which plan: each capability's support and flag per framework."""
    from planner.frameworks import CAPABILITIES, FRAMEWORKS, capability_matrix, refusal_rules
    if as_json:
        emit_json({"capabilities": capability_matrix(), "rules": refusal_rules()})
        return
    console = stdout_console()
    t = Table(title="Capabilities (yes / partial / no, with the framework's flag or key)")
    t.add_column("capability")
    for fw in FRAMEWORKS:
        t.add_column(fw)
    for cap, row in CAPABILITIES.items():
        t.add_row(cap, *[f"{row[fw].status}: {row[fw].how}" if row[fw].how else row[fw].status
                         for fw in FRAMEWORKS])
    console.print(t)
    t = Table(title="A plan is not listed for a framework when it needs")
    t.add_column("framework")
    t.add_column("capability")
    t.add_column("what the plan needs")
    for r in refusal_rules():
        t.add_row(r["framework"], r["capability"], r["lacks"])
    console.print(t)


@app.command("presets")
def presets_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the model, GPU and cluster presets."""
    data = {
        "models": {n: ModelSpec.from_preset(n).model_dump() for n in ModelSpec.preset_names()},
        "gpus": {n: GPUSpec.from_preset(n).model_dump() for n in GPUSpec.preset_names()},
        "clusters": {n: ClusterSpec.from_preset(n).model_dump()
                     for n in ClusterSpec.preset_names()},
    }
    if as_json:
        emit_json(data)
        return
    console = stdout_console()
    t = Table(title="Models")
    for col in ("preset", "params", "layers", "hidden", "heads", "kv heads", "ffn", "vocab"):
        t.add_column(col)
    for n in ModelSpec.preset_names():
        m = ModelSpec.from_preset(n)
        t.add_row(n, f"{m.num_params / 1e9:.1f}B", str(m.num_layers), str(m.hidden_size),
                  str(m.num_attention_heads), str(m.kv_heads), f"{m.ffn} {m.ffn_type}",
                  str(m.vocab_size))
    console.print(t)
    t = Table(title="GPUs")
    for col in ("preset", "memory GiB", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp4 TFLOP/s", "MXFP8",
                "HBM GB/s"):
        t.add_column(col)
    for n in GPUSpec.preset_names():
        g = GPUSpec.from_preset(n)
        t.add_row(n, f"{g.memory_gib:g}", f"{g.peak_tflops.bf16 or '-'}",
                  f"{g.peak_tflops.fp8 or '-'}", f"{g.peak_tflops.fp4 or '-'}",
                  "yes" if g.mxfp8_matmul_efficiency else "-", f"{g.memory_bandwidth_gb_per_s:g}")
    console.print(t)
    t = Table(title="Clusters")
    for col in ("preset", "GPU", "GPUs/node", "intra-node", "inter-node (per node)"):
        t.add_column(col)
    for n in ClusterSpec.preset_names():
        c = ClusterSpec.from_preset(n)
        t.add_row(n, c.gpu.name, str(c.gpus_per_node),
                  f"{c.intra_node.kind} {c.intra_node.bandwidth_gb_per_s:g} GB/s",
                  f"{c.inter_node.kind} {c.inter_node.bandwidth_gb_per_s:g} GB/s")
    console.print(t)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
