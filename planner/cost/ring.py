"""PyTorch's ring attention (``TrainingSpec.ring_attention`` 'torch', 'torch_allgather'): what
its context parallelism costs beyond the attention kernels, per layer and micro-batch on one
rank.

torchtitan runs context parallelism through PyTorch's experimental ``context_parallel``
(``torch/distributed/tensor/experimental/_attention.py`` from torch 2.5, moved to
``_context_parallel/_attention.py``; the same algorithm through torch 2.13), which replaces each
``scaled_dot_product_attention`` call by ``_templated_ring_attention`` and its backward by
``_templated_ring_attention_backward``, with the default options ``convert_to_f32`` True,
``enable_load_balance`` True and a ``rotate_method`` (torchtitan's
``context_parallel_rotate_method``: 'allgather', its default of 2024, ``ring_attention``
'torch_allgather'; 'alltoall', what the planner's torchtitan launch sets, ``ring_attention``
'torch'). With E the elements of one rank's query (and
output) block and E_kv those of its key block, as SDPA receives them (torchtitan's Llama of
2024 repeated K and V to every query head before SDPA, ``repeat_kv``, so E_kv = E there; v0.2.2
passes them at their own head count with ``enable_gqa``, ``TrainingSpec.repeat_kv`` false):

Forward, cp steps:
- communication: 'allgather' runs one ``all_gather_single`` of every rank's K and V (16-bit)
  before step 0, waited for at step 1: it hides behind step 0's attention only
  (``_AllGatherRotater``); 'alltoall' passes one rank's K and V to the next after each step but
  the last (``_AllToAllRotater``, ``permute_tensor``), each beside that step's attention;
- every step but the last concatenates K and V for the exchange (``torch.cat([key.flatten(),
  value.flatten()])``, made even when the all-gather has already run): 8 E_kv bytes;
- step 0 keeps its output in fp32 (``_SDPAMerger.step``: ``out.to(torch.float32)``): 6 E;
- each later step merges its block into the fp32 output, as written: the block's cast (6),
  ``out - block_out`` (12), the sigmoid-weighted product (8) and the subtraction (12), 38 bytes
  per element of the block; load balancing gives half the steps of a rank half a query block
  (``partial``: 19 E) whose result ``_partial_update`` concatenates back into the whole output
  (8 E): 38 E and 27 E, 32.5 E on average;
- the result cast back to 16 bits: 6 E.

Backward, cp steps:
- communication: K and V again as in the forward (beside the backward steps), and after every
  step an exchange of the accumulated key and value gradients in fp32 with the next rank
  (``dkv_rotater``, ALL_TO_ALL whatever the rotate method: 8 E_kv bytes sent), each waited
  for after the next step's kernel, the last one at the end: cp - 1 hide behind a step's
  backward, the last is exposed;
- the fp32 gradient buffers zeroed (``zeros_like``: 4 E + 8 E_kv), K,V concatenated for the
  exchange every step but the last (8 E_kv);
- the key and value gradients accumulated in fp32 from the kernel's 16-bit ones: 20 E_kv on
  step 0 (read 4 + 2, write 4, twice), then on average 23 E_kv (half the steps add into one
  half and ``_partial_update`` concatenates: 26; the others add whole blocks: 20);
- the accumulated gradients concatenated for the exchange (``torch.cat``, fp32): 16 E_kv a
  step;
- the query gradient accumulated in fp32: 10 E, or 13 E where half a block is added and
  concatenated back, 11.5 E on average;
- the results cast back to 16 bits: 6 E and 12 E_kv.

So, per layer: forward 12 E + (cp - 1)(32.5 E + 8 E_kv) bytes in 7 kernels a step; backward
E (10 + 11.5 cp) + E_kv (40 + 31 (cp - 1) + 16 cp) bytes in 8 kernels a step, each op as
written, a kernel of its own (that a compiled block fuses any of them is not assumed).
Transformer Engine's ring (``te``) exchanges K,V at their own head count in 16 bits
(``tables.cp_uses``). Its own memory-bound work is NOT costed yet. Read in
``AttnFuncWithCPAndKVP2P`` (transformer_engine/pytorch/attention/dot_product_attention/
context_parallel.py, TE main at d0067d0; Megatron's 'sbhd' layout, causal, load-balanced,
16-bit, not fp8), it is:
- forward: K and V concatenated into the first send buffer (``torch.cat``: 8 E_kv bytes), and
  after the steps, on the layer's stream, each step's output merged into the result
  (``flash_attn_fwd_out_correction_init``: read 2 E, write 2 E; then
  ``out.add_(out_per_step * exp(...))``: 6 E, or 3 E for a step that attended with half the
  queries); the softmax statistics' merges run on its second stream beside the next step's
  attention;
- backward: K and V copied into the first exchange buffer (8 E_kv) and each step's dQ, dK and
  dV copied or added into the accumulated (dQ) or received (dK, dV) buffers, whole or one half
  (a copy 4 bytes an element, an add 6).
Averaged over the ring's n ranks (the branches differ by rank): forward 4 E + 4.5 E (n - 1) +
8 E_kv, backward 4 E + 4.5 E (n - 1) + (9 n + 7) E_kv bytes a layer and micro-batch. That is
about 1% of a Llama 3 8B layer at 8,192 tokens over cp 2 on H100, and 4% of the step of Llama
3 8B at 128K tokens over cp 32 (``tests/test_ring_attention.py`` works both); costing it
lengthens every context-parallel prediction of NVIDIA's recipes, most of which the model
already predicts too slow on H100 (README, "What the model leaves out, sized").
"""

