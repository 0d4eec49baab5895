"""Result objects of the public JSON contract (DESIGN.md): one plan's predicted cost."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.vocabulary import Collective, Recompute, Strategy, Tier


class CommunicationItem(BaseModel):
    """One collective a plan issues: which, how big, how often, over whom, on which link."""

    model_config = ConfigDict(frozen=True)

    strategy: Strategy = Field(description="Which parallelism issues it.")
    op: Collective = Field(description="The collective (nccl-tests names, snake_case).")
    message_bytes: float = Field(description="Full buffer size, nccl-tests convention.")
    count_per_step: float = Field(description="Calls per optimizer step on one GPU.")
    group_size: int
    tier: Tier
    algorithm: str = Field(description="Algorithm the cost model picked (cheapest).")
    time_s: float = Field(description="Predicted time of one call.")
    total_time_s: float = Field(description="time_s * count_per_step.")
    exposed_time_s: float = Field(description="Part of total_time_s not hidden under compute.")
    busbw_gb_per_s: float = Field(description="nccl-tests bus bandwidth of one call.")
    source: str = Field("preset", description="Where its alpha-beta came from: 'preset' (the "
                        "cluster spec's links) or the id of the calibration whose fit was used.")


class MemoryBreakdown(BaseModel):
    """Peak memory of the most loaded GPU (GiB), and which pipeline stage it belongs to."""

    model_config = ConfigDict(frozen=True)

    stage: int
    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    zero_buffers_gib: float
    reserved_gib: float = Field(description="CUDA context, workspaces, Transformer Engine's "
                                "userbuffers (training.tp_comm_overlap) and fragmentation.")
    total_gib: float


class NodePlacement(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int = Field(description="The node: torchrun's node rank, or with a fragmented "
                       "allocation its position in the allocation's list.")
    name: str | None = Field(None, description="Its host name, when the allocation named it.")
    local_gpus: list[int] = Field(description="GPUs of the node the plan uses, in rank order.")


class Placement(BaseModel):
    """Which GPUs of which nodes hold the ranks: rank r on node r // nproc_per_node, local GPU
    r mod nproc_per_node (torchrun's numbering; every framework's rank order has tp innermost,
    then cp, dp and pp)."""

    model_config = ConfigDict(frozen=True)

    nnodes: int
    nproc_per_node: int
    nodes: list[NodePlacement] | None = Field(
        None, description="Per node, the GPUs used; null when every node i < nnodes uses its "
        "first nproc_per_node GPUs.")


class LaunchSpec(BaseModel):
    """What it takes to run a plan: framework configs and scheduler artifacts."""

    model_config = ConfigDict(frozen=True)

    nnodes: int
    nproc_per_node: int
    frameworks: list[str] = Field(default_factory=list, description="Frameworks that run this "
                                  "plan as predicted (their artifacts below are set).")
    not_runnable: dict[str, list[str]] = Field(
        default_factory=dict, description="For each other framework, what it lacks.")
    megatron_args: list[str] | None = Field(
        description="Megatron-LM arguments (after the script), or null when Megatron-LM "
        "cannot run the plan as predicted (see not_runnable).")
    torchtitan_toml: str | None = Field(
        description="[training], [parallelism] and [activation_checkpoint] sections of a "
        "torchtitan (v0.2.2) config, or null when torchtitan cannot run the plan as predicted.")
    deepspeed_config: dict | None = Field(description="DeepSpeed JSON, or null when DeepSpeed "
                                          "cannot run the plan as predicted.")
    launcher_framework: str | None = Field(
        None, description="The framework the torchrun, sbatch and Kubernetes artifacts start "
        "(Megatron-LM first, then torchtitan, then DeepSpeed); null when none runs the plan.")
    torchrun: list[str] | None = Field(description="torchrun argv for each node.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment every rank needs for the run to be "
        "the one predicted, beyond the launch files' defaults (e.g. NCCL_NVLS_ENABLE=0 where "
        "the plan is costed without NVLink SHARP on nodes that have it); the sbatch, "
        "Kubernetes and torchrun artifacts set it.")
    node_commands: list[str] | None = Field(
        None, description="Fragmented allocations: per node, its torchrun command with its "
        "--node-rank and CUDA_VISIBLE_DEVICES (the GPUs the plan uses there).")
    hostfile: str | None = Field(None, description="Fragmented allocations: 'name slots=g' "
                                 "per node (DeepSpeed / Open MPI hostfile).")
    slurm_sbatch: str | None = Field(description="A complete sbatch script.")
    kubernetes: str | None = Field(description="A JobSet manifest (YAML).")
    withheld: dict[str, str] = Field(
        default_factory=dict, description="Artifacts not built although a framework runs the "
        "plan, and why (e.g. sbatch on a cluster of pools: Slurm would not put each node rank "
        "on its pool's nodes).")
    notes: list[str] = Field(default_factory=list, description="What to know when launching.")


class Parameters(BaseModel):
    """Parameter counts of the model (dense models: active == total)."""

    model_config = ConfigDict(frozen=True)

    total: int = Field(description="Every weight, all experts included.")
    active: int = Field(description="Weights one token uses: all but the routed experts it is "
                        "not sent to (the embedding included).")


class StagePool(BaseModel):
    """Clusters of pools: where one pipeline stage runs."""

    model_config = ConfigDict(frozen=True)

    stage: int
    pool: int = Field(description="Index of the pool in cluster.pools.")
    gpu: str = Field(description="The pool's GPU.")
    layers: int = Field(description="Transformer layers of the stage.")
    time_per_microbatch_s: float | None = Field(
        None, description="Forward and backward of one micro-batch on the stage, s.")
    memory_gib: float | None = Field(None, description="Peak memory of a GPU of the stage.")


class StepTimeBand(BaseModel):
    """What held-out published runs of the model's class measured against the model's
    prediction, applied to this one: eight in ten fell between ``low_s`` and ``high_s``."""

    model_config = ConfigDict(frozen=True)

    model_class: str = Field(description="dense, moe (fewer than 128 experts) or "
                             "fine_grained_moe (128 or more); 'anchored' where the request "
                             "anchors the model on a measured run (efficiency.compute_scale "
                             "other than 1): then the runs are those of every class, each "
                             "predicted from another run of its source on the same GPU.")
    gpu: str | None = Field(None, description="The GPU family (a100, h100) whose held-out runs "
                            "of the class set the band, where at least five sources ran the "
                            "class on it; null: the class's runs on every GPU.")
    runs: int = Field(description="Held-out published runs of the class behind the band.")
    sources: int = Field(description="The sources of those runs; each weighs the same.")
    low_s: float = Field(description="Step time times the 10th percentile of their measured / "
                         "predicted step time (each source weighing the same).")
    median_s: float = Field(description="Step time times the median of that ratio.")
    high_s: float = Field(description="Step time times its 90th percentile.")
    anchor: str | None = Field(None, description="Anchored answers: where the speeds came from "
                               "(efficiency.anchor), the stored anchor's id when the service "
                               "took them from the cluster's anchor.")


class PlanEstimate(BaseModel):
    """A plan with its predicted step time, throughput, memory and time breakdown."""

    model_config = ConfigDict(frozen=True)

    rank: int | None = None
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int = Field(1, description="Expert parallel degree (MoE; 1 for dense models).")
    etp: int = Field(1, description="Expert tensor parallel degree (MoE).")
    vpp: int
    micro_batch_size: int
    grad_accum_steps: int
    recompute: Recompute
    recompute_num_layers: int | None = Field(
        None, description="Full recompute of only the first N layers of each model chunk "
        "(Megatron-LM --recompute-method block); null: every layer (or no full recompute).")
    cpu_offload_layers: int = Field(
        0, description="Transformer layers whose activations go to host memory between the "
        "forward and the backward (Megatron-Core --cpu-offloading-num-layers); 0: none.")
    zero_stage: int
    dp_replicate: int = Field(
        1, description="Hybrid sharding: replicas of the ZeRO-sharded state (ZeRO shards over "
        "dp / dp_replicate ranks times cp); 1: sharded over every data-parallel rank.")
    sequence_parallel: bool
    layers_per_stage: list[int]
    layers_per_chunk: list[list[int]] | None = Field(
        None, description="Interleaved plans: transformer layers of each stage's model chunks.")
    pipeline_layout: str | None = Field(
        None, description="How the layers split: even, embedding_loss (the embedding and the "
        "loss count as a layer each), first_last (first and last stage differ), custom.")
    microbatch_group_size: int | None = Field(
        None, description="Interleaved plans: micro-batches per group through each model chunk "
        "(Megatron-LM's --microbatch-group-size-per-virtual-pipeline-stage).")
    mtp_standalone: bool = Field(
        False, description="The multi-token prediction modules run in the stage before the "
        "last (its last model chunk), not beside the loss.")
    gpus_used: int
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float = Field(description="Model FLOPs (no recompute; MoE: the active "
                                  "experts at the mean load) per second per GPU.")
    hardware_tflops_per_gpu: float = Field(description="FLOPs executed, recompute included.")
    mfu: float = Field(description="tflops_per_gpu over the GPU's dense peak.")
    memory_per_gpu_gib: float
    memory_capacity_gib: float
    fits_in_memory: bool
    memory: MemoryBreakdown
    breakdown: dict[str, float] = Field(description="Seconds per component; sums to step_time_s.")
    communication: list[CommunicationItem]
    frameworks: list[str] = Field(default_factory=list, description="Frameworks that run this "
                                  "plan as predicted: megatron, torchtitan, deepspeed.")
    caveats: list[str] = Field(
        default_factory=list, description="Where published runs do not back this prediction "
        "(an MFU above the best any published dense run measured on the GPU; a fine-grained "
        "MoE model, on which every published run ran slower than predicted): empty when they "
        "do.")
    step_time_band: StepTimeBand | None = Field(
        None, description="The step time that held-out published runs of this model class "
        "would have measured given this prediction (10th percentile, median, 90th percentile "
        "of their measured / predicted, each source weighing the same): the model's track "
        "record, not a cap.")
    placement: Placement | None = Field(None, description="Which GPUs hold the ranks.")
    parameters: Parameters | None = Field(None, description="The model's total and active "
                                          "parameter counts.")
    stages: list[StagePool] | None = Field(
        None, description="Clusters of pools: each pipeline stage's pool, GPU and layers.")
    launch: LaunchSpec | None = Field(None, description="How to run this plan.")

    def stage_runs(self) -> str:
        """'0-1: pool 0 (h100-sxm); 2-5: pool 1 (a100-80gb)': the runs of stages on a pool."""
        runs: list[list] = []
        for s in self.stages or ():
            if runs and runs[-1][2] == s.pool:
                runs[-1][1] = s.stage
            else:
                runs.append([s.stage, s.stage, s.pool, s.gpu])
        return "; ".join(f"{a}{'' if a == b else f'-{b}'}: pool {j} ({gpu})"
                         for a, b, j, gpu in runs)
