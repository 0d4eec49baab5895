"""Caveats: every number a caveat quotes is what the published corpus says today, and the plans
published runs do not back are flagged while the published runs themselves are not."""

import contextlib
import statistics
import sys
from pathlib import Path

import pytest

from planner.cost import estimate
from planner.cost.caveats import (
    BAND_MIN_SOURCES,
    BEST_DENSE_MFU,
    FINE_GRAINED_ERRORS,
    FINE_GRAINED_EXPERTS,
    FINE_GRAINED_SLOWER,
    MEASURED_OVER_PREDICTED,
    MEASURED_OVER_PREDICTED_BY_GPU,
    best_dense_mfu,
    gpu_family,
    model_class,
    precision_group,
    step_time_band,
)
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import published_accuracy  # noqa: E402

RUNS = published_accuracy.load_runs()


@pytest.fixture(scope="module")
def replayed():
    return list(zip(RUNS, published_accuracy.evaluate_runs(RUNS), strict=True))


def _gpu_family(run: dict) -> str:
    return gpu_family(ClusterSpec.model_validate(run["cluster"]))


def test_best_measured_mfu_per_gpu_and_size_is_the_corpus_best(replayed):
    """BEST_DENSE_MFU's staircase is the corpus's: for each GPU family and precision, from the
    largest model down, every run that measured a higher MFU than all runs of models at least
    as large is a step, with its parameters and id."""
    runs: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for run, row in replayed:
        if row["moe"]:
            continue
        measured_mfu = row["measured_mfu"]
        key = (_gpu_family(run), precision_group(TrainingSpec.model_validate(run["training"])))
        params = ModelSpec.model_validate(run["model"]).num_params
        runs.setdefault(key, []).append((params, measured_mfu, run["id"]))
    for key, (steps, count) in BEST_DENSE_MFU.items():
        assert len(runs[key]) == count, key
        # A step: a run no run of a model at least as large matched or beat.
        staircase = sorted((round(p / 1e9, 2), round(m, 3), i) for p, m, i in runs[key]
                           if not any(q >= p and n >= m and j != i for q, n, j in runs[key]))
        assert staircase == [(round(p / 1e9, 2), m, i) for p, m, i in steps], key


def test_a_plan_is_held_to_the_best_run_of_a_model_as_large_or_larger():
    # On A100: the FlashAttention-2 paper's GPT3-2.7B at 8K tokens 71.7% for models up to its
    # 2.65B parameters, Hagemann et al.'s Llama 13B (14.0B with its 128K vocabulary) 67.3% up
    # to 14.0B, their 30B 60.6% up to 33.8B and 65B 58.7% up to 66.9B, Korthikanti's 1T
    # 56.3% above, and for anything larger still.
    H = "hagemann-{}-2k-64g-fa2rms-noac-{}"
    assert best_dense_mfu("a100", "16-bit", 1e9)[:2] == (0.717, "fa2-gpt3-2.7b-8k-flash2")
    assert best_dense_mfu("a100", "16-bit", 3e9)[:2] == (0.673, H.format("13b", "m1t1p1-132178"))
    assert best_dense_mfu("a100", "16-bit", 8.03e9)[:2] == (
        0.673, H.format("13b", "m1t1p1-132178"))
    assert best_dense_mfu("a100", "16-bit", 20e9)[:2] == (
        0.606, H.format("30b", "m1t1p4-nosp-131848"))
    assert best_dense_mfu("a100", "16-bit", 40e9)[:2] == (
        0.587, H.format("65b", "m1t2p4-sp-131697"))
    assert best_dense_mfu("a100", "16-bit", 70e9)[:2] == (0.563, "korthikanti-1t-selective")
    assert best_dense_mfu("a100", "16-bit", 2e12)[:2] == (0.563, "korthikanti-1t-selective")
    # On V100: Megatron-LM's 2020 weak-scaling runs, one model per size (1B on one GPU 44.0%).
    assert best_dense_mfu("v100", "16-bit", 1e9)[:2] == (0.44, "megatron-2020-1b-v100-1")
    assert best_dense_mfu("v100", "16-bit", 5e9)[:2] == (0.315, "megatron-2020-8b-v100-8")
    # A step's parameters are to 0.01 B: the 4B run's own 4,234,374,144 is held to its step.
    assert best_dense_mfu("v100", "16-bit", 4_234_374_144)[:2] == (
        0.354, "megatron-2020-4b-v100-4")
    assert best_dense_mfu("v100", "16-bit", 4_246e6)[:2] == (0.315, "megatron-2020-8b-v100-8")
    assert best_dense_mfu("v100", "fp8", 1e9) is None
    # GPT-3 175B on 64 A100 at the search winner's plan (tp4 pp16 vpp3, 62% MFU): within 3
    # points of smaller models' best (67.3%), but no run of a model that large measured above
    # 56.3%.
    est = estimate(ModelSpec.from_preset("gpt3-175b"), A100x8,
                   TrainingSpec(global_batch_size=1536, seq_length=2048),
                   ParallelPlan(tp=4, pp=16, vpp=3, zero_stage=0, sequence_parallel=True))
    (note,) = [c for c in est.caveats if "MFU" in c]
    assert 0.591 < est.mfu < 0.673 + 0.03 and "korthikanti-1t-selective" in note


