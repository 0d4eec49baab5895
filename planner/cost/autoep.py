"""DeepSpeed's AutoEP MoE layer (``TrainingSpec.moe_dispatcher`` 'autoep'): the memory-bound
work around its all-to-alls, per routed token copy and per token, as
``deepspeed/module_inject/auto_ep_layer.py`` (DeepSpeed 0.19.6, ``AutoEPMoELayer.forward``
without AutoTP folding, ``score_apply`` 'post', ``combine_impl`` 'weighted_sum') runs it. With
e the activation bytes (2 in bf16), per routed copy of a token's hidden vector (N = T k rows
of h elements on one rank):

Forward:
- the copies gathered, ``x[token_indices // k]``: read e, write e;
- ``permute_by_local_expert``: the rows stacked with a zero row (``torch.vstack``: read e,
  write e) and gathered by local expert into alignment-padded rows: read e, write e;
- ``unpermute_by_local_expert``: a zeroed buffer (write e) and the rows put back
  (``index_put``: read e, write e);
- ``combine_from_routed``: a zeroed [T k, h] buffer (write e), the rows put back in token
  order (read e, write e), cast to fp32 (read e, write 4), weighted by the router scores in
  fp32 (read 4, write 4) and summed over the k copies (read 4); per token the fp32 sum
  written (4), cast back (read 4, write e).
  That is 13 e + 16 bytes a copy and 8 + e a token.

Backward (autograd of the same ops): the cast back and the sum's gradient (per token: read e,
write 4); the weighting's (write 4 a copy, and the scores' gradient reading the saved fp32
rows, 4); the fp32 cast's (read 4, write e); the put-backs' and the gathers' as gathers and
accumulating scatters into zeroed buffers (read e, write e, and a zeroed e, each of the four):
10 e + 12 bytes a copy and 4 + e a token.

The step model's all-to-all dispatch (``layers.py``) charges 4 e a copy forward and 8 e
backward for the permutation around the exchange; AutoEP's layer replaces that with the above
where the experts spread over ranks (ep > 1: the planner's DeepSpeed config enables AutoEP
only then; at ep 1 the model's own MoE blocks run, costed as that permutation).
On the network AutoEP is the all-to-all dispatcher (k copies a token through
``all_to_all_single``, not overlapped) plus an exchange of the per-expert counts and a
device-to-host sync a layer, which are not costed.
"""

from __future__ import annotations

# Bytes a routed copy (forward, backward) as (per activation byte, fixed): 13 e + 16, 10 e + 12.
COPY_FWD = (13, 16)
COPY_BWD = (10, 12)
# Bytes a token (forward, backward): 8 + e, 4 + e.
TOKEN_FWD = (1, 8)
TOKEN_BWD = (1, 4)


def autoep_routing_bytes(copies: float, tokens: float, activation_bytes: int
                         ) -> tuple[float, float]:
    """(forward, backward) HBM bytes of AutoEP's copies around the all-to-alls for ``copies``
    routed token copies and ``tokens`` tokens, each of h elements (pass elements, not
    rows: copies x h, tokens x h)."""
    e = activation_bytes
    fwd = copies * (COPY_FWD[0] * e + COPY_FWD[1]) + tokens * (TOKEN_FWD[0] * e + TOKEN_FWD[1])
    bwd = copies * (COPY_BWD[0] * e + COPY_BWD[1]) + tokens * (TOKEN_BWD[0] * e + TOKEN_BWD[1])
    return fwd, bwd