from __future__ import annotations

from dataclasses import dataclass

FWD_KERNELS_PER_STEP = 7
BWD_KERNELS_PER_STEP = 8


@dataclass(frozen=True)
class RingExtras:
    """Memory-bound work of PyTorch's ring attention per layer and micro-batch on one rank."""

    fwd_bytes: float
    bwd_bytes: float
    fwd_kernels: int
    bwd_kernels: int


def torch_ring_extras(q_elems: float, kv_elems: float, cp: int) -> RingExtras:
    """The eager merges, accumulations and copies of ``_templated_ring_attention`` (forward)
    and ``_templated_ring_attention_backward`` for a rank whose query block holds ``q_elems``
    elements and key block ``kv_elems`` (module docstring); nothing without context
    parallelism."""
    if cp <= 1:
        return RingExtras(0.0, 0.0, 0, 0)
    e, ekv, later = q_elems, kv_elems, cp - 1
    fwd = 12 * e + later * (32.5 * e + 8 * ekv)
    bwd = e * (10 + 11.5 * cp) + ekv * (40 + 31 * later + 16 * cp)
    return RingExtras(fwd, bwd, FWD_KERNELS_PER_STEP * cp, BWD_KERNELS_PER_STEP * cp)


def uses_torch_ring(training, cp: int) -> bool:
    """Whether a plan of ``cp`` runs PyTorch's ring attention (``ring_attention`` 'torch' or
    'torch_allgather')."""
    return cp > 1 and training.ring_attention in ("torch", "torch_allgather")


def received_kv_width(model, training) -> float:
    """Width per token of K (and of V) as the attention op receives them, so as PyTorch's ring
    passes them and the op keeps them for its backward: every query head's where grouped-query
    K and V are expanded first (``TrainingSpec.repeat_kv``), else their own
    (``ModelSpec.kv_width``; SDPA's ``enable_gqa``)."""
    return float(model.o_width) if training.repeat_kv and model.grouped_query else model.kv_width


def torch_ring_exchange_bytes(kv_elems: float, activation_bytes: int) -> tuple[float, float]:
    """(bytes of the K,V all-gather's output over a group of one rank, i.e. one rank's K and
    V in 16 bits; bytes of one exchange of the K,V gradients in fp32)."""
    return 2 * kv_elems * activation_bytes, 2 * kv_elems * 4