def test_fine_grained_moe_errors_are_the_corpus_errors(replayed):
    errors = [row["error_pct"] for run, row in replayed if row["moe"]
              and ModelSpec.model_validate(run["model"]).experts >= FINE_GRAINED_EXPERTS]
    # Optimistic on all but NeMo AutoModel's two runs, which measured faster than predicted.
    assert sum(e > 0 for e in errors) == FINE_GRAINED_SLOWER == len(errors) - 2
    assert FINE_GRAINED_ERRORS == (len(errors), round(min(errors)), round(
        statistics.median(errors)), round(max(errors)))


def test_step_time_bands_are_the_held_out_corpus_deciles(replayed):
    """MEASURED_OVER_PREDICTED is what the held-out runs of each class measured over what the
    model predicted, each source weighing the same: runs, sources, 10th percentile, median,
    90th percentile."""
    ratios: dict[str, list[tuple[float, str]]] = {}
    for run, row in replayed:
        if row["split"] == "held_out":
            cls = model_class(ModelSpec.model_validate(run["model"]))
            ratios.setdefault(cls, []).append(
                (row["measured_step_s"] / row["predicted_step_s"], run["source"]))
    assert set(ratios) == set(MEASURED_OVER_PREDICTED)
    for cls, pairs in ratios.items():
        values, sources = [v for v, _ in pairs], [s for _, s in pairs]
        low, median, high = published_accuracy.source_weighted_quantiles(values, sources)
        assert MEASURED_OVER_PREDICTED[cls] == (
            len(values), len(set(sources)), round(low, 3), round(median, 3),
            round(high, 3)), cls
        # About eight in ten of the class's runs within the band, each source weighing the
        # same, as the field says.
        count = {s: sources.count(s) for s in set(sources)}
        inside = sum(1 / count[s] for v, s in pairs if low <= v <= high) / len(count)
        assert 0.7 <= inside <= 0.9, (cls, inside)


