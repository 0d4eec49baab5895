"""Predicted vs published step time of real training runs (``data/published_runs.json``).

Every run is estimated with the settings its source published (model shape, GPUs and their
links, batch and sequence, degrees, precision, recompute, schedule, software of the time); what a
source left out is listed under the run's ``assumed``, and knobs it did not publish (a
micro-batch size, a recompute mode, an interleaving degree) are in ``tune``: the benchmark takes
the fastest combination that fits in memory, as the team tuning that run would have. Each run is
marked ``fit`` (the few constants of the step model that are not micro-benchmark figures were
chosen with these rows: ``benchmarks/fit_constants.py``) or ``held_out`` (never looked at when
choosing them). Errors are on throughput: predicted / measured - 1, so +10% means the model is
10% too optimistic. Kendall's tau compares the predicted and measured order within each sweep
(runs of one source that vary a few knobs at fixed everything else).

    python benchmarks/published_accuracy.py [--json results.json] [--split held_out]
        [--data runs.json] [--what-if 'SOURCE={"cluster": {...}}'] [--as-tables]

``--data`` replays another file: a corpus like ``data/published_runs.json`` or a published
table as a paper prints it (``{"source", "hardware", "conventions", "rows": [...]}``; see
``published_tables.py`` for how its rows become runs). ``--what-if`` (repeatable) replays the
runs of one source with a JSON object merged into each of them, key by key: how much an
assumption the source does not settle (a NIC count, say) moves its figures; the corpus is
not changed. A patch that leaves runs unreplayable which replay without it is refused (exit 2)
rather than reported over fewer runs. ``--as-tables`` restates each run as the table row its
source prints (``as_table``) and replays it by the table rules alone: what a table, which
carries no software settings, loses against the hand-encoded run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import statistics
import sys
from pathlib import Path

from planner.cost import EfficiencyModel, estimate
from planner.cost.caveats import gpu_family
from planner.specs import (
    ClusterSpec,
    GPUSpec,
    ModelSpec,
    ParallelPlan,
    TrainingSpec,
    plan_violations,
)
from planner.validation.compare import kendall_tau

sys.path.insert(0, str(Path(__file__).resolve().parent))
import published_tables  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published_runs.json"


def load_runs(path: Path = DATA) -> list[dict]:
    return json.loads(path.read_text())["runs"]


def load_data(path: Path, infer: bool = True) -> tuple[list[dict], list[dict]]:
    """(runs, {"id", "reason"} of entries that cannot become one) of a corpus file
    (``{"runs": [...]}``, this directory's format), of a published table
    (``{"source", "hardware", "conventions", "rows": [...]}``: ``published_tables``) or of
    several (a list of tables, or ``{"tables": [...]}``). The runs of a corpus file that does
    not say ``"settings": "stated"`` (this corpus's mark: each run states every training
    setting that differs from the planner's defaults) get the ones they leave out from the
    table rules (``with_inferred_settings``) unless ``infer`` is false.
    Raises ValueError (with the file's name and what is wrong) for anything else."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read a JSON document: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
        runs = [labelled(r, i, path.stem) for i, r in enumerate(doc["runs"])
                if isinstance(r, dict)]
        if infer and doc.get("settings") != "stated":
            runs = [with_inferred_settings(r) for r in runs]
        return runs, [{"id": f"runs[{i}]", "reason": "a run must be an object"}
                      for i, r in enumerate(doc["runs"]) if not isinstance(r, dict)]
    if isinstance(doc, dict) and "rows" in doc:
        try:
            return published_tables.load_table(doc, path.stem, load_runs())
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    # Several tables in one file: a list of them, or an object holding them under "tables".
    tables = doc.get("tables") if isinstance(doc, dict) else doc
    if isinstance(tables, list) and tables and all(
            isinstance(t, dict) and "rows" in t for t in tables):
        corpus = load_runs()
        runs, skipped = [], []
        for i, table in enumerate(tables):
            try:
                got, bad = published_tables.load_table(table, f"{path.stem}-{i}", corpus)
            except ValueError as exc:
                raise ValueError(f"{path}: tables[{i}]: {exc}") from None
            runs += got
            skipped += bad
        return runs, skipped
    raise ValueError(f"{path}: expected an object with 'runs' (a corpus) or 'rows' (a "
                     "published table), or a list of tables")


def labelled(run: dict, index: int, name: str) -> dict:
    """The run with the labels the figures group by, where a file leaves them out: its id
    (``runs[i]``), its source (the file's name) and its split, ``held_out`` (the model's
    constants were fitted on this corpus's ``fit`` runs alone, so any run of another file is
    one they never saw); a model or cluster preset as its source spells it ("Llama-2-70b",
    "DGX A100") as the planner's, a precision too ("BF16", "bfloat16"), and a recompute
    given as a flag (true: full); a cluster given by its GPU alone on that GPU's node preset;
    and a plan without ``dp`` on all the cluster's GPUs (the
    data-parallel degree a paper leaves implicit: GPUs / (tp pp cp), as a table's rows get
    it), where they divide evenly."""
    missing = {k: v for k, v in (("id", f"runs[{index}]"), ("source", name),
                                 ("split", "held_out")) if not isinstance(run.get(k), str)}
    try:
        missing.update(_read_as_the_planners(run))
    except (TypeError, ValueError, KeyError, AttributeError):
        pass        # a run too odd to read: left as it is, for the replay to refuse and say why
    return {**run, **missing} if missing else run


def _read_as_the_planners(run: dict) -> dict:
    """The fields of ``run`` that ``labelled`` reads as the planner's (its docstring), as
    replacements."""
    missing: dict = {}
    for key, spec, named in (("model", ModelSpec, published_tables._preset_named),
                             ("cluster", ClusterSpec, published_tables._slug)):
        given = run.get(key)
        preset = given if isinstance(given, str) else (
            given.get("preset") if isinstance(given, dict) else None)
        if isinstance(preset, str) and preset not in spec.preset_names():
            known = named(preset)
            if known in spec.preset_names():
                missing[key] = known if isinstance(given, str) else {**given, "preset": known}
    training = run.get("training")
    if isinstance(training, dict) and isinstance(training.get("precision"), str):
        said = training["precision"]
        if said not in published_tables.rules.PRECISIONS and _NAMES_PRECISION.search(
                said.lower()):
            # As a page prints it ("BF16", "bfloat16", "FP8-CS"): the table rules' reading,
            # and the fp8 recipe it names where the run names none.
            precision, recipe = published_tables.rules.printed_precision(said)
            fp8 = {"fp8_recipe": recipe} if recipe and "fp8_recipe" not in training else {}
            missing["training"] = {**training, "precision": precision, **fp8}
    plan = run.get("plan")
    if isinstance(plan, dict) and isinstance(plan.get("recompute"), (bool, str)):
        said = plan["recompute"]
        mode = ({True: "full", False: "none"}[said] if isinstance(said, bool)
                else said.lower())
        if mode != said:
            missing["plan"] = plan = {**plan, "recompute": mode}
    cluster = missing.get("cluster", run.get("cluster"))
    if isinstance(cluster, dict) and "preset" not in cluster and not (
            "intra_node" in cluster and "inter_node" in cluster):
        node = _node_of(cluster)
        if node is not None:
            missing["cluster"] = node
    tuned = run.get("tune") if isinstance(run.get("tune"), dict) else {}
    if isinstance(plan, dict) and "dp" not in plan and "dp" not in tuned:
        try:
            gpus = ClusterSpec.model_validate(missing.get("cluster", run.get("cluster"))
                                              ).num_gpus
            missing["plan"] = {**plan, "dp": published_tables._derived_dp(plan, gpus)}
        except (ValueError, TypeError):
            pass        # no cluster to count, or GPUs the degrees do not divide: left out
    return missing


# A precision as a page prints it, which the table rules read (``printed_precision``); any
# other string is left for the replay to refuse, naming it.
_NAMES_PRECISION = re.compile(r"bf16|bfloat16|fp16|float16|fp8|float8|fp4|fp32|tf32")


def _node_of(cluster: dict) -> dict | None:
    """A cluster given by its GPU and node count alone ({"gpu": "H100", "num_nodes": 4}) on
    the node preset of that GPU, as a table's hardware text gets one (``published_tables``:
    an H100 on a DGX H100), its other fields kept; None where the GPU names no preset."""
    gpu, nodes = cluster.get("gpu"), cluster.get("num_nodes")
    text = gpu if isinstance(gpu, str) else gpu.get("name") if isinstance(gpu, dict) else None
    per = cluster.get("gpus_per_node", 8)
    if not isinstance(text, str) or not isinstance(nodes, int) or not isinstance(per, int):
        return None
    try:
        node, _ = published_tables._cluster({"hardware": text}, {"gpus": nodes * per})
    except ValueError:
        return None
    known = isinstance(gpu, dict) or gpu in GPUSpec.preset_names()
    return {**node, **{k: v for k, v in cluster.items() if k != "gpu" or known}}


def candidates(run: dict) -> list[dict]:
    """The plan with every combination of the run's unpublished knobs."""
    tune = run.get("tune") or {}
    keys = sorted(tune)
    out = []
    for values in itertools.product(*(tune[k] for k in keys)):
        out.append({**run["plan"], **dict(zip(keys, values, strict=True))})
    return out or [run["plan"]]


def predict_run(run: dict, eff_overrides: dict | None = None):
    """(estimate of the fastest fitting candidate, or of the fastest at all when none fits;
    whether it fits)."""
    model = ModelSpec.model_validate(run["model"])
    cluster = ClusterSpec.model_validate(run["cluster"])
    training = TrainingSpec.model_validate(run["training"])
    eff = EfficiencyModel.model_validate({**(run.get("efficiency") or {}), **(eff_overrides or {})})
    best = None
    why: list[tuple[str, str]] = []
    for fields in candidates(run):
        plan = ParallelPlan.model_validate(fields)
        broken = plan_violations(plan, model, cluster, training)
        if broken:
            why = why or broken
            continue
        est = estimate(model, cluster, training, plan, eff)
        key = (not est.fits_in_memory, est.step_time_s)
        if best is None or key < best[0]:
            best = (key, est)
    if best is None:
        reasons = "; ".join(f"{field}: {reason}" for field, reason in why[:3])
        raise ValueError(f"{run['id']}: no candidate plan is valid ({reasons})")
    return best[1], not best[0][0]


def replay(runs: list[dict], eff_overrides: dict | None = None
           ) -> tuple[list[dict], list[dict]]:
    """(rows of the runs the planner replays, {"id", "reason"} of those it cannot: a request
    its validation refuses or a corpus entry missing what a run needs). A bad run is reported,
    never allowed to stop the others."""
    rows, skipped = [], []
    for run in runs:
        try:
            rows.extend(evaluate_runs([run], eff_overrides))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"{type(exc).__name__}: {exc}".splitlines()
            skipped.append({"id": run.get("id", "?"), "reason": " ".join(reason)[:500]})
    return rows, skipped


# Published throughput metrics that give the step time without a FLOPs convention: seconds
# per step from (value, tokens per step, sequences per step, GPUs).
_STEP_FROM_METRIC = {
    "step_time_s": lambda v, tokens, seqs, gpus: v,
    "tokens_per_s": lambda v, tokens, seqs, gpus: tokens / v,
    "tokens_per_s_per_gpu": lambda v, tokens, seqs, gpus: tokens / (v * gpus),
    "samples_per_s": lambda v, tokens, seqs, gpus: seqs / v,
}


def measured_step_time(run: dict, gpus: int) -> float:
    """The run's measured step time: ``measured.step_time_s``, or, where a corpus gives only
    the published figure, derived from it: step time, tokens per second overall or per GPU
    and samples per second directly; TFLOP/s per GPU and MFU through the FLOPs count the
    run's ``measured.flops_convention`` names (Megatron's 96 or 72 B s l h^2 forms, 6N,
    PaLM's 6N + 12LHQT: ``published_tables.flops_per_step``), else the run needs
    ``step_time_s``."""
    measured = run["measured"]
    if not isinstance(measured, dict):
        raise ValueError(f"measured must be an object ({{\"step_time_s\": ...}}, "
                         f"{{\"tokens_per_s\": ...}}, ...), not {measured!r:.60}")
    if "step_time_s" in measured:
        return float(measured["step_time_s"])
    metric, value = measured.get("metric"), measured.get("value")
    if metric is None:
        # A figure given under its own name ({"tokens_per_s": 1234.5}, {"mfu": 0.41}).
        named = [k for k in (*_STEP_FROM_METRIC, "tflops_per_gpu", "mfu") if k in measured]
        if len(named) == 1:
            metric, value = named[0], measured[named[0]]
    derive = _STEP_FROM_METRIC.get(metric)
    if metric in ("tflops_per_gpu", "mfu") and isinstance(value, (int, float)) and value > 0:
        try:
            return _step_from_flops(run, metric, float(value), gpus)
        except ValueError as exc:
            raise ValueError(f"measured.step_time_s is missing and measured.metric {metric!r} "
                             f"needs its FLOPs count: {exc}") from None
    if derive is None or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"measured.step_time_s is missing and measured.metric {metric!r} with "
                       f"value {value!r} does not give it (derivable from: "
                       f"{', '.join(_STEP_FROM_METRIC)})")
    t = run["training"]
    seqs = t["global_batch_size"]
    return float(derive(value, seqs * t["seq_length"], seqs, gpus))


def _step_from_flops(run: dict, metric: str, value: float, gpus: int) -> float:
    """A TFLOP/s-per-GPU or MFU figure's step time, through the FLOPs count its
    ``measured.flops_convention`` names (``published_tables.flops_per_step``; MFU over the
    GPU's 16-bit peak)."""
    t = run["training"]
    flops = published_tables.flops_per_step(run["measured"].get("flops_convention") or "",
                                            t["global_batch_size"], t["seq_length"],
                                            run["model"])
    if metric == "tflops_per_gpu":
        return flops / (value * 1e12 * gpus)
    return published_tables.step_from_mfu(flops, value, run["cluster"], gpus)


def evaluate_runs(runs: list[dict], eff_overrides: dict | None = None) -> list[dict]:
    rows = []
    for run in runs:
        est, fits = predict_run(run, eff_overrides)
        measured = measured_step_time(run, est.gpus_used)
        err = measured / est.step_time_s - 1
        # What the model misses per micro-batch a GPU runs, and per layer of a (mean) stage.
        m = run["training"]["global_batch_size"] // (est.dp * est.micro_batch_size)
        gap_ms = 1e3 * (measured - est.step_time_s) / m
        layers = ModelSpec.model_validate(run["model"]).num_layers / est.pp
        rows.append({
            "id": run["id"], "source": run["source"], "split": run["split"],
            "sweep": run.get("sweep"), "gpus": est.gpus_used,
            "gpu_family": gpu_family(ClusterSpec.model_validate(run["cluster"])),
            "tokens": run["training"]["global_batch_size"] * run["training"]["seq_length"],
            "plan": {k: getattr(est, k) for k in ("dp", "tp", "pp", "cp", "ep", "etp", "vpp",
                                                  "micro_batch_size", "recompute",
                                                  "recompute_num_layers", "zero_stage")},
            "moe": est.parameters is not None and est.parameters.active < est.parameters.total,
            "measured_step_s": measured, "predicted_step_s": round(est.step_time_s, 4),
            "error_pct": round(100 * err, 2), "microbatches": m,
            "gap_ms_per_microbatch": round(gap_ms, 2),
            "gap_ms_per_layer_microbatch": round(gap_ms / layers, 3), "fits_in_memory": fits,
            "memory_gib": round(est.memory_per_gpu_gib, 1), "mfu": round(est.mfu, 4),
            # What the run measured, in the same FLOPs count: independent of the prediction.
            "measured_mfu": round(est.mfu * est.step_time_s / measured, 6),
        })
        peak = run["measured"].get("peak_memory_gib")
        if peak is not None:
            if isinstance(peak, bool) or not isinstance(peak, (int, float)) or not peak > 0:
                raise ValueError(f"measured.peak_memory_gib {peak!r} is not a positive number "
                                 "of GiB")
            # What the allocator could have held: the model's memory less the reserve it
            # keeps for the CUDA context and NCCL's buffers, which no allocator reading counts.
            reserve = EfficiencyModel.model_validate(run.get("efficiency") or {}
                                                     ).memory_reserve_gib
            rows[-1]["measured_memory_gib"] = peak
            rows[-1]["allocator_memory_gib"] = round(est.memory_per_gpu_gib - reserve, 2)
    return rows


def summarize(rows: list[dict]) -> dict:
    if not rows:
        return {"rows": 0, "sources": 0, "median_abs_error_pct": None,
                "source_median_abs_error_pct": None, "max_abs_error_pct": None}
    errs = [abs(r["error_pct"]) for r in rows]
    by_source: dict[str, list[float]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(abs(r["error_pct"]))
    return {"rows": len(rows), "sources": len(by_source),
            "median_abs_error_pct": round(statistics.median(errs), 2),
            # Each source counted once (one source's long sweep would otherwise set the
            # median): the median over sources of each source's median |error|.
            "source_median_abs_error_pct": round(statistics.median(
                statistics.median(v) for v in by_source.values()), 2),
            "mean_abs_error_pct": round(statistics.mean(errs), 2),
            "max_abs_error_pct": round(max(errs), 2),
            "median_signed_error_pct": round(statistics.median(r["error_pct"] for r in rows), 2)}


def memory_summary(rows: list[dict]) -> dict:
    """The model's memory (less the CUDA context's reserve: ``allocator_memory_gib``) against
    the peak the runs logged (``measured.peak_memory_gib``): a caching allocator's reserved peak
    (torchtitan's), which holds the live tensors and whatever the allocator kept besides, so an
    upper bound on what the run needed; the closer a run came to the GPU's memory, the less the
    allocator could keep beyond its needs."""
    pairs = [(r["allocator_memory_gib"], r["measured_memory_gib"], r["source"])
             for r in rows if "measured_memory_gib" in r]
    if not pairs:
        return {"rows": 0}
    ratios = [p / m for p, m, _ in pairs]
    return {"rows": len(pairs), "sources": len({s for _, _, s in pairs}),
            "median_predicted_over_measured": round(statistics.median(ratios), 3),
            "min_predicted_over_measured": round(min(ratios), 3),
            "max_predicted_over_measured": round(max(ratios), 3),
            # predicted above a reserved peak: more than the run held, allocator cache included
            "above_measured": sum(p > m for p, m, _ in pairs)}


def source_weighted_quantiles(values: list[float], sources: list[str],
                              qs: tuple[float, ...] = (0.1, 0.5, 0.9)) -> list[float]:
    """Quantiles of ``values`` with each source weighing the same (a run of a source of n runs
    weighs 1/n): the weighted distribution's CDF runs linearly between the midpoints of the
    sorted values' weights (the Hazen rule, which for equal weights gives the usual
    (i - 1/2)/n plotting positions)."""
    count: dict[str, int] = {}
    for s in sources:
        count[s] = count.get(s, 0) + 1
    pairs = sorted((v, 1.0 / count[s]) for v, s in zip(values, sources, strict=True))
    total = sum(w for _, w in pairs)
    cum, points = 0.0, []
    for v, w in pairs:
        points.append(((cum + w / 2) / total, v))
        cum += w
    out = []
    for q in qs:
        if q <= points[0][0]:
            out.append(points[0][1])
            continue
        if q >= points[-1][0]:
            out.append(points[-1][1])
            continue
        for (p0, v0), (p1, v1) in itertools.pairwise(points):
            if p0 <= q <= p1:
                out.append(v0 + (v1 - v0) * (q - p0) / (p1 - p0) if p1 > p0 else v1)
                break
    return out


def sweep_taus(rows: list[dict]) -> dict[str, dict]:
    """Kendall's tau of predicted vs measured step time within every sweep of >= 3 runs."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["sweep"]:
            groups.setdefault(r["sweep"], []).append(r)
    out = {}
    for name, rs in sorted(groups.items()):
        if len(rs) < 3:
            continue
        # Throughput per GPU: runs of a sweep may differ in GPUs and batch.
        pred = [r["tokens"] / (r["predicted_step_s"] * r["gpus"]) for r in rs]
        meas = [r["tokens"] / (r["measured_step_s"] * r["gpus"]) for r in rs]
        out[name] = {"runs": len(rs), "split": rs[0]["split"],
                     "kendall_tau": round(kendall_tau(pred, meas), 3)}
    return out


def over_memory(rows: list[dict]) -> list[dict]:
    """The published runs (which ran) whose best candidate the model puts over the GPU's
    memory: where the memory model is conservative, and a search would refuse a plan that
    was run."""
    return [{"id": r["id"], "memory_gib": r["memory_gib"], "split": r["split"]}
            for r in rows if not r["fits_in_memory"]]


def plan_key(run: dict) -> str:
    """The model, the GPUs and the published degrees of a run (not its batch, precision or
    software): runs sharing it ran the same plan on the same hardware."""
    m, c, p = ({"preset": x} if isinstance(x, str) else x
               for x in (run["model"], run["cluster"], run["plan"]))
    shape = m.get("preset") or [m.get(k) for k in ("num_layers", "hidden_size",
                                                  "ffn_hidden_size", "num_attention_heads",
                                                  "num_kv_heads", "vocab_size")]
    hardware = [c.get("preset"), c.get("gpu"), c.get("num_nodes")]
    degrees = [p.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep")]
    return json.dumps([shape, hardware, run["training"]["seq_length"], degrees])


def same_plan_groups(rows: list[dict], runs: list[dict]) -> list[dict]:
    """Runs of different sources that ran one plan (``plan_key``) on the same GPUs: how much
    slower per token each measured than the group's fastest, and how much of that the model
    predicts from their published settings (batch, precision, overlap, dispatcher, ...). What
    it does not predict is the software (or the runs' descriptions), not the plan."""
    by_id = {r["id"]: r for r in rows}
    groups: dict[str, list[dict]] = {}
    for run in runs:
        if run.get("id") in by_id:
            groups.setdefault(plan_key(run), []).append(by_id[run["id"]])
    out = []
    for members in groups.values():
        if len({r["source"] for r in members}) < 2:
            continue
        per_token = sorted(((r["measured_step_s"] / r["tokens"],
                             r["predicted_step_s"] / r["tokens"], r) for r in members),
                           key=lambda x: x[0])
        m0, p0, base = per_token[0]
        out.append({"reference": base["id"], "runs": [
            {"id": r["id"], "source": r["source"],
             "measured_slowdown_pct": round(100 * (m / m0 - 1), 1),
             "predicted_slowdown_pct": round(100 * (p / p0 - 1), 1),
             "unexplained_pct": round(100 * ((m / m0) / (p / p0) - 1), 1)}
            for m, p, r in per_token[1:]]})
    return out


def _merged(base: dict, patch: dict) -> dict:
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def what_if(runs: list[dict], patches: list[str]) -> list[dict]:
    """The runs with each ``SOURCE=JSON`` patch merged (key by key, nested objects merged too)
    into every run of that source; ValueError for a patch that is not of that form, names no
    source of the runs, or whose JSON is not an object."""
    sources = {r.get("source") for r in runs}
    for text in patches:
        source, sep, body = text.partition("=")
        if not sep:
            raise ValueError(f"--what-if {text[:60]!r}: expected SOURCE=JSON")
        if source not in sources:
            raise ValueError(f"--what-if: no run of source {source!r}")
        try:
            patch = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--what-if {source}: invalid JSON ({exc.msg})") from exc
        if not isinstance(patch, dict):
            raise ValueError(f"--what-if {source}: the JSON must be an object")
        runs = [_merged(r, patch) if r.get("source") == source else r for r in runs]
    return runs


def broken_by_patches(original: list[dict], patched: list[dict],
                      skipped: list[dict]) -> list[dict]:
    """The skipped runs (``replay``'s second list) that a ``--what-if`` patch changed
    (``what_if`` returns the others as they were) and that replay as the data gives them: what
    the patch, not the data, left unreplayable."""
    touched = {o.get("id"): r for r, o in zip(original, patched, strict=True) if o is not r}
    return [x for x in skipped if x["id"] in touched and replay([touched[x["id"]]])[0]]


def as_table(run: dict) -> dict:
    """The run as a paper's table would print it (``published_tables``): its model's shape, its
    cluster, degrees, batch, precision and published knobs in one row, the measured step time
    as the figure, and as text only the run's citation, the table it quotes and the row as
    quoted; a pipelined run's schedule as the corpus holds it where the corpus does not tune
    it (published, or said in its source's text). Every other setting is left for the table's
    rules to infer. Replayed without the corpus to match, the difference from the run's own
    replay is what a table loses against a hand-encoded run."""
    plan = {k: v for k, v in run["plan"].items() if k not in (run.get("tune") or {})}
    if plan.get("pp", 1) > 1 and "vpp" not in (run.get("tune") or {}):
        plan.setdefault("vpp", 1)   # the schedule the corpus holds: published, or its text's
    gpus = (math.prod(plan.get(k, 1) for k in ("tp", "pp", "dp", "cp")) if "dp" in plan
            else ClusterSpec.model_validate(run["cluster"]).num_gpus)   # the GPUs it used
    training = run["training"]
    row = {**plan, "model": ModelSpec.model_validate(run["model"]).model_dump(
               mode="json", exclude_none=True),
           "cluster": run["cluster"], "gpus": gpus,
           "seq_length": training["seq_length"],
           "global_batch_size": training["global_batch_size"],
           "precision": training.get("precision", "bf16"),
           "step_time_s": measured_step_time(run, gpus), "notes": str(run.get("quote", "")),
           "id": run["id"], "source": run["source"], "split": run["split"],
           "sweep": run.get("sweep")}
    if "fp8_recipe" in training:
        row["training"] = {"fp8_recipe": training["fp8_recipe"]}
    return {"source": f"{run.get('citation', '')}; {run.get('table', '')}", "hardware": "",
            "rows": [row]}


def tables_of(runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the runs rebuilt from ``as_table`` without the corpus, {"id", "reason"} of those a
    table cannot state)."""
    rebuilt, skipped = [], []
    for run in runs:
        try:
            got, bad = published_tables.load_table(as_table(run), run["source"], [])
        except (ValueError, KeyError, TypeError) as exc:
            got, bad = [], [{"reason": f"{type(exc).__name__}: {exc}"}]
        rebuilt += got
        skipped += [{"id": run["id"], "reason": b["reason"]} for b in bad]
    return rebuilt, skipped


# Fields a runs file may describe its source in, read beside its citation.
_DESCRIBED_BY = ("source", "reference", "paper", "title", "url", "notes", "date", "year",
                 "framework", "software")


def with_inferred_settings(run: dict) -> dict:
    """A run of another corpus with the training settings it leaves out inferred as a
    published table's row gets them (``published_tables``: the software of the source's date
    and of the framework its text names, from the run's citation, table and quote and the
    fields ``_DESCRIBED_BY``); the settings it states win, and ``inferred_settings`` lists
    the others. This corpus states every setting that differs from the planner's defaults; a
    file written elsewhere cannot be assumed to, and a setting it leaves out is one its
    source did not print. A run the rules cannot state as a table (a figure without its FLOPs
    count, a cluster no preset holds) stays as given."""
    text = "; ".join(str(x) for x in (run.get("citation"),
                                       *(run.get(k) for k in _DESCRIBED_BY)) if x)
    described = {**run, "citation": text} if text else run
    rebuilt, _ = tables_of([described])
    given = run.get("training") if isinstance(run.get("training"), dict) else {}
    inferred = {k: v for k, v in (rebuilt[0]["training"] if rebuilt else {}).items()
                if k not in given}
    if not inferred:
        return run
    return {**run, "training": {**given, **inferred}, "inferred_settings": sorted(inferred)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--split", choices=["fit", "held_out"], default=None,
                    help="only these runs (default: all)")
    ap.add_argument("--what-if", action="append", default=[], metavar="SOURCE=JSON",
                    help="merge this JSON object into every run of SOURCE (repeatable)")
    ap.add_argument("--as-tables", action="store_true",
                    help="replay each run as a published table would state it (shape, GPUs, "
                    "degrees, batch, precision, published knobs, its citation), its other "
                    "settings inferred by the table's rules instead of the corpus's encoding")
    ap.add_argument("--no-infer", action="store_true",
                    help="replay another corpus's runs with the planner's defaults for the "
                    "training settings they leave out, not the table rules' inferences")
    args = ap.parse_args(argv)
    try:
        original, unreadable = load_data(args.data, infer=not args.no_infer)
    except ValueError as exc:
        print(f"error: --data {exc}", file=sys.stderr)
        return 2
    try:
        patched = what_if(original, args.what_if)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs = [r for r in patched if args.split in (None, r.get("split"))]
    unstated: list[dict] = []
    if args.as_tables:
        runs, unstated = tables_of(runs)
    rows, skipped = replay(runs)
    broken = broken_by_patches(original, patched, skipped)
    if broken:
        # Its figures would cover fewer runs than the data's and read as a change of the model.
        print(f"error: --what-if leaves {len(broken)} runs that replay without it unreplayable, "
              f"e.g. {broken[0]['id']}: {broken[0]['reason'][:300]}", file=sys.stderr)
        return 2
    skipped = unreadable + unstated + skipped
    inferred = [r for r in runs if r.get("inferred_settings")]
    if inferred:
        print(f"{len(inferred)} of the file's runs left training settings out: inferred by the "
              "table rules from their source's text and date (--no-infer: the planner's "
              "defaults instead)\n")
    header = (f"{'run':<46}{'split':>9}{'gpus':>7}{'measured s':>12}{'predicted s':>13}"
              f"{'error %':>9}{'mfu':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        flag = "" if r["fits_in_memory"] else "  (over memory)"
        print(f"{r['id'][:45]:<46}{r['split']:>9}{r['gpus']:>7}{r['measured_step_s']:>12.3f}"
              f"{r['predicted_step_s']:>13.3f}{r['error_pct']:>+9.1f}{r['mfu']:>7.3f}{flag}")
    summary = {s: summarize([r for r in rows if r["split"] == s]) for s in ("held_out", "fit")}
    summary["all"] = summarize(rows)       # both splits: a table's rows may fall in either
    summary["held_out_dense"] = summarize([r for r in rows
                                           if r["split"] == "held_out" and not r["moe"]])
    summary["moe"] = summarize([r for r in rows if r["moe"]])
    # Held-out runs per GPU family: the model errs one way on A100 and the other on H100.
    summary["held_out_by_gpu"] = {
        fam: summarize([r for r in rows if r["split"] == "held_out" and r["gpu_family"] == fam])
        for fam in sorted({r["gpu_family"] for r in rows if r["split"] == "held_out"})}
    by_source = {src: summarize([r for r in rows if r["source"] == src])
                 for src in sorted({r["source"] for r in rows})}
    taus = sweep_taus(rows)
    print()
    matched = [r for r in runs if r.get("table_row_of")]
    if matched:
        fit = sum(r.get("split") == "fit" for r in matched)
        print(f"{len(matched)} of the table's rows are corpus runs, replayed as the corpus "
              f"encodes them with its split ({fit} fit: the constants were fitted on them; a "
              "table's own \"split\" overrides it); 'all' below covers every row\n")
    for s in ("held_out", "held_out_dense", "moe", "fit", "all"):
        x = summary[s]
        if x["rows"]:
            print(f"{s:<15} {x['rows']:>4} runs from {x['sources']} sources: median |error| "
                  f"{x['median_abs_error_pct']:.1f}%, max {x['max_abs_error_pct']:.1f}% "
                  f"(median signed {x['median_signed_error_pct']:+.1f}%; each source once: "
                  f"{x['source_median_abs_error_pct']:.1f}%)")
    if summary["held_out_by_gpu"]:
        print("\nheld out, per GPU family:")
        for fam, x in summary["held_out_by_gpu"].items():
            print(f"  {fam:<8}{x['rows']:>4} runs from {x['sources']:>2} sources: median |error| "
                  f"{x['median_abs_error_pct']:>5.1f}%, each source once "
                  f"{x['source_median_abs_error_pct']:>5.1f}%, median signed "
                  f"{x['median_signed_error_pct']:>+6.1f}%")
    print("\nper source:")
    for src, x in by_source.items():
        print(f"  {src:<24}{x['rows']:>4} runs  median |error| {x['median_abs_error_pct']:>5.1f}%"
              f"  max {x['max_abs_error_pct']:>5.1f}%  median signed {x['median_signed_error_pct']:>+6.1f}%")
    if taus:
        print("\nKendall tau within sweeps:")
        for name, t in taus.items():
            print(f"  {name:<60}{t['runs']:>3} runs  {t['split']:<9} tau {t['kendall_tau']:+.2f}")
    summary["memory"] = memory_summary(rows)
    mem = summary["memory"]
    if mem["rows"]:
        print(f"\nmemory: {mem['rows']} runs from {mem['sources']} sources logged their peak "
              "(a caching allocator's reserved peak: what the run needed and what the "
              "allocator kept besides); the model's memory less its CUDA-context reserve over "
              f"it: median {mem['median_predicted_over_measured']:.2f}, "
              f"{mem['min_predicted_over_measured']:.2f}-{mem['max_predicted_over_measured']:.2f}, "
              f"{mem['above_measured']} above it")
        for r in rows:
            if "measured_memory_gib" in r:
                print(f"  {r['id'][:50]:<51}{r['measured_memory_gib']:>8.1f} GiB logged"
                      f"{r['allocator_memory_gib']:>8.1f} predicted"
                      f"{r['allocator_memory_gib'] / r['measured_memory_gib']:>7.2f}")
    over = over_memory(rows)
    if over:
        print(f"\n{len(over)} of {len(rows)} runs ran where the model puts them over the GPU's "
              "memory: " + ", ".join(f"{x['id']} ({x['memory_gib']:.1f} GiB)" for x in over))
    pairs = same_plan_groups(rows, runs)
    if pairs:
        print("\nsame plan on the same GPUs, other sources (per token, against the fastest):")
        for g in pairs:
            for x in g["runs"]:
                print(f"  {x['id'][:44]:<45} vs {g['reference'][:44]:<45} measured "
                      f"{x['measured_slowdown_pct']:>+6.1f}%  predicted "
                      f"{x['predicted_slowdown_pct']:>+6.1f}%  unexplained "
                      f"{x['unexplained_pct']:>+6.1f}%")
    if skipped:
        print(f"\n{len(skipped)} runs could not be replayed (left out of every figure above):")
        for x in skipped:
            print(f"  {x['id']}: {x['reason']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "summary": summary,
                                         "by_source": by_source, "sweeps": taus,
                                         "same_plan": pairs, "over_memory": over,
                                         "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
