"""The constants of the step model that are not properties of a GPU or a link: kernel and
scheduling overheads, compute-communication interference, memory reserves. A request can
override any of them (``"efficiency": {...}``); the GPU spec carries the achieved rates
(``matmul_efficiency``, ``attention_efficiency``, ``hbm_efficiency``, ``sm_count``), which
these fields may also override.

Sources of the defaults (measured micro-benchmarks, except the two marked fitted):
- ``kernel_overhead_us`` 2.5: back-to-back kernels on one stream, fitted fixed cost 2.55 us on
  A100 and 2.43 us on H200 (RRZE-HPC/gpu-benches, gpu-small-kernels repeated-stream fit).
- ``matmul_half_dim`` 256: the GEMM main loop's prologue and epilogue, in units of K (the
  reduction dimension) on an A100 SM, scaled by an SM's tensor rate on other GPUs (the fixed
  part takes the same time while the loop runs faster: H100's best-shaped GEMMs need K = 13312
  where A100's peak at K = 5120, stas00/ml-engineering MAMF table); small-K GEMMs lose that
  share (the tile mechanism of NVIDIA's matrix multiplication guide). No micro-benchmark
  isolates its size, so it is fitted: the one value of 64, 128, 256 and 512 that, with the
  per-micro-batch overhead and the sustained GEMM rates, fits the ``fit`` runs best
  (``benchmarks/fit_constants.py``).
- ``attention_half_seq`` 500: fused causal attention reaches half its long-sequence rate at
  about 500 keys (fits of the FlashAttention benchmark figures to s / (s + s0), within 7%);
  a named kernel (``TrainingSpec.attention_kernel``) has its own per pass.
- ``overlap_slowdown`` 0.15: compute runs 15% slower while a collective runs beside it
  (communication kernels take SMs and HBM bandwidth; 18.9% average, 40% maximum measured on
  A100/H100 by arXiv 2507.03114; NCCL and Transformer Engine reserve 8-24 of 132 SMs).
- ``copy_call_us`` 6: host time to issue one small device-to-device copy; submitting one
  ``cudaMemcpyAsync`` costs 5-7 us per call (Wu et al., DualPath, arXiv 2602.21548, section
  5.2). Only plans that copy per rank pay it (``TrainingSpec.zero3_per_rank_copies``).
- ``view_call_us`` 2: host time of one eager PyTorch op called from Python that launches no
  kernel (a view: ``narrow``, ``view``); "approx 2 us. Approx half of it is python parsing
  overhead" for a small eager op in 2020 (N. Gimelshein, PyTorch maintainer, pytorch/pytorch
  issue 41383). Paid per rank by frameworks that build the per-rank lists of
  ``zero3_per_rank_copies`` in a Python loop (DeepSpeed 0.3's ``_allgather_param`` and
  ``_reduce_scatter_gradient``).
- ``microbatch_overhead_us`` 100: host work per micro-batch per stage (data, schedule
  bookkeeping, p2p set-up) that is not hidden behind the GPU; fitted with ``matmul_half_dim``:
  the one value of 100, 300, 1,000 and 3,000 us that fits the ``fit`` runs best.
- ``layer_host_floor_us`` 0: no floor by default. A stack whose Python issues each layer's
  kernels more slowly than small GEMMs run them has one: nanotron's single-node runs in the
  Ultra-Scale Playbook took 3.0-4.1 ms a layer a micro-batch (forward and backward, 3.8 at the
  median) wherever the model's kernels took less than 3.2 ms (14 runs, 1B to 8B models at TP
  2-8, one sequence a micro-batch; ``benchmarks/data/tables/ultrascale_playbook_1node.json``,
  ``tests/test_host_floor.py``). A user of such a stack sets it.
- ``compute_scale`` 1: no default to source; it is the one number a measured step of the
  user's own stack sets (``planner.calibration.anchor``): how fast that stack's kernels run
  against these rates, whatever the reason (its software's era, its kernels, its clocks).
- ``network_scale`` 1: likewise, the bandwidth the stack's collectives reach across nodes
  against the cluster spec's (fewer NICs than the spec, a congested fabric, a framework's
  slow reduction), which two or more measured steps with different traffic set.
- ``tp_comm_overlap`` 0.8 where ``TrainingSpec.tp_comm_overlap`` runs the overlap
  (``TP_COMM_OVERLAP_SHARE``): no micro-benchmark isolates the share of the blocking TP
  collectives that Transformer Engine's userbuffers or torchtitan's AsyncTP hide, so it is the
  value the published-run corpus gives the runs that used them (``benchmarks/table_rules.py``
  ``overlap``: NVIDIA's recipes of 2023 on and the runs that name AsyncTP), not fitted.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ATTENTION_HALF_SEQ = 500.0
# The share of the blocking TP collectives hidden where training.tp_comm_overlap runs the
# overlap and efficiency.tp_comm_overlap does not say (the module's sources).
TP_COMM_OVERLAP_SHARE = 0.8


class EfficiencyModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    matmul_peak_fraction: float | None = Field(
        None, ge=1e-3, le=1,
        description="Fraction of the dense peak the best-shaped GEMMs reach. Default: the GPU's "
        "matmul_efficiency."
    )
    matmul_half_dim: float = Field(
        256.0, ge=0, le=1e6, description="GEMM prologue and epilogue in units of the reduction "
        "dimension K: a GEMM costs as if K were K + this (K = this halves a GEMM's rate)."
    )
    attention_fraction: float | None = Field(
        None, ge=1e-3, le=1, description="Fused attention's long-sequence fraction of the "
        "16-bit peak. Default: the GPU's attention_efficiency."
    )
    attention_half_seq: float | None = Field(
        None, ge=0, le=1e8, description="Keys per chunk at which fused attention runs at half "
        "its long-sequence rate. Default: 500 for the GPU's default kernel, a named kernel's "
        "own (training.attention_kernel)."
    )
    hbm_efficiency: float | None = Field(
        None, ge=1e-3, le=1, description="Fraction of HBM bandwidth memory-bound kernels reach. "
        "Default: the GPU's hbm_efficiency."
    )
    kernel_overhead_us: float = Field(
        2.5, ge=0, le=1e4, description="Fixed time of every kernel (launch, ramp-up, tail), us."
    )
    overlap_slowdown: float = Field(
        0.15, ge=0, le=2, description="Compute slows by this fraction while a collective "
        "runs beside it (shared SMs and HBM)."
    )
    copy_call_us: float = Field(
        6.0, ge=0, le=1e4, description="Host time to issue one small device copy "
        "(cudaMemcpyAsync), us; paid group-size times per ZeRO-3 gather when the gather copies "
        "out per rank (TrainingSpec.zero3_per_rank_copies)."
    )
    view_call_us: float = Field(
        2.0, ge=0, le=1e4, description="Host time of one eager tensor view (narrow, view) "
        "called from Python, us; paid per rank of each ZeRO-3 gather (one narrow) and "
        "reduce-scatter (a view and a narrow) whose per-rank list a Python loop builds "
        "(TrainingSpec.zero3_per_rank_copies)."
    )
    microbatch_overhead_us: float = Field(
        100.0, ge=0, le=1e7, description="Host time per micro-batch per pipeline stage that the "
        "GPU waits for, us."
    )
    layer_host_floor_us: float = Field(
        0.0, ge=0, le=1e7, description="The least time one transformer layer takes per "
        "micro-batch, forward and backward together, whatever its kernels, us: the host time "
        "an eager stack spends issuing a layer's kernels and collectives, which sets the pace "
        "when the GPU runs them faster (a third of it in the forward, and in a full recompute's "
        "rerun, two thirds in the backward). Default 0: no floor. nanotron's single-node runs "
        "in the Ultra-Scale Playbook took about 3,800 us (README, 'A new stack')."
    )
    tp_comm_overlap: float | None = Field(
        None, ge=0, le=1, description="Share of TP's blocking collectives (the forward's, and "
        "with sequence parallelism and Megatron-Core's backward its output-gradient gathers) "
        "hidden under the GEMMs. Default: 0.8 where training.tp_comm_overlap runs the overlap (on "
        "sequence-parallel plans whose TP group sits inside a node), else 0. A value set "
        "here is that share on every TP plan, whatever training.tp_comm_overlap says (as "
        "before that setting existed); the launch files turn the overlap on only with the "
        "setting, and where they do not, launch.notes says the prediction hides what they "
        "do not run."
    )
    memory_reserve_gib: float = Field(
        1.5, ge=0, le=1e4,
        description="Per-GPU memory for the CUDA context, cuBLAS and NCCL workspaces."
    )
    memory_fragmentation: float = Field(
        0.1, ge=0, le=1, description="Allocator fragmentation, as a fraction of activation memory."
    )
    compute_scale: float = Field(
        1.0, ge=0.05, le=20, description="Speed of every kernel (GEMMs, attention, memory-bound "
        "work) against the model's rates: 0.8 runs each 1 / 0.8 = 1.25 times as long, its fixed "
        "launch cost aside; collectives and host time do not change. Fitted to measured steps "
        "of your own stack by `planner calibrate anchor` (POST /v1/anchors)."
    )
    network_scale: float = Field(
        1.0, ge=0.01, le=10, description="Bandwidth of every inter-node link against the "
        "cluster spec's: 0.5 moves each byte across nodes in twice the time (latencies do not "
        "change). Fitted with compute_scale to two or more measured steps by `planner "
        "calibrate anchor` where they call for it."
    )
    anchor: str | None = Field(
        None, max_length=64, description="Where compute_scale and network_scale came from, "
        "shown in the step_time_band of anchored answers: the service sets the stored anchor's "
        "id (a calibration of the cluster) when it takes them from one; a label of your own "
        "otherwise. Costs nothing."
    )

    @property
    def anchored(self) -> bool:
        """Whether the speeds were fitted to measured runs of the stack (``compute_scale`` or
        ``network_scale`` other than 1): the estimate's band is then the anchored runs'."""
        return self.compute_scale != 1 or self.network_scale != 1
