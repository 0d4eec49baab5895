"""Cloud instances as cluster presets (planner/specs/cloud.py), checked against the providers'
pages and AWS's own nccl-tests output; nccl-tests logs trimmed of their rank lines, given the
group they ran on; instance types in published tables' hardware text."""

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.calibration.fit import fit_samples, predict
from planner.calibration.model import CalibrationIn
from planner.calibration.nccl_tests import NcclTestsFormatError, parse
from planner.cli.main import app
from planner.cost import EfficiencyModel, estimate
from planner.cost.tables import CostTables
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from tests.nccl_logs import make_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import published_tables  # noqa: E402

LOGS = Path(__file__).parent / "data" / "aws_nccl_tests"
GIB = 2**30

# name: (GPU preset, GiB, NVLink GB/s per GPU and direction, network GB/s per node and
# direction, link kind, NICs, NVLink SHARP): the module docstring's sources.
EXPECTED = {
    "aws-p4d": ("a100-40gb", 40, 300, 50, "roce", 4, None),        # 400 Gbps EFA, 4 cards
    "aws-p4de": ("a100-80gb", 80, 300, 50, "roce", 4, None),
    "aws-p5": ("h100-sxm", 80, 450, 400, "roce", 32, 1.30),        # 3,200 Gbps, 32 EFA
    "aws-p5e": ("h200-sxm", 141, 450, 400, "roce", 32, 1.30),
    "aws-p5en": ("h200-sxm", 141, 450, 400, "roce", 16, 1.30),     # EFAv3, 16 devices
    "azure-nd-a100-v4": ("a100-40gb", 40, 300, 200, "infiniband", 8, None),   # 8 x 200 Gb/s
    "azure-ndm-a100-v4": ("a100-80gb", 80, 300, 200, "infiniband", 8, None),
    "azure-nd-h100-v5": ("h100-sxm", 80, 450, 400, "infiniband", 8, 1.30),    # 8 x 400 Gbps
    "azure-nd-h200-v5": ("h200-sxm", 141, 450, 400, "infiniband", 8, 1.30),
    "gcp-a3-ultra": ("h200-sxm", 141, 450, 400, "roce", 8, 1.30),  # 8 CX7, 3,200 Gbps
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cloud_presets_are_the_instances_as_their_pages_state_them(name):
    gpu, gib, nvlink, network, kind, nics, nvls = EXPECTED[name]
    c = ClusterSpec.model_validate({"preset": name, "num_nodes": 4})
    assert (c.gpu.name, c.gpu.memory_gib, c.gpus_per_node) == (gpu, gib, 8)
    assert (c.intra_node.kind, c.intra_node.bandwidth_gb_per_s) == ("nvswitch", nvlink)
    assert (c.inter_node.kind, c.inter_node.bandwidth_gb_per_s,
            c.inter_node.nics_per_node) == (kind, network, nics)
    assert c.intra_node.nvls_busbw_ratio == nvls
    assert c.num_gpus == 32 and ClusterSpec.model_validate(name).name == name


def _aws(name: str):
    return parse((LOGS / f"{name}.txt").read_text(), ranks=16, nodes=2)


def _model_busbw(preset: str, nbytes: float, op: str = "all_reduce", nodes: int = 2
                 ) -> tuple[float, float]:
    """(bus bandwidth GB/s, seconds) of a collective over all the GPUs of ``nodes`` nodes of
    the preset, as the cost model prices it."""
    cluster = ClusterSpec.model_validate({"preset": preset, "num_nodes": nodes})
    tables = CostTables(ModelSpec.from_preset("llama3-8b"), cluster,
                        TrainingSpec.model_validate({"global_batch_size": 16,
                                                     "seq_length": 2048}), EfficiencyModel())
    cost = tables.collective(op, nbytes, tables.group(8 * nodes, 1, 8))
    return cost.busbw_gb_per_s, cost.time_s


def _measured(log, size):
    (row,) = [r for r in log.rows if r["size"] == size]
    return row


def test_aws_logs_read_as_sixteen_ranks_on_two_instances():
    for name, busbw_2g in (("p4de", 78.33), ("p5", 443.72)):
        log = _aws(name)
        assert (log.op, log.ranks, log.tier, log.hosts) == ("all_reduce", 16, "inter_node", [])
        assert _measured(log, 2 * GIB)["busbw_gb_per_s"] == busbw_2g
        assert {s.group_size for s in log.samples()} == {16}
        (fit,) = fit_samples(log.samples())[0]
        assert (fit.tier, fit.group_size, fit.quality) == ("inter_node", 16, "good")
        # The fit gives the measured bus bandwidth back at 2 GiB within 3%.
        t = predict(fit, 2 * GIB) * 1e-6
        assert 2 * GIB / t * 2 * 15 / 16 / 1e9 == pytest.approx(busbw_2g, rel=0.03)


def test_what_the_presets_get_right_and_wrong_against_aws_measurements():
    p5, p4de = _aws("p5"), _aws("p4de")
    # p5 at 256 MiB, the gradient buckets' size: the ring across nodes, within 5%.
    model, _ = _model_busbw("aws-p5", 256 * 2**20)
    assert _measured(p5, 256 * 2**20)["busbw_gb_per_s"] == 342.81
    assert model == pytest.approx(342.81, rel=0.05) and round(model) == 328
    # Two instances' large messages: NCCL's tree on two nodes sends half the ring's bytes over
    # the network, which the model does not cost (module docstring): 444 and 78.3 measured.
    big_p5, _ = _model_busbw("aws-p5", 2 * GIB)
    big_p4de, _ = _model_busbw("aws-p4de", 2 * GIB)
    assert (round(big_p5), round(big_p4de, 1)) == (338, 42.5)
    assert 443.72 / big_p5 > 1.3 and 78.33 / big_p4de > 1.8
    # Small messages: EFA's per-message cost, 161-164 us and 65-75 us against 12.5.
    _, small = _model_busbw("aws-p4de", 8)
    assert round(small * 1e6, 1) == 12.5
    assert _measured(p4de, 8)["time_us"] > 160 and 60 < _measured(p5, 8)["time_us"] < 75


def test_a_calibration_from_the_aws_log_costs_the_data_parallel_reduction_as_measured():
    """The user's way on such a cluster: the preset, and the nccl-tests log as its
    calibration. DDP's all-reduce of an 8B model over 16 GPUs of two p4de instances."""
    log = _aws("p4de")
    fits, _, _ = fit_samples(log.samples())
    cal = CalibrationIn(id="aws-p4de-2", fits=tuple(fits))
    model = ModelSpec.from_preset("llama3-8b")
    cluster = ClusterSpec.model_validate({"preset": "aws-p4de", "num_nodes": 2})
    training = TrainingSpec.model_validate({"global_batch_size": 16, "seq_length": 2048,
                                            "overlap_grad_reduce": False})
    plan = ParallelPlan(dp=16, micro_batch_size=1, recompute="full", zero_stage=0)
    preset = estimate(model, cluster, training, plan)
    measured = estimate(model, cluster, training, plan, calibration=cal)
    dp = [x for x in measured.communication if x.strategy == "DP"]
    assert dp and {x.source for x in dp} == {"aws-p4de-2"}
    assert {x.source for x in preset.communication if x.strategy == "DP"} == {"preset"}
    # The measured buckets run at 1.7-1.9x the ring's bandwidth (70-79 against 42.5 GB/s).
    ratio = preset.breakdown["dp_comm"] / measured.breakdown["dp_comm"]
    assert 1.6 < ratio < 2.0
    assert measured.step_time_s < preset.step_time_s
    # The README's figures ('Cloud instances as presets').
    assert (round(preset.breakdown["dp_comm"], 2), round(measured.breakdown["dp_comm"], 2),
            round(preset.step_time_s, 2), round(measured.step_time_s, 2)) == (
        1.42, 0.76, 2.18, 1.52)


def test_logs_without_rank_lines_take_the_group_they_are_given():
    text, _, _ = make_log(op="all_reduce", ranks=8)      # with its '#  Rank' lines
    assert parse(text).ranks == 8
    assert parse(text, ranks=8, nodes=1).ranks == 8
    with pytest.raises(NcclTestsFormatError, match="ranks 16 given, but the log's '#  Rank' "
                       "lines show 8"):
        parse(text, ranks=16)
    with pytest.raises(NcclTestsFormatError, match="nodes 2 given"):
        parse(text, nodes=2)
    trimmed = (LOGS / "p4de.txt").read_text()
    bare = parse(trimmed)
    assert (bare.ranks, bare.tier) == (2, "intra_node") and "assumed 2" in bare.notes[-1]
    one = parse(trimmed, ranks=8)
    assert (one.ranks, one.tier) == (8, "intra_node") and "on one node" in one.notes[-1]
    for bad, match in (({"ranks": 0}, "ranks must be at least 1"),
                       ({"ranks": 16, "nodes": 20}, "nodes 20 is more than the 16 ranks"),
                       ({"nodes": 2}, "nodes 2 given without the ranks")):
        with pytest.raises(NcclTestsFormatError, match=match) as err:
            parse(trimmed, **bad)
        assert not str(err.value).startswith("line")


def test_the_cli_reads_a_trimmed_log_given_its_group(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(LOGS / "p5.txt"),
                              "--ranks", "16", "--nodes", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert '"tier": "inter_node"' in res.stdout and '"group_size": 16' in res.stdout
    res = runner.invoke(app, ["calibrate", "import-nccl-tests", str(LOGS / "p5.txt"),
                              "--ranks", "16", "--nodes", "20"])
    assert res.exit_code != 0 and "nodes 20 is more than the 16 ranks" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("hardware,preset", [
    ("64 x p4d.24xlarge (8 x A100 40GB, 400 Gbps EFA)", "aws-p4d"),
    ("AWS p5 instances", "aws-p5"),
    ("Amazon EC2 P5e", "aws-p5e"),
    ("p5en.48xlarge", "aws-p5en"),
    ("Standard_ND96isr_H100_v5", "azure-nd-h100-v5"),
    ("Azure ND A100 v4", "azure-nd-a100-v4"),
    ("Standard_ND96amsr_A100_v4", "azure-ndm-a100-v4"),
    ("a3-ultragpu-8g", "gcp-a3-ultra"),
    # Without a cloud's words a 'p5' is no instance: the GPU the text names decides.
    ("8x H100 80GB, p5 partition", "dgx-h100"),
])
def test_a_table_naming_an_instance_type_runs_on_its_preset(hardware, preset):
    cluster, name = published_tables._cluster({"hardware": hardware}, {"gpus": 64})
    assert name == preset and cluster["preset"] == preset and cluster["num_nodes"] == 8
    assert ClusterSpec.model_validate(cluster).num_gpus == 64


def test_plans_across_more_than_two_efa_instances_carry_the_measured_collectives():
    """The caveat's figures are the Ultra-Scale Playbook's (its committed data file), at the
    largest node count measured up to the plan's; two instances, where the presets cost
    close to what was measured, and non-AWS clusters carry none."""
    import json

    from planner.cost import caveats as cv

    data = json.loads((Path(__file__).parents[1] / "benchmarks" / "data"
                       / "efa_collectives_playbook.json").read_text())
    assert tuple(data["nodes"]) == cv.EFA_MEASURED_NODES
    assert tuple(data["all_reduce"]) == cv.EFA_MEASURED_ALL_REDUCE
    assert tuple(data["all_gather"]) == cv.EFA_MEASURED_ALL_GATHER
    model = ModelSpec.from_preset("llama3-70b")
    training = TrainingSpec.model_validate({"global_batch_size": 256, "seq_length": 4096})
    plan = ParallelPlan(dp=8, tp=8, pp=4, micro_batch_size=1, recompute="selective",
                        zero_stage=1, sequence_parallel=True)
    cluster = ClusterSpec.model_validate({"preset": "aws-p5", "num_nodes": 32})
    (note,) = [n for n in estimate(model, cluster, training, plan).caveats if "EFA" in n]
    assert note.startswith("collectives across 32 EFA instances")
    assert ("all_gather fell from 184.6 GB/s of bus bandwidth on 2 nodes to 28 on 32 (15%) and "
            "all_reduce from 361.7 to 64.9 (18%)") in note
    # Another instance type gets the fall, not p5's rates (p4de's network is an eighth of it).
    p4de = ClusterSpec.model_validate({"preset": "aws-p4de", "num_nodes": 20})
    assert "to 55 on 16 (30%) and all_reduce from 361.7 to 84.7 (23%)" in " ".join(
        cv.caveats(model, p4de, training, mfu=0.3))
    big = ClusterSpec.model_validate({"preset": "aws-p5", "num_nodes": 128})
    assert "to 11 on 64 (6%)" in " ".join(cv.caveats(model, big, training, mfu=0.3))
    for preset, nodes in (("aws-p5", 2), ("dgx-h100", 32), ("azure-nd-h100-v5", 32)):
        cluster = ClusterSpec.model_validate({"preset": preset, "num_nodes": nodes})
        assert not any("EFA" in n for n in cv.caveats(model, cluster, training, mfu=0.3))


def test_the_p5_presets_rings_against_the_playbooks_efa_fall():
    """README ('Estimate one plan', the EFA caveat): what aws-p5 costs of 256 MB all_gather and
    all_reduce over 2 to 64 nodes (bus bandwidth, GB/s), beside the measured fall."""
    costed = {op: [round(_model_busbw("aws-p5", 256 * 2**20, op, n)[0])
                   for n in (2, 4, 8, 16, 32, 64)] for op in ("all_gather", "all_reduce")}
    assert costed == {"all_gather": [328, 319, 285, 254, 222, 183],
                      "all_reduce": [328, 321, 305, 287, 268, 248]}

