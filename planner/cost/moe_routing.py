"""How a MoE layer copies its tokens around the experts (``TrainingSpec.moe_routing``): the
memory-bound work per routed copy of a token's hidden vector (N = T k rows of h elements on
one rank) and per token, forward and backward, with e the activation bytes (2 in bf16).

'fused' (Megatron-Core with ``--moe-permute-fusion``): the tokens permuted into expert order
before the exchange and unpermuted after it by Transformer Engine's fused kernels
(``moe_utils.permute`` / ``unpermute`` with ``fused``), the routing weights applied inside the
unpermutation: read e and write e each, 4 e a copy forward and twice that backward (the step
model's all-to-all dispatch, ``layers.py``). Its all-to-all dispatcher receives a rank's rows
ordered by the rank they came from; where the rank holds more than one expert it sorts them
by local expert before the expert GEMMs and the outputs back before the combine
(``megatron/core/transformer/moe/token_dispatcher.py`` ``dispatch_postprocess`` and
``combine_preprocess``: ``sort_chunks_by_idxs``, Transformer Engine's fused sort under
``--moe-permute-fusion``, a ``torch.cat`` of the chunks without it, a transposed copy when
padding to capacity), each reading and writing the received rows once: 4 e a received row
forward, and 4 e backward, the inverse permutations (``chunk_sort_bytes``). DeepEP's
dispatcher hands each rank its rows by expert and sorts nothing. Not counted: Megatron-Core's
unfused default, which weights the rows and scatter-adds them into a zeroed buffer as
separate ops, and the per-expert probabilities the sorts carry (4 bytes a row).

'torchtitan' (``torchtitan/models/moe/moe.py`` ``MoE.forward`` and ``utils.py`` ``_permute`` /
``_unpermute``, v0.2.2; its 'standard' all-to-all backend), forward:
- the copies gathered, ``x[token_indices // k]``: read e, write e;
- ``_permute``: the rows stacked with a zero row (``torch.vstack``: read e, write e) and
  gathered by local expert into alignment-padded rows: read e, write e;
- ``_unpermute``: put back (``index_put`` into ``new_empty``: read e, write e);
- the combine: a zeroed [T k, h] buffer (write e), the rows put back in token order (read e,
  write e), cast to fp32 (read e, write 4) and weighted by the router scores in one fp32
  ``bmm`` over the k copies (read 4); per token the fp32 result written (4) and cast back
  (read 4, write e).
  That is 12 e + 8 bytes a copy and 8 + e a token.
Backward (autograd of the same ops): the cast back's (per token read e, write 4); the bmm's,
the copies' gradient (write 4) and the scores' (reading the saved fp32 rows, 4); the fp32
cast's (read 4, write e); the put-backs' as gathers (read e, write e, twice); the gathers' as
accumulating scatters into zeroed buffers (the padded gather: a zeroed e, read e, write e;
the copies' gather: read e, write e, and per token a zeroed e): 10 e + 12 bytes a copy and
2 e + 4 a token.
Under torchtitan's DeepEP backend (``distributed/deepep/deepep.py`` ``dispatch_tokens`` /
``combine_tokens``, v0.2.2) DeepEP's kernels dispatch and combine; around them the received
tokens are copied once into expert order (``index_select``: read e, write e a copy), weighted
(read e, write e) and scatter-added back into a zeroed buffer (read e, write e): about 6 e a
copy forward against the fused 4 e, costed as 'fused'.

'autoep' (DeepSpeed's AutoEP, ``deepspeed/module_inject/auto_ep_layer.py``, DeepSpeed 0.19.6,
without AutoTP folding, ``score_apply`` 'post', ``combine_impl`` 'weighted_sum'): the same
layer as torchtitan's with two more passes: its unpermutation puts back into a zeroed buffer
(``new_zeros``: e more), and its combine weights the fp32 rows and sums them over the k copies
as two ops (``output.float() * scores`` then ``.sum(dim=1)``: 8 more): 13 e + 16 bytes a copy
forward; backward as torchtitan's. AutoEP runs where the experts spread over ranks (ep > 1:
the planner's DeepSpeed config enables it only then; at ep 1 the model's own MoE blocks run,
costed as 'fused'); its exchange of per-expert counts and device-to-host sync a layer are not
costed.
"""

from __future__ import annotations

# Bytes a routed copy and a token, (forward, backward), each as (per activation byte, fixed).
_COPY = {"fused": ((4, 0), (8, 0)), "torchtitan": ((12, 8), (10, 12)),
         "autoep": ((13, 16), (10, 12))}
_TOKEN = {"fused": ((0, 0), (0, 0)), "torchtitan": ((1, 8), (2, 4)),
          "autoep": ((1, 8), (2, 4))}


def routing_applies(kind: str, dispatcher: str, ep: int) -> str:
    """The routing a layer runs: ``kind``, except torchtitan's under DeepEP (the module
    docstring) and AutoEP at ep 1 (the model's own blocks): 'fused' there."""
    if (kind == "torchtitan" and dispatcher == "deepep") or (kind == "autoep" and ep == 1):
        return "fused"
    return kind


def routing_bytes(kind: str, copies: float, tokens: float, activation_bytes: int
                  ) -> tuple[float, float]:
    """(forward, backward) HBM bytes of ``kind``'s copies around the experts for ``copies``
    routed token copies and ``tokens`` tokens, each of h elements (pass elements, not rows:
    copies x h, tokens x h)."""
    e = activation_bytes
    (cf, cb), (tf, tb) = _COPY[kind], _TOKEN[kind]
    return (copies * (cf[0] * e + cf[1]) + tokens * (tf[0] * e + tf[1]),
            copies * (cb[0] * e + cb[1]) + tokens * (tb[0] * e + tb[1]))


def chunk_sort_bytes(routing: str, dispatcher: str, local_experts: float, rows: float,
                     activation_bytes: int) -> float:
    """HBM bytes, each pass (forward and backward alike), of Megatron-Core's all-to-all
    dispatcher sorting the rows it received by local expert and the experts' outputs back
    (module docstring): read e and write e each, 4 e a row element, where ``routing`` is
    Megatron-Core's ('fused': torchtitan's and DeepSpeed's layers permute by their own code),
    the dispatcher its all-to-all and a rank holds more than one expert; ``rows`` is the
    received rows (after the expert-TP gather) times h. 0 elsewhere."""
    if routing != "fused" or dispatcher != "alltoall" or local_experts <= 1:
        return 0.0
    return 4 * activation_bytes * rows