def test_per_gpu_bands_are_the_held_out_corpus_deciles_where_enough_sources_ran(replayed):
    """MEASURED_OVER_PREDICTED_BY_GPU is the same deciles per class and GPU family, for every
    (class, family) that at least BAND_MIN_SOURCES sources ran, and for no other."""
    ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for run, row in replayed:
        if row["split"] == "held_out":
            key = (model_class(ModelSpec.model_validate(run["model"])), _gpu_family(run))
            ratios.setdefault(key, []).append(
                (row["measured_step_s"] / row["predicted_step_s"], run["source"]))
    expected = {}
    for key, pairs in ratios.items():
        values, sources = [v for v, _ in pairs], [s for _, s in pairs]
        if len(set(sources)) >= BAND_MIN_SOURCES:
            low, median, high = published_accuracy.source_weighted_quantiles(values, sources)
            expected[key] = (len(values), len(set(sources)), round(low, 3), round(median, 3),
                             round(high, 3))
    assert MEASURED_OVER_PREDICTED_BY_GPU == expected
    # The families the model errs on in opposite directions: A100 slower than predicted at the
    # median, H100 faster, and each narrower than the pooled dense band.
    a100, h100 = (MEASURED_OVER_PREDICTED_BY_GPU[("dense", f)] for f in ("a100", "h100"))
    pooled = MEASURED_OVER_PREDICTED["dense"]
    assert a100[3] > 1 > h100[3]
    assert a100[4] - a100[2] < pooled[4] - pooled[2] and h100[4] - h100[2] < pooled[4] - pooled[2]


def test_the_fine_grained_band_before_the_pure_bf16_encoding():
    """README, 'Pure bf16' (costed then with one micro-batch's reduction window): costing NeMo
    AutoModel's two MoE runs without their fp32 master copy moved the fine-grained band's low
    decile from 0.885 to 0.886, its median and high decile not at all."""
    from tests.cost_history import (
        PURE_BF16_RUNS,
        before_grad_upcast,
        before_moe_routing,
        one_micro_batch_windows,
        with_master_copy,
        without_chunk_sorts,
    )
    fine = [before_moe_routing(before_grad_upcast(r)) for r in RUNS if r["split"] == "held_out"
            and model_class(ModelSpec.model_validate(r["model"])) == "fine_grained_moe"]
    bands = []
    for encode in (with_master_copy, lambda r: r):
        with one_micro_batch_windows(), without_chunk_sorts():
            rows = published_accuracy.evaluate_runs([encode(r) for r in fine])
        low, median, high = published_accuracy.source_weighted_quantiles(
            [x["measured_step_s"] / x["predicted_step_s"] for x in rows],
            [x["source"] for x in rows])
        bands.append((round(low, 3), round(median, 3), round(high, 3)))
    assert len(PURE_BF16_RUNS) == 2
    assert bands == [(0.885, 1.188, 1.484), (0.886, 1.188, 1.484)]


def test_source_weighted_quantiles_worked_by_hand():
    """Equal weights: the Hazen positions (i - 1/2)/n, so 1, 2, 3, 4 has its median at 2.5 and
    its 10th and 90th percentiles at the ends. A source of three runs weighs as one of one:
    values 1, 2, 3 (source a) and 10 (source b) put half the weight on 10, the median at the
    midpoint of a's last third (3, CDF 5/12) and b (10, CDF 3/4): 3 + 7 (1/2 - 5/12) / (1/3)."""
    assert published_accuracy.source_weighted_quantiles([1, 2, 3, 4], list("abcd")) == [1, 2.5, 4]
    q = published_accuracy.source_weighted_quantiles([1, 2, 3, 10], list("aaab"))
    assert q[1] == pytest.approx(3 + 7 * (0.5 - 5 / 12) / (1 / 3))
    assert q[0] == pytest.approx(1 + (0.1 - 1 / 12) / (1 / 6)) and q[2] == 10


def test_the_readme_quotes_the_bands():
    """The README's paragraph on step_time_band states each class's runs, sources and deciles,
    and those of each class and GPU family with a band of its own."""
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    words = {"dense": "dense runs", "moe": "coarse MoE runs",
             "fine_grained_moe": "fine-grained MoE runs"}
    for cls, name in words.items():
        runs, sources, low, median, high = MEASURED_OVER_PREDICTED[cls]
        assert f"{runs} {name} from {sources} sources" in text, cls
        assert f"between {low:.3f} and {high:.3f}" in text and f"median {median:.3f}" in text, cls
    for (cls, family), (runs, sources, low, median, high) in (
            MEASURED_OVER_PREDICTED_BY_GPU.items()):
        assert (f"{runs} {words[cls]} on {family.upper()} from {sources} sources between "
                f"{low:.3f} and {high:.3f} (median {median:.3f})") in text, (cls, family)


