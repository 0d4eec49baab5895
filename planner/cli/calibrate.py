"""``planner calibrate``: sweeps, nccl-tests logs and profiler traces to alpha-beta fits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.calibration.model import Calibration
from planner.cli.errors import fail as _fail

app = typer.Typer(no_args_is_help=True, help="Fit alpha-beta collective costs to measurements.")




def fits_table(cal: Calibration) -> Table:
    t = Table(title=f"Fits ({cal.source}, {cal.backend})")
    for col in ("op", "tier", "ranks", "latency us", "GB/s", "bus GB/s", "R^2", "median err",
                "max err", "LOO max", "samples", "quality", "lines"):
        t.add_column(col, justify="left" if col in ("op", "tier", "quality") else "right")
    for f in cal.fits:
        t.add_row(f.op, f.tier, str(f.group_size), f"{f.latency_us:.2f}",
                  f"{f.bandwidth_gb_per_s:.3g}", f"{f.bus_bandwidth_gb_per_s:.3g}",
                  f"{f.r2:.3f}", f"{100 * f.median_rel_err:.1f}%", f"{100 * f.max_rel_err:.1f}%",
                  f"{100 * f.loo_max_rel_err:.1f}%", str(f.samples),
                  f.quality if f.quality == "good" else "[red]poor[/]",
                  str(max(1, len(f.segments))))
    return t


def json_or_console(result: BaseModel, as_json: bool) -> Console | None:
    """With ``as_json``, the result's JSON on stdout and None; else a console for its tables
    (wide enough for them when piped to a file)."""
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return None
    return Console() if Console().is_terminal else Console(width=160)


def output(cal: Calibration, as_json: bool, plot: Path | None) -> None:
    if plot is not None:
        from planner.calibration.plot import svg

        try:
            plot.write_text(svg(cal))
        except OSError as exc:
            _fail(f"cannot write {plot}: {exc.strerror or exc}")
    console = json_or_console(cal, as_json)
    if console is None:
        return
    console.print(fits_table(cal))
    for u in cal.unsupported:
        console.print(f"unsupported: {escape(u)}", highlight=False)
    for n in cal.notes:
        console.print(f"note: {escape(n)}", highlight=False)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the calibration JSON.")]
PlotOpt = Annotated[Path | None, typer.Option(help="Write a log-log SVG of points and fits.")]


@app.command("run")
def run_cmd(
    nproc: Annotated[int, typer.Option(min=2, max=64, help="Ranks on this machine.")] = 4,
    backend: Annotated[str, typer.Option(help="gloo (CPU) or nccl (GPUs).")] = "gloo",
    sizes: Annotated[str, typer.Option(help="Message sizes in bytes, comma-separated.")] =
        "4096,16384,65536,262144,1048576,4194304",
    ops: Annotated[str | None, typer.Option(help="Collectives, comma-separated.")] = None,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds before the job is killed.")] = 600,
    repeats: Annotated[int, typer.Option(min=1, max=1000, help="Batches per size per pass.")] = 3,
    budget_s: Annotated[float, typer.Option(
        "--budget-s", min=0, max=3600, help="Seconds in all for more passes over the sizes, "
        "until every median's 95% interval is within 5% (0: one pass).")] = 60,
    min_batch_ms: Annotated[float, typer.Option(
        min=0.1, max=10_000, help="Each timed batch repeats the call this long.")] = 20,
    launcher: Annotated[str, typer.Option(help="local (torchrun here), slurm or kubernetes "
                                               "(write the job, submit it when the tool "
                                               "exists).")] = "local",
    nodes: Annotated[int, typer.Option(min=1, max=100_000, help="Nodes (slurm, kubernetes).")] = 1,
    out_dir: Annotated[Path, typer.Option(help="Where slurm/kubernetes jobs are written.")] =
        Path("planner-sweep"),
    result_path: Annotated[str, typer.Option(help="Where the cluster job writes its result "
                                                  "(shared file system).")] =
        "planner-sweep/result.json",
    submit: Annotated[bool, typer.Option(help="Submit the slurm/kubernetes job.")] = True,
    as_json: JsonOpt = False, plot: PlotOpt = None,
) -> None:
    """Time every collective with torch.distributed (torchrun), then fit; on a cluster, write
    (and submit) the sweep job instead, to import its result with import-sweep."""
    from rich.progress import Progress

    from planner.probe.local import ProbeError
    from planner.probe.sweep import run_sweep, sweep_args

    if backend not in ("gloo", "nccl"):
        _fail(f"--backend must be gloo or nccl, not {backend!r}")
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        _fail(f"--sizes must be integers separated by commas, got {sizes!r}")
    if not size_list or min(size_list) < 4 or max(size_list) > 2**34:
        _fail("--sizes must lie between 4 bytes and 16 GiB")
    op_list = [o.strip() for o in ops.split(",")] if ops else None
    from planner.probe.sweep_worker import OPS

    if op_list and (bad := [o for o in op_list if o not in OPS]):
        _fail(f"--ops: unknown collective(s) {', '.join(bad)}; choose from {', '.join(OPS)}")
    if launcher != "local":
        from planner.launch.context import LaunchShape
        from planner.probe.remote import LAUNCHERS, write_sweep_job
        from planner.probe.remote import submit as submit_job

        if launcher not in LAUNCHERS:
            _fail(f"--launcher must be local, slurm or kubernetes, not {launcher!r}")
        shape = LaunchShape(nnodes=nodes, nproc_per_node=nproc, job_name="planner-sweep",
                            time_limit="00:30:00",
                            comment=f"planner calibration sweep: {nodes} x {nproc} ranks, "
                                    f"{backend}")
        path = write_sweep_job(launcher, shape, sweep_args(
            backend=backend, sizes=size_list, ops=op_list, repeats=repeats, budget_s=budget_s,
            min_batch_ms=min_batch_ms), result_path, out_dir)
        print(f"wrote {path}")
        if submit:
            try:
                print(submit_job(launcher, path))
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                _fail(str(exc))
        print(f"then: planner calibrate import-sweep {result_path}")
        return
    err = Console(stderr=True)
    with Progress(console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task("sweep", total=None)
        try:
            cal = run_sweep(nproc, backend=backend, sizes=size_list, ops=op_list,
                            repeats=repeats, budget_s=budget_s, min_batch_ms=min_batch_ms,
                            timeout_s=timeout,
                            on_progress=lambda d, t: bar.update(task, completed=d, total=t))
        except ProbeError as exc:
            _fail(str(exc))
    output(cal, as_json, plot)


@app.command("import-nccl-tests")
def import_nccl_cmd(
    logs: Annotated[list[Path], typer.Argument(help="nccl-tests output files.")],
    op: Annotated[str | None, typer.Option(help="Collective, when a log does not name it.")] = None,
    ranks: Annotated[int | None, typer.Option(
        min=1, help="Ranks the test ran on, for a log without its '#  Rank' lines.")] = None,
    nodes: Annotated[int | None, typer.Option(
        min=1, help="Nodes those ranks spanned (more than one: the inter-node tier).")] = None,
    as_json: JsonOpt = False, plot: PlotOpt = None,
) -> None:
    """Fit the rows of nccl-tests logs (all_reduce_perf, all_gather_perf, ...)."""
    from planner.calibration.fit import fit_samples
    from planner.calibration.nccl_tests import NcclTestsFormatError, parse

    samples, notes = [], []
    for path in logs:
        try:
            log = parse(path.read_text(errors="replace"), op=op, ranks=ranks, nodes=nodes)
        except OSError as exc:
            _fail(f"cannot read {path}: {exc.strerror or exc}")
        except NcclTestsFormatError as exc:
            _fail(f"{path}: {exc}")
        samples += log.samples()
        notes += [f"{path.name}: {n}" for n in log.notes]
    fits, fitted, more = fit_samples(samples)
    output(Calibration(source="nccl-tests", backend="nccl", fits=fits, samples=fitted,
                       notes=notes + more), as_json, plot)


@app.command("import-trace")
def import_trace_cmd(
    trace: Annotated[Path, typer.Argument(help="Chrome trace JSON exported by torch.profiler.")],
    as_json: JsonOpt = False, plot: PlotOpt = None,
) -> None:
    """Read a torch.profiler trace: compute, collectives, overlap; fit the collectives."""
    from planner.calibration.trace import TraceFormatError, calibration_from_trace, read_trace

    try:
        summary = read_trace(trace.read_bytes())
    except OSError as exc:
        _fail(f"cannot read {trace}: {exc.strerror or exc}")
    except TraceFormatError as exc:
        _fail(f"{trace}: {exc}")
    cal = calibration_from_trace(summary)
    if not as_json:
        Console(stderr=True).print(
            f"compute {summary.compute_us / 1e3:.2f} ms, communication "
            f"{summary.comm_us / 1e3:.2f} ms ({100 * summary.overlap_fraction:.0f}% of it "
            f"under compute); by collective: "
            + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in summary.comm_by_op_us.items()),
            highlight=False)
    output(cal, as_json, plot)


@app.command("import-sweep")
def import_sweep_cmd(
    result: Annotated[Path, typer.Argument(help="The JSON a cluster sweep job wrote.")],
    as_json: JsonOpt = False, plot: PlotOpt = None,
) -> None:
    """Fit the result of a sweep that ran as a Slurm or Kubernetes job."""
    import json

    from pydantic import ValidationError

    from planner.probe.sweep import calibration_from_sweep

    try:
        raw = json.loads(result.read_text())
        cal = calibration_from_sweep(raw)
    except OSError as exc:
        _fail(f"cannot read {result}: {exc.strerror or exc}")
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        _fail(f"{result} is not a sweep result: {exc}")
    output(cal, as_json, plot)


@app.command("anchor")
def anchor_cmd(
    runs: Annotated[Path, typer.Argument(help="JSON {\"runs\": [...]}: estimate requests "
                                              "(model, cluster, training, plan) each with its "
                                              "measured_step_time_s; '-' reads stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit's JSON.")] = False,
    network: Annotated[str | None, typer.Option(
        help="auto (the default): fit the network's speed too where the runs' own kernel "
             "speeds differ by more than 15%; fit: always (two runs or more); spec: never. "
             "Overrides the file's \"network\".")] = None,
) -> None:
    """Fit the model's kernel speed (efficiency.compute_scale), and where the runs call for it
    the network's (efficiency.network_scale), to measured steps of your stack."""
    from planner.calibration.anchor import AnchorRequest, fit_anchor
    from planner.cli.main import load_json
    from planner.errors import PlannerInputError
    from planner.request import parse_request

    data = load_json(runs)
    if network is not None:
        if network not in ("auto", "fit", "spec"):
            _fail(f"--network: {network!r} is not one of auto, fit, spec")
        if isinstance(data, dict):
            data = {**data, "network": network}
    try:
        fit = fit_anchor(parse_request(AnchorRequest, data))
    except PlannerInputError as exc:
        _fail(f"{exc.field}: {exc.reason}")
    console = json_or_console(fit, as_json)
    if console is None:
        return
    title = f"Anchored: efficiency.compute_scale {fit.compute_scale:g}"
    if fit.network_fitted:
        title += f", network_scale {fit.network_scale:g}"
    t = Table(title=title)
    for col in ("run", "measured s", "model s", "error", "anchored s", "error", "own scale"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for r in fit.runs:
        t.add_row(escape(r.name), f"{r.measured_step_time_s:.4g}",
                  f"{r.predicted_step_time_s:.4g}", f"{r.error_pct:+.1f}%",
                  f"{r.anchored_step_time_s:.4g}", f"{r.anchored_error_pct:+.1f}%",
                  f"{r.scale_alone:.3f}")
    console.print(t)
    for n in fit.notes:
        console.print(f"note: {escape(n)}", highlight=False)
    pairs = ", ".join(f'"{k}": {v:g}' for k, v in fit.efficiency.items())
    console.print(f'add to requests: "efficiency": {{{pairs}}}', highlight=False)


def _preset_or_file(arg: str) -> dict:
    """A preset name as ``{"preset": name}``, or a JSON file's object."""
    from planner.cli.main import load_json

    return load_json(Path(arg)) if arg.endswith(".json") else {"preset": arg}


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror or exc}")


