"""All-to-all context parallelism (``TrainingSpec.ring_attention`` 'a2a'): DeepSpeed-Ulysses'
scheme as Transformer Engine runs it for Megatron-Core (``--cp-comm-type a2a``).

Jacobs et al., "DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long
Sequence Transformer Models" (2023, arXiv 2309.14509), section 3: each of the cp ranks holds
s / cp tokens of every head; an all-to-all before attention regroups Q, K and V so that each
rank holds all s tokens of heads / cp heads, the attention runs unchanged on the whole
sequence, and an all-to-all after it regroups the output back by tokens. The backward does the
same to the output gradient and to the Q, K, V gradients. Per layer and pass a rank sends
(cp - 1) / cp of its share of Q, K, V and O ("communication volume per link ... 4 N h / P",
section 3.2), so the volume per rank shrinks as cp grows, where a ring's K,V exchange does not.

Transformer Engine's ``AttnFuncWithCPAndQKVOA2A`` (``transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py``, read at d0067d0), with ``flash_attn_a2a_communicate``:

- four ``all_to_all_single`` calls a pass: Q, K and V before the attention, pipelined with one
  another but all waited for before the kernel, the output after it (forward); the output
  gradient, then the Q, K, V gradients (backward). Nothing computes beside them: each is
  exposed.
- each exchanged tensor is copied twice around its all-to-all: the heads moved to the front
  (``movedim(...).contiguous()``) before, the sequence chunks put back in order
  (``index_select``, load-balanced causal chunks) after, or the reverse; 4 bytes a 16-bit
  element, read and written, per copy pair.
- the attention runs once on the whole sequence with heads / cp heads (one kernel, no ring
  steps), causal, the FLOPs of s / cp queries of every head.
- it asserts ``num_heads % cp_size == 0`` for Q and for K, V (the heads on one tensor-parallel
  rank), seq_len % 2 == 0, and runs only with fused or flash attention; no bias, no padding
  mask in bshd/sbhd (``planner.specs.plan.a2a_cp_violation`` refuses the rest).

Saved for the backward: Q, K, V and the output at s tokens of heads / cp heads, the same
elements as s / cp tokens of every head: memory is that of the ring.
"""

from __future__ import annotations

from planner.specs import ModelSpec, TrainingSpec

# all_to_all_single calls a pass (Q, K, V and O forward; dO, dQ, dK, dV backward).
A2A_CALLS_PER_PASS = 4
# Copies around each exchanged tensor (heads to the front before, chunks reordered after).
COPIES_PER_TENSOR = 2


def uses_a2a(training: TrainingSpec, cp: int) -> bool:
    """Whether a plan of ``cp`` runs all-to-all context parallelism."""
    return cp > 1 and training.ring_attention == "a2a"


def a2a_tensor_elems(model: ModelSpec, tokens: float, tp: int) -> tuple[float, float, float]:
    """Elements of one rank's Q, of each of its K and V, and of its attention output, for
    ``tokens`` local tokens (s / cp of a sequence times the micro-batch) on tp ranks."""
    return (tokens * model.q_width / tp, tokens * model.kv_width / tp,
            tokens * model.o_width / tp)


def a2a_copy_bytes(model: ModelSpec, tokens: float, tp: int, activation_bytes: int) -> float:
    """HBM bytes of the copies around one pass's four all-to-alls (forward or backward: the
    same tensors' sizes)."""
    q, kv, o = a2a_tensor_elems(model, tokens, tp)
    return COPIES_PER_TENSOR * 2 * activation_bytes * (q + 2 * kv + o)