def test_an_estimate_carries_its_class_band():
    """The band is the prediction times the deciles of its class on its GPU family where that
    has a band (a dense model on H100 or A100), else of its class on every GPU (a coarse MoE
    model on H100, a dense one on B200); each spans the prediction (runs measured both faster
    and slower: for coarse MoE the Mixtral runs faster, DGX Cloud's Grok-1 in fp8 slower)."""
    train = TrainingSpec(global_batch_size=256, seq_length=4096, moe_load_imbalance=1.0)
    h100 = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    llama = ModelSpec.from_preset("llama3-8b")
    dense = estimate(llama, h100, train, ParallelPlan(dp=16))
    a100 = estimate(llama, ClusterSpec.from_preset("dgx-a100", num_nodes=2), train,
                    ParallelPlan(dp=16))
    b200 = estimate(llama, ClusterSpec.from_preset("dgx-b200", num_nodes=2), train,
                    ParallelPlan(dp=16))
    coarse = estimate(ModelSpec.from_preset("mixtral-8x7b"), h100, train,
                      ParallelPlan(dp=4, tp=4, ep=4, zero_stage=1, sequence_parallel=True))
    for est, cls, family in ((dense, "dense", "h100"), (a100, "dense", "a100"),
                             (b200, "dense", None), (coarse, "moe", None)):
        runs, sources, low, median, high = (MEASURED_OVER_PREDICTED_BY_GPU[(cls, family)]
                                            if family else MEASURED_OVER_PREDICTED[cls])
        band = est.step_time_band
        assert band is not None and band.model_class == cls and band.runs == runs
        assert (band.sources, band.gpu) == (sources, family)
        assert (band.low_s, band.median_s, band.high_s) == pytest.approx(
            (est.step_time_s * low, est.step_time_s * median, est.step_time_s * high))
        assert band.low_s < est.step_time_s < band.high_s
    assert ("dense", "b200") not in MEASURED_OVER_PREDICTED_BY_GPU
    assert step_time_band(llama, 2.0)["high_s"] == pytest.approx(
        2.0 * MEASURED_OVER_PREDICTED["dense"][4])
    assert step_time_band(llama, 2.0, family="h100")["high_s"] == pytest.approx(
        2.0 * MEASURED_OVER_PREDICTED_BY_GPU[("dense", "h100")][4])


def _keeps_activations(plan: ParallelPlan) -> bool:
    """Some layer's activations are kept (no, selective or block recompute)."""
    return not (plan.recompute == "full" and not plan.recompute_num_layers)