def _logged_runs(kind: type, items: list[tuple[dict, dict[str, Path]]], cluster: dict) -> None:
    """Read each ``kind`` run (its fields; the files its text fields came from, which name
    the errors) and print the runs JSON `planner calibrate anchor` fits, the notes on stderr."""
    from planner.cli.main import emit_json
    from planner.errors import PlannerInputError
    from planner.request import parse_request

    runs = []
    for i, (fields, files) in enumerate(items):
        try:
            run, notes = parse_request(kind, {**fields, "cluster": cluster}).anchor_run(i)
        except PlannerInputError as exc:
            field = exc.field
            for key, path in files.items():
                field = field.replace(f"runs.{i}.{key}", str(path))
            _fail(f"{field}: {exc.reason}")
        for note in notes:
            print(f"note: {run.name}: {note}", file=sys.stderr)
        out = run.model_dump(mode="json", exclude_defaults=True)
        if "preset" in cluster:          # the preset as given, with the log's node count
            out["cluster"] = {**cluster, "num_nodes": run.cluster.num_nodes}
        runs.append(out)
    emit_json({"runs": runs})


@app.command("megatron-run")
def megatron_run_cmd(
    logs: Annotated[list[Path], typer.Argument(help="Megatron-LM training logs (rank 0's "
                                                    "output), one run each.")],
    cluster: Annotated[str, typer.Option(help="Where they ran: a cluster preset name "
                                              "(planner presets) or a cluster JSON file; the "
                                              "node count comes from each log.")],
    skip: Annotated[int, typer.Option(min=0, help="Logged intervals left out at the start "
                                                  "(warm-up).")] = 1,
) -> None:
    """Read measured runs from Megatron-LM training logs (the arguments it prints at start-up
    and its 'elapsed time per iteration' lines) and print them as the runs JSON that
    `planner calibrate anchor` fits: check them, then pipe them on
    (`... | planner calibrate anchor -`). What a log cannot say goes to stderr."""
    from planner.calibration.anchor import MegatronLogRun
    from planner.calibration.megatron_log import essential

    _logged_runs(MegatronLogRun, [
        ({"name": path.name, "megatron_log": essential(_read_text(path)), "skip": skip},
         {"megatron_log": path}) for path in logs], _preset_or_file(cluster))


