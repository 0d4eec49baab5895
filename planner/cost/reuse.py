"""DeepSpeed ZeRO-3's parameter reuse: which of a layer's weight matrices it gathers again in
the backward, when a released weight is gathered anew at its next use.

DeepSpeed's ZeRO-3 gathers a submodule's weights in its pre-forward (and pre-backward) hook
and releases them after the submodule runs unless the module trace shows them used again
within ``stage3_max_reuse_distance`` parameters (default 1e9): the parameters of the
submodules run in between are counted (``_keep_for_later`` / ``get_reuse_distance_in_numel``
in deepspeed/runtime/zero/stage3.py of v0.3.13, March 2021; ``__params_to_release`` in
partitioned_param_coordinator.py today). Every micro-batch's backward ends by releasing all
of them (``_partition_all_parameters``), so each forward gathers every weight once. Per layer
of a stage of L layers, the weights of the submodules run in forward order w_0 ... w_(k-1)
(sum W), for layer l with r = L - 1 - l layers after it:

- without recompute, matrix j's next use after its forward is its backward, after the rest of
  the layer's forward, r layers' forwards and backwards, and the backward of the matrices
  after j: 2 r W + 2 S_j, S_j = w_(j+1) + ... + w_(k-1);
- with full recompute (each layer's forward rerun just before its backward), its next use is
  the recompute, W - w_j + 3 r W later (the rest of the forward, r layers' recompute and
  backward, the matrices before j in the recompute), then the backward, 2 S_j after that.

A use more than the distance away regathers the matrix (a distance equal to it too: the
trace walk stops once it has counted that many). The embedding, the final norm and the head
between the layers are not counted, nor the norms' and biases' vectors, which stay gathered
(under ``stage3_param_persistence_threshold``, 1e5 elements). Modules as Megatron fuses them:
QKV, the attention projection, FC1 (SwiGLU's gate and up together), FC2.
"""

from __future__ import annotations

from planner.specs import ModelSpec


def layer_matrices(model: ModelSpec, tp: int) -> tuple[float, ...]:
    """Elements on one TP rank of a dense layer's weight matrices in forward order: QKV, the
    attention projection, FC1 (SwiGLU's gate and up fused), FC2."""
    h = model.hidden_size
    proj = model.o_width * h
    fc2 = h * model.ffn
    return ((model.attention_params - proj) / tp, proj / tp,
            (model.dense_mlp_params - fc2) / tp, fc2 / tp)


def backward_gathers(matrices: tuple[float, ...], layers: int, max_reuse: float,
                     recompute: bool) -> tuple[float, ...]:
    """Mean number of times each matrix is gathered in a micro-batch's backward (its
    recompute included), over the stage's ``layers`` layers (module docstring): 0 to 1
    without recompute, 0 to 2 with it."""
    total = sum(matrices)
    after = [sum(matrices[j + 1:]) for j in range(len(matrices))]
    counts = []
    for j, w in enumerate(matrices):
        n = 0
        for r in range(layers):
            if recompute:
                n += (total - w + 3 * r * total >= max_reuse) + (2 * after[j] >= max_reuse)
            else:
                n += 2 * r * total + 2 * after[j] >= max_reuse
        counts.append(n / max(layers, 1))
    return tuple(counts)