def test_sharded_runs_keeping_activations_land_on_both_sides_of_the_prediction(replayed):
    """Why no caveat reads sharded plans that keep activations as a lower bound (caveats.py's
    closing comment, quoted in the README): costed with the attention kernel they ran,
    llm-foundry's A100 runs of that kind land from 13% faster to 7% slower than predicted;
    torchtitan's eager FSDP2 runs of April 2024, costed with their eager kernels, FSDP2's copies
    and the recompute's early stop, are all slower (10-12%; its full-recompute 70B runs 9-10%),
    and llm-foundry's H100 runs at 512 GPUs 16-19% (FlashAttention-2's rate, the
    fastest candidate for their unnamed image; 2.5-6.4% with v1's)."""
    kept: dict[tuple[str, str], list[float]] = {}
    titan_full = []
    for run, row in replayed:
        if row["moe"] or row["plan"]["zero_stage"] < 2 or row["plan"]["dp"] < 2:
            continue
        plan = ParallelPlan.model_validate(row["plan"])
        if _keeps_activations(plan):
            kept.setdefault((run["source"], _gpu_family(run)), []).append(row["error_pct"])
        elif run["source"] == "torchtitan" and _gpu_family(run) == "a100":
            titan_full.append(row["error_pct"])
    every = [e for errs in kept.values() for e in errs]
    assert min(every) < 0 < max(every)
    foundry = kept[("llm-foundry", "a100")]
    assert len(foundry) == 13 and (round(min(foundry)), round(max(foundry))) == (-13, 7)
    on_h100 = kept[("llm-foundry", "h100")]
    assert len(on_h100) == 3 and (round(min(on_h100)), round(max(on_h100))) == (16, 19)
    # With FlashAttention v1's rate (the other image's kernel) they would land 2.5-6.4% slower.
    h100_runs = [run for run, row in replayed if run["source"] == "llm-foundry"
                 and _gpu_family(run) == "h100" and row["plan"]["recompute"] == "none"]
    as_v1 = published_accuracy.evaluate_runs(
        [{**r, "training": {**r["training"], "attention_kernel": "flash1"}} for r in h100_runs])
    assert (round(min(r["error_pct"] for r in as_v1), 1),
            round(max(r["error_pct"] for r in as_v1), 1)) == (2.5, 6.4)
    titan = kept[("torchtitan", "a100")]
    assert len(titan) == 6 and (round(min(titan)), round(max(titan))) == (10, 12)
    assert len(titan_full) == 2 and (round(min(titan_full)), round(max(titan_full))) == (9, 10)


def test_a_sharded_plan_keeping_activations_carries_no_caveat_of_its_own():
    model, training = ModelSpec.from_preset("llama3-8b"), TrainingSpec(
        global_batch_size=512, seq_length=8192)
    for plan in (ParallelPlan(dp=64, zero_stage=3), ParallelPlan(dp=64, zero_stage=2,
                 recompute="full", recompute_num_layers=16)):
        est = estimate(model, A100x8, training, plan)
        assert not any("ZeRO" in c for c in est.caveats), est.caveats


def _mfu_flagged(runs: list[dict]) -> list[tuple[str, float]]:
    """(id, error %) of the dense runs whose estimate carries the MFU caveat."""
    flagged = []
    for run, row in zip(runs, published_accuracy.evaluate_runs(runs), strict=True):
        if row["moe"]:
            continue
        est, _ = published_accuracy.predict_run(run)
        if any("MFU" in c for c in est.caveats):
            flagged.append((run["id"], round(row["error_pct"], 1)))
    return flagged


def test_published_dense_runs_the_mfu_caveat_flags_ran_slower_than_predicted(replayed):
    """The caveat reads a prediction above every measured run as an upper bound: on the
    published runs it fires on, the measurement was indeed slower than the prediction. Costed
    as they ran it fires on none; with Hagemann et al.'s trainer costed as fused kernels
    reducing like Megatron (its runs as they joined the corpus), on nine of its layouts
    without recompute, all of which measured slower."""
    now = _mfu_flagged(RUNS)
    assert all(err > 0 for _, err in now), now
    assert now == []
    fused = {"norm_fusion", "eager_elementwise", "zero_grad_allreduce",
             "async_tensor_model_parallel_allreduce", "vocab_parallel_loss",
             "tp_column_parallel_inputs"}
    joined = [{**r, "training": {k: v for k, v in r["training"].items() if k not in fused}}
              if r["source"] == "hagemann-2311.05610" else r for r in RUNS]
    assert _mfu_flagged(joined) == [
        ("hagemann-30b-8k-64g-fa2rms-noac-m1t4p2-sp-132948", 11.7),
        ("hagemann-30b-8k-64g-fa2rms-noac-m1t4p8-sp-132590", 10.9),
        ("hagemann-30b-2k-64g-fa2rms-noac-m1t2p2-sp-131668", 13.2),
        ("hagemann-30b-2k-64g-fa2rms-noac-m1t2p2-nosp-131843", 17.4),
        ("hagemann-30b-2k-64g-fa2rms-noac-m2t4p1-sp-132923", 24.4),
        ("hagemann-65b-2k-128g-fa2rms-noac-m1t2p4-132301", 14.5),
        ("hagemann-65b-2k-64g-fa2rms-noac-m1t2p4-sp-131697", 8.5),
        ("hagemann-65b-2k-64g-fa2rms-noac-m2t4p4-sp-131649", 8.0),
        ("hagemann-65b-2k-64g-fa2rms-noac-m1t4p2-sp-131656", 17.6)]


