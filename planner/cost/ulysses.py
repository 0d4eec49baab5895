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

Hierarchical context parallelism (``ring_attention`` 'a2a+p2p', Megatron-Core's
``--cp-comm-type a2a+p2p`` with ``--hierarchical-context-parallel-sizes a c``, a c = cp,
``TrainingSpec.cp_a2a_size`` = a): Megatron-Core splits the CP group into sub-groups of a
consecutive CP ranks (``parallel_state.create_hierarchical_groups``: the first level's groups
are consecutive ranks, the second's strided by a) and Transformer Engine's
``AttnFuncWithCPAndKVP2P`` takes ``cp_group = [a2a group, p2p group]``: the same all-to-alls
of Q, K and V over the a ranks before the attention and of the output after it (and of the
gradients backward, ``flash_attn_a2a_communicate``, read at d0067d0), then its ring over the
c = cp / a strided ranks, each step on a chunk of s / c tokens of heads / a heads, K and V of
s / c tokens at kv heads / a passed from step to step beside the attention. So the a2a part
costs what 'a2a' over a ranks does (its exchanges exposed, its copies) and the ring what
Transformer Engine's over c ranks does, with c - 1 steps of a times the attention a step
that a ring of cp ranks has (``cp_split``). The head rule holds for a: the heads of one
tensor-parallel rank, query and K,V, divisible by a. Where a group is one rank
(``attn_forward_func_with_cp``: a = 1, or c = 1 at cp = a) Transformer Engine runs the other
level alone.
"""

from __future__ import annotations

from planner.specs import ModelSpec, TrainingSpec

# all_to_all_single calls a pass (Q, K, V and O forward; dO, dQ, dK, dV backward).
A2A_CALLS_PER_PASS = 4
# Copies around each exchanged tensor (heads to the front before, chunks reordered after).
COPIES_PER_TENSOR = 2


def uses_a2a(training: TrainingSpec, cp: int) -> bool:
    """Whether a plan of ``cp`` runs all-to-all context parallelism, alone ('a2a') or inside
    the hierarchy ('a2a+p2p')."""
    return cp_split(training, cp)[0] > 1


def cp_split(training: TrainingSpec, cp: int) -> tuple[int, int]:
    """(a, c): the CP ranks one all-to-all spans and the ring's ranks, a c = cp (module
    docstring): 'a2a' (cp, 1), 'a2a+p2p' (cp_a2a_size, cp / cp_a2a_size), every ring (1, cp).
    A hierarchy whose cp_a2a_size does not divide cp is taken as all-to-all (the plan's
    violation says why it cannot run)."""
    if cp <= 1:
        return 1, max(cp, 1)
    if training.ring_attention == "a2a":
        return cp, 1
    if training.ring_attention == "a2a+p2p":
        a = training.cp_a2a_size or cp
        return (a, cp // a) if cp % a == 0 else (cp, 1)
    return 1, cp


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