@app.command("torchtitan-run")
def torchtitan_run_cmd(
    config: Annotated[Path, typer.Argument(help="The torchtitan job config (TOML) of the run.")],
    log: Annotated[Path, typer.Argument(help="Rank 0's log of the run.")],
    cluster: Annotated[str, typer.Option(help="Where it ran: a cluster preset name or a cluster "
                                              "JSON file; the node count comes from the log.")],
    model: Annotated[str | None, typer.Option(help="The model: a preset name or a model JSON "
                                                   "file (default: the config's Llama 3 or "
                                                   "Qwen3 MoE flavor).")] = None,
    skip: Annotated[int, typer.Option(min=0, help="Logged intervals left out at the start "
                                                  "(compilation, warm-up).")] = 1,
) -> None:
    """Read a measured run from a torchtitan job config and its log (the device mesh it
    printed, each interval's tokens per second) and print it as the runs JSON that
    `planner calibrate anchor` fits (`... | planner calibrate anchor -`)."""
    from planner.calibration.anchor import TorchtitanRun
    from planner.calibration.torchtitan_run import essential

    fields = {"name": log.name, "torchtitan_config": _read_text(config),
              "torchtitan_log": essential(_read_text(log)), "skip": skip,
              "model": None if model is None else _preset_or_file(model)}
    _logged_runs(TorchtitanRun, [(fields, {"torchtitan_config": config,
                                           "torchtitan_log": log})], _preset_or_file(cluster))
