"""Human-readable tables of planner results (the CLI's output layer)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.result import PlanEstimate
from planner.search.plan_result import PlanResult


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _fmt_s(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def _is_moe(est: PlanEstimate) -> bool:
    p = est.parameters
    return p is not None and p.active < p.total


def plan_summary(est: PlanEstimate) -> Table:
    t = Table(title="Plan", show_header=False)
    experts = f" ep={est.ep} etp={est.etp}" if _is_moe(est) else ""
    t.add_row("degrees", f"dp={est.dp} tp={est.tp} pp={est.pp} cp={est.cp} vpp={est.vpp}"
              f"{experts}  ({est.gpus_used} GPUs)")
    if est.parameters is not None:
        t.add_row("parameters", f"{est.parameters.total / 1e9:.1f}B total, "
                  f"{est.parameters.active / 1e9:.1f}B active")
    t.add_row("batch", f"micro_batch_size={est.micro_batch_size} "
              f"grad_accum_steps={est.grad_accum_steps}")
    t.add_row("memory knobs", f"recompute={est.recompute} zero_stage={est.zero_stage} "
              + (f"dp_replicate={est.dp_replicate} " if est.dp_replicate > 1 else "")
              + f"sequence_parallel={est.sequence_parallel}")
    t.add_row("layers per stage", ", ".join(map(str, est.layers_per_stage)))
    if est.stages:
        t.add_row("stages on pools", est.stage_runs())
    t.add_row("step time", _fmt_s(est.step_time_s))
    t.add_row("throughput", f"{est.tokens_per_s:,.0f} tokens/s, {est.tflops_per_gpu:.1f} "
              f"TFLOP/s per GPU, MFU {100 * est.mfu:.1f}%")
    fits = "fits" if est.fits_in_memory else "[bold red]DOES NOT FIT[/]"
    t.add_row("memory", f"{est.memory_per_gpu_gib:.1f} GiB of {est.memory_capacity_gib:.0f} "
              f"GiB per GPU ({fits})")
    return t


def breakdown_table(est: PlanEstimate) -> Table:
    t = Table(title="Where the step time goes")
    t.add_column("component")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for key, val in est.breakdown.items():
        if val > 0:
            t.add_row(key, f"{val:.4f}", f"{100 * val / est.step_time_s:.1f}%")
    t.add_row("[bold]step[/]", f"[bold]{est.step_time_s:.4f}[/]", "100%")
    return t


def memory_table(est: PlanEstimate) -> Table:
    m = est.memory
    t = Table(title=f"Memory of the most loaded GPU (pipeline stage {m.stage})")
    t.add_column("part")
    t.add_column("GiB", justify="right")
    for name, val in (("weights", m.weights_gib), ("gradients", m.gradients_gib),
                      ("optimizer states", m.optimizer_gib), ("activations", m.activations_gib),
                      ("ZeRO-3 buffers", m.zero_buffers_gib),
                      ("reserve, TP overlap buffers, fragmentation", m.reserved_gib)):
        t.add_row(name, f"{val:.2f}")
    t.add_row("[bold]total[/]", f"[bold]{m.total_gib:.2f}[/]")
    return t


def communication_table(est: PlanEstimate) -> Table:
    t = Table(title="Communication per step (one GPU)")
    for col in ("strategy", "op", "message", "calls", "group", "tier", "algorithm",
                "per call", "total", "exposed"):
        t.add_column(col, justify="left" if col in ("strategy", "op", "tier", "algorithm")
                     else "right")
    for c in est.communication:
        t.add_row(c.strategy, c.op, _fmt_bytes(c.message_bytes), f"{c.count_per_step:,.0f}",
                  str(c.group_size), c.tier, c.algorithm, _fmt_s(c.time_s),
                  _fmt_s(c.total_time_s), _fmt_s(c.exposed_time_s))
    return t


def print_caveats(console: Console, est: PlanEstimate) -> None:
    """The model's track record on the plan's class (``PlanEstimate.step_time_band``) and
    where published runs do not back the prediction (``PlanEstimate.caveats``)."""
    band = est.step_time_band
    if band is not None:
        kind = ("runs predicted from another run of their stack on their GPU"
                if band.model_class == "anchored"
                else band.model_class.replace("_", "-").replace("moe", "MoE") + " runs"
                + (f" on {band.gpu.upper()}" if band.gpu else ""))
        console.print(f"published runs: 8 in 10 of the {band.runs} held-out {kind} (from "
                      f"{band.sources} sources, each weighing the same) would have measured "
                      f"{_fmt_s(band.low_s)} to {_fmt_s(band.high_s)} given this prediction "
                      f"(median {_fmt_s(band.median_s)})"
                      + (f"; speeds from anchor {escape(band.anchor)}" if band.anchor else ""),
                      highlight=False)
    for note in est.caveats:
        console.print(f"[yellow]caveat:[/] {escape(note)}", highlight=False)


def print_estimate(console: Console, est: PlanEstimate) -> None:
    console.print(plan_summary(est))
    console.print(breakdown_table(est))
    console.print(memory_table(est))
    if est.communication:
        console.print(communication_table(est))
    print_caveats(console, est)


def plans_table(result: PlanResult) -> Table:
    s = result.search
    t = Table(title=f"Best plans ({s.status}, {s.space_size:,} plans in the space, "
                    f"{s.memory_feasible:,} fit, {s.solve_ms:.0f} ms)")
    moe = any(_is_moe(p) for p in result.plans)
    experts = ("ep", "etp") if moe else ()
    for col in ("#", "dp", "tp", "pp", "cp", *experts, "vpp", "mbs", "accum", "recompute",
                "zero", "sp", "step", "TFLOP/s/GPU", "MFU", "memory GiB"):
        t.add_column(col, justify="left" if col == "recompute" else "right")
    for p in result.plans:
        degrees = (str(p.ep), str(p.etp)) if moe else ()
        t.add_row(str(p.rank), str(p.dp), str(p.tp), str(p.pp), str(p.cp), *degrees,
                  str(p.vpp),
                  str(p.micro_batch_size), str(p.grad_accum_steps),
                  p.recompute + (f" {p.recompute_num_layers}/chunk" if p.recompute_num_layers
                                 else ""),
                  str(p.zero_stage) + (f"/r{p.dp_replicate}" if p.dp_replicate > 1 else ""),
                  "yes" if p.sequence_parallel else "no", _fmt_s(p.step_time_s),
                  f"{p.tflops_per_gpu:.1f}", f"{100 * p.mfu:.1f}%",
                  f"{p.memory_per_gpu_gib:.1f}/{p.memory_capacity_gib:g}")
    return t


def print_plan_result(console: Console, result: PlanResult) -> None:
    if not result.plans:
        console.print(f"[bold red]No plan fits[/] ({result.search.space_size:,} plans "
                      "considered):")
        for reason in result.infeasible_reasons:
            console.print(f"  - {escape(reason)}", highlight=False)
        return
    console.print(plans_table(result))
    best = result.plans[0]
    console.print(f"Best plan, layers per stage: {', '.join(map(str, best.layers_per_stage))}")
    if best.stages:
        console.print(escape(f"Stages on pools: {best.stage_runs()}"))
    console.print(breakdown_table(best))
    console.print(memory_table(best))
    print_caveats(console, best)
    for hint in result.settings_hints:
        changes = ", ".join(f"{k} {json.dumps(v)}" for k, v in hint.changes.items())
        q = hint.plan
        degrees = " ".join(f"{k}{q[k]}" for k in ("dp", "tp", "pp", "cp", "ep", "etp", "vpp"))
        console.print(escape(
            f"settings: with training {changes}, the best plan ({degrees}, micro-batch "
            f"{q['micro_batch_size']}, recompute {q['recompute']}, ZeRO-{q['zero_stage']}) "
            f"takes {_fmt_s(hint.step_time_s)} ({hint.faster_pct:.0f}% faster): "
            f"{hint.reason}"), highlight=False)


def validation_table(result) -> Table:
    t = Table(title=f"Validation ({result.mode}, {result.backend}, compute {result.compute}); "
                    "measured order "
                    f"{[i + 1 for i in result.reranked]}, Kendall tau "
                    f"{'-' if result.kendall_tau is None else f'{result.kendall_tau:.2f}'}")
    for col in ("#", "dp", "tp", "pp", "cp", "vpp", "mbs", "zero", "predicted step",
                "measured step", "step err", "comm err", "flag", "note"):
        t.add_column(col, justify="left" if col == "note" else "right")
    for i, p in enumerate(result.plans):
        pl = p.plan
        pred = p.predicted.get("step_time_s")
        meas = p.measured["step_time_s"] if p.measured else None
        t.add_row(str(i + 1), *(str(pl[k]) for k in ("dp", "tp", "pp", "cp", "vpp",
                                                      "micro_batch_size", "zero_stage")),
                  _fmt_s(pred) if pred else "-",
                  _fmt_s(meas) if meas else "-",
                  f"{100 * p.rel_err['step_time_s']:+.0f}%" if "step_time_s" in p.rel_err else "-",
                  f"{100 * p.rel_err['communication']:+.0f}%" if "communication" in p.rel_err
                  else "-", "!" if p.flagged else "", p.note or "")
    return t