A100x8 = ClusterSpec.from_preset("dgx-a100", num_nodes=8)


def test_an_a100_plan_above_every_published_run_says_so():
    """Llama 3 8B on 64 A100 without recompute: the free search's winner, 71% MFU, 11 points
    above torchtitan's Llama 2 13B without recompute (60.4%), the best any published dense A100
    run of a model that large measured."""
    est = estimate(ModelSpec.from_preset("llama3-8b"), A100x8,
                   TrainingSpec(global_batch_size=512, seq_length=8192),
                   ParallelPlan(dp=64, zero_stage=2))
    (note,) = [c for c in est.caveats if "MFU" in c]
    best, run_id, _ = best_dense_mfu("a100", "16-bit", est.parameters.total)
    assert est.mfu > best + 0.03
    assert run_id in note and f"{100 * est.mfu:.1f}%" in note
    # With the model's track record there: the MFU at the A100 dense band's median.
    median = MEASURED_OVER_PREDICTED_BY_GPU[("dense", "a100")][3]
    assert (f"held-out dense A100 runs measured a median {median:.3f} times the predicted "
            f"step, which puts it at {100 * est.mfu / median:.1f}%") in note
    # A family without a band of its own (V100: one source) flags the MFU without it.
    v100 = estimate(ModelSpec.from_preset("llama3-8b"), ClusterSpec.from_preset("dgx-2",
                                                                               num_nodes=4),
                    TrainingSpec(global_batch_size=256, seq_length=2048, precision="fp16",
                                 flash_attention=False),
                    ParallelPlan(dp=8, tp=8, zero_stage=1))
    (note,) = [c for c in v100.caveats if "MFU" in c]
    assert note.endswith("read it as an upper bound") and "V100" in note


def test_fine_grained_moe_is_flagged_and_coarse_moe_is_not():
    train = TrainingSpec(global_batch_size=256, seq_length=4096, moe_load_imbalance=1.0)
    h100 = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    fine = estimate(ModelSpec.from_preset("qwen3-30b-a3b"), h100, train,
                    ParallelPlan(dp=16, ep=16, zero_stage=1))
    coarse = estimate(ModelSpec.from_preset("mixtral-8x7b"), h100, train,
                      ParallelPlan(dp=4, tp=4, ep=4, zero_stage=1, sequence_parallel=True))
    assert any("fine-grained MoE (128 experts)" in c for c in fine.caveats)
    assert not any("fine-grained" in c for c in coarse.caveats)
    # The note gives both sides: most such runs measured slower, NeMo AutoModel's faster.
    (note,) = [c for c in fine.caveats if "fine-grained" in c]
    assert "18 of the 20" in note and "up to 145%" in note and "up to 18% faster" in note


