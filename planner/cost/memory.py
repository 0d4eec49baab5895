"""Peak memory of each pipeline stage's GPU.

Model states (Rajbhandari et al., ZeRO, SC'20, section 3.1 and 5): per parameter, 16-bit
weights (``param_bytes``), gradients (``grad_bytes``; Megatron keeps fp32 main grads) and K bytes
of optimizer state (12 for mixed-precision Adam: fp32 master, momentum, variance). ZeRO stage 1
shards the optimizer states over the data-parallel group, stage 2 also the gradients, stage 3
also the weights (plus a prefetch buffer of two gathered layers):

    stage 0: (2 + g + K) P     stage 1: (2 + g) P + K P / Nd
    stage 2: 2 P + (g + K) P / Nd     stage 3: (2 + g + K) P / Nd

Activations (Korthikanti et al., MLSys'23): per layer and micro-batch from ``layers.py``, times
the micro-batches a stage holds in flight: stage i of a 1F1B pipeline holds min(p - i, m); with
v interleaved chunks it holds (2 (p - i - 1) + (v - 1) p + 1) chunk-micro-batches of 1/v of
its layers, i.e. p + (p - 1)/v micro-batches on the first stage (Narayanan et al. SC'21). The
last stage also holds the fp32 logits (4 s b V / t). Full recompute adds one layer's complete
activations while that layer is recomputed. A fixed reserve and a fragmentation share of the
activations are added (``EfficiencyModel``).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.efficiency import EfficiencyModel
from planner.cost.layers import HeadWork, LayerWork
from planner.specs import ModelSpec, ParallelPlan, TrainingSpec

GIB = 2**30


@dataclass(frozen=True)
class StageMemory:
    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    zero_buffers: float
    reserved: float

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations
                + self.zero_buffers + self.reserved)


def stage_params(model: ModelSpec, plan: ParallelPlan, layers: int, stage: int) -> float:
    """Parameters one GPU of ``stage`` holds before ZeRO sharding (TP splits them)."""
    params = layers * model.params_per_layer
    last = stage == plan.pp - 1
    if stage == 0:
        params += model.embedding_params
    if last:
        # Untied: the LM head. Tied across a pipeline: the last stage keeps its own copy of
        # the embedding matrix for the head (Megatron synchronises the two copies).
        params += model.lm_head_params or (model.embedding_params if plan.pp > 1 else 0)
    return params / plan.tp


def model_state_bytes(
    params: float, training: TrainingSpec, zero_stage: int, nd: int
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes for ``params`` parameters under ZeRO
    ``zero_stage`` over ``nd`` data-parallel ranks (Rajbhandari et al. SC'20, Figure 1)."""
    weights = params * training.param_bytes / (nd if zero_stage >= 3 else 1)
    grads = params * training.grad_bytes / (nd if zero_stage >= 2 else 1)
    optim = params * training.optimizer_state_bytes / (nd if zero_stage >= 1 else 1)
    return weights, grads, optim


def in_flight_microbatches(plan: ParallelPlan, stage: int, m: int) -> float:
    """Micro-batches (in units of the stage's full layer set) whose activations are held."""
    p, v = plan.pp, plan.vpp
    if v == 1:
        return float(min(p - stage, m))
    chunks = 2 * (p - stage - 1) + (v - 1) * p + 1
    return min(chunks, m * v) / v


def stage_memory(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan, eff: EfficiencyModel,
    lw: LayerWork, hw: HeadWork, layers: int, stage: int, m: int,
) -> StageMemory:
    P = stage_params(model, plan, layers, stage)
    nd = plan.dp * plan.cp   # the distributed optimizer shards over data x context parallel
    z = plan.zero_stage
    weights, grads, optim = model_state_bytes(P, training, z, nd)
    zero_buf = (2 * model.params_per_layer / plan.tp * training.param_bytes) if z >= 3 else 0.0
    acts = layers * lw.stored_bytes * in_flight_microbatches(plan, stage, m)
    if plan.recompute == "full" and layers:
        acts += lw.working_bytes
    if stage == plan.pp - 1:
        acts += hw.logits_bytes
    reserved = eff.memory_reserve_gib * GIB + eff.memory_fragmentation * acts
    return StageMemory(stage, weights, grads, optim, acts, zero_buf, reserved)