def test_deep_interleaving_and_full_memory_are_not_flagged_as_published_runs_ran_them():
    model = ModelSpec.from_preset("llama3-70b")
    h100 = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    train = TrainingSpec(global_batch_size=64, seq_length=4096)
    deep = estimate(model, h100, train, ParallelPlan(dp=1, tp=8, pp=4, vpp=20, zero_stage=1,
                                                     sequence_parallel=True))
    assert deep.layers_per_chunk and max(map(max, deep.layers_per_chunk)) == 1
    assert deep.caveats == []
    # The same plan on a GPU just large enough to hold it (97% full) carries no caveat either.
    tight = h100.model_copy(update={"gpu": h100.gpu.model_copy(
        update={"memory_gib": deep.memory_per_gpu_gib / 0.97})})
    full = estimate(model, tight, train, ParallelPlan(dp=1, tp=8, pp=4, vpp=20, zero_stage=1,
                                                      sequence_parallel=True))
    assert full.fits_in_memory and full.memory_per_gpu_gib > 0.95 * tight.gpu.memory_gib
    assert full.caveats == []


def test_every_published_interleaved_layout_runs_as_its_closed_form():
    """SCHEDULE_MARGIN's premise: on every published interleaved run, the event simulation of
    the schedule (``cost.pipeline.simulate``) and the closed form the estimate uses agree
    within 2.5% (the README quotes it), so none of them carries the schedule caveat."""
    from planner.cost import EfficiencyModel
    from planner.cost.caveats import SCHEDULE_MARGIN
    from planner.cost.tables import CostTables
    from planner.specs import ModelSpec
    from planner.validation.predicted_trace import simulate_step

    gaps = {}
    for run in RUNS:
        if (run["plan"].get("vpp") or 1) == 1 and not run.get("tune", {}).get("vpp"):
            continue
        est, _ = published_accuracy.predict_run(run)
        if est.vpp == 1:
            continue
        m = ModelSpec.model_validate(run["model"])
        c = ClusterSpec.model_validate(run["cluster"])
        t = TrainingSpec.model_validate(run["training"])
        tables = CostTables(m, c, t, EfficiencyModel.model_validate(run.get("efficiency") or {}))
        pipe = (est.step_time_s - est.breakdown["dp_comm"] - est.breakdown["zero_comm"]
                - est.breakdown["optimizer"])
        gaps[run["id"]] = simulate_step(est, tables).makespan / pipe - 1
        assert not any("event simulation" in x for x in est.caveats), run["id"]
    assert len(gaps) >= 20
    assert max(abs(g) for g in gaps.values()) < 0.025 < SCHEDULE_MARGIN, gaps


def test_flash_attention_on_v100_is_flagged():
    """FlashAttention needs Ampere or newer: a V100 plan that assumes it says so and names the
    unsourced rate it is costed at; the same plan without it does not."""
    dgx2 = ClusterSpec.from_preset("dgx-2", num_nodes=2)
    model = ModelSpec.from_preset("llama2-7b")
    for flash in (True, False):
        train = TrainingSpec(global_batch_size=256, seq_length=2048, precision="fp16",
                             flash_attention=flash)
        est = estimate(model, dgx2, train, ParallelPlan(dp=32, zero_stage=1, recompute="full"))
        notes = [c for c in est.caveats if "FlashAttention does not run on V100" in c]
        assert len(notes) == flash
        if flash:
            assert "0.45 of the peak" in notes[0] and "flash_attention" in notes[0]
    a100 = estimate(model, A100x8, TrainingSpec(global_batch_size=256, seq_length=2048),
                    ParallelPlan(dp=64, zero_stage=1, recompute="full"))
    assert not any("FlashAttention does not run" in c for c in a100.caveats)


def test_the_fine_grained_band_before_fsdp2s_fp32_accumulation():
    """README (the latest change): costing FSDP2's fp32 accumulation under torchtitan's
    pipelines (DeepSeek-V3's two runs among the fine-grained ones) moved the fine-grained
    band's high decile from 1.479 to 1.461 and the runs' median error from 29% to 27%.
    Costing torchtitan's MoE layer's own token copies (training.moe_routing, DeepSeek-V3's
    standard-backend run) then moved it to 1.419. Costing Megatron-Core's all-to-all
    dispatcher's sorts by local expert (the latest change) left it there and moved the median
    error to 26%."""
    from tests.cost_history import before_grad_upcast, before_moe_routing, without_chunk_sorts
    fine = [r for r in RUNS if r["split"] == "held_out"
            and model_class(ModelSpec.model_validate(r["model"])) == "fine_grained_moe"]
    for encode, sorts, high, median in (
            (lambda r: before_moe_routing(before_grad_upcast(r)), False, 1.479, 29),
            (before_moe_routing, False, 1.461, 27), (lambda r: r, False, 1.419, 27),
            (lambda r: r, True, 1.419, 26)):
        with contextlib.nullcontext() if sorts else without_chunk_sorts():
            rows = published_accuracy.evaluate_runs([encode(r) for r in fine])
        band = published_accuracy.source_weighted_quantiles(
            [x["measured_step_s"] / x["predicted_step_s"] for x in rows],
            [x["source"] for x in rows])
        assert round(band[2], 3) == high
        assert round(statistics.median(x["error_pct"] for x in rows)) == median


def test_the_dense_band_before_the_per_rank_views():
    """README (the per-rank lists' views, the latest change): before them the dense band was
    0.921-1.263 (median 1.039) over the same 690 runs from 25 sources."""
    from tests.cost_history import without_rank_views
    # (The corpus as it was then: before Megatron-Bridge's MXFP8 and NVFP4 runs, MLPerf v4.0's
    # and v4.1's and IBM's fms-fsdp joined.)
    dense = [r for r in RUNS if r["split"] == "held_out"
             and r["source"] not in ("mlperf-training-v4.0", "mlperf-training-v4.1", "fms-fsdp")
             and r["training"].get("fp8_recipe") != "mxfp8"
             and r["training"]["precision"] != "fp4"
             and model_class(ModelSpec.model_validate(r["model"])) == "dense"]
    with without_rank_views():
        rows = published_accuracy.evaluate_runs(dense)
    low, median, high = published_accuracy.source_weighted_quantiles(
        [x["measured_step_s"] / x["predicted_step_s"] for x in rows],
        [r["source"] for r in dense])
    assert (len(rows), round(low, 3), round(median, 3), round(high, 3)) == (
        690, 0.921, 1.039, 1.263)


def test_the_moe_bands_before_the_dispatchers_sorts():
    """README (the all-to-all dispatcher's sorts, the latest change): before them the coarse
    MoE band was 0.870-1.096 (median 0.905), the fine-grained 0.885-1.419 (median 1.188), and
    the fine-grained errors 18 of 20 slower, up to 159% (median 27%)."""
    from tests.cost_history import without_chunk_sorts
    moe = [r for r in RUNS if r["split"] == "held_out"
           and ModelSpec.model_validate(r["model"]).is_moe]
    with without_chunk_sorts():
        rows = published_accuracy.evaluate_runs(moe)
    bands = {}
    for cls in ("moe", "fine_grained_moe"):
        pairs = [(x["measured_step_s"] / x["predicted_step_s"], r["source"])
                 for r, x in zip(moe, rows, strict=True)
                 if model_class(ModelSpec.model_validate(r["model"])) == cls]
        low, median, high = published_accuracy.source_weighted_quantiles(
            [v for v, _ in pairs], [s for _, s in pairs])
        bands[cls] = (round(low, 3), round(median, 3), round(high, 3))
    assert bands == {"moe": (0.87, 0.905, 1.096), "fine_grained_moe": (0.885, 1.188, 1.419)}
    fine = [x["error_pct"] for r, x in zip(moe, rows, strict=True)
            if ModelSpec.model_validate(r["model"]).experts >= FINE_GRAINED_EXPERTS]
    assert (len(fine), sum(e > 0 for e in fine), round(statistics.median(fine)),
            round(max(fine))) == (20, 18, 27, 159)
