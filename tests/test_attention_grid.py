"""A fused attention kernel's grid (``planner.cost.kernels.attention_fill``): one CTA per query
tile of 128 rows of one head of one sequence, so a micro-batch with few heads per GPU at a
short sequence leaves SMs idle and waits for its longest causal tile. Worked by hand, 1 on the
benchmark grids the rates were fitted on, and carried into a layer's attention time."""

import math

import pytest

from planner.cost import EfficiencyModel
from planner.cost.kernels import ATTENTION_TILE, attention_fill
from planner.cost.layers import LayerShape, kernel_model, layer_work
from planner.specs import GPUSpec, ModelSpec, TrainingSpec

A100 = GPUSpec.from_preset("a100-80gb")
H100 = GPUSpec.from_preset("h100-sxm")
LLAMA_13B = {"name": "llama-13b", "num_layers": 40, "hidden_size": 5120,
             "num_attention_heads": 40, "ffn_hidden_size": 13824, "vocab_size": 32000,
             "ffn_type": "swiglu"}


def test_the_fill_is_worked_by_hand():
    # Llama 13B at tp 8 (5 heads a GPU), one 2,048-token sequence, 108 SMs: 16 query tiles a
    # head, 5 x 16 x 17 / 2 = 680 tile-units over 108 SMs is 6.3 a SM, but the last tile of a
    # head does 16: 16 / 6.30 = 2 x 108 / (5 x 17) = 2.541.
    assert ATTENTION_TILE == 128
    assert attention_fill(2048, 5, 108) == pytest.approx(16 / (5 * 16 * 17 / 2 / 108))
    assert attention_fill(2048, 5, 108) == pytest.approx(2.541, abs=1e-3)
    # Twice the heads (tp 4) or two sequences: 1.271; four times: a full grid.
    assert attention_fill(2048, 10, 108) == pytest.approx(216 / 170)
    assert attention_fill(2048, 20, 108) == 1.0
    # A partial last tile counts as a tile: 2,049 tokens are 17 tiles.
    assert attention_fill(2049, 5, 108) == pytest.approx(216 / (5 * 18))
    # No SM count (a CPU, a measured rate) or no grid given: no correction.
    assert attention_fill(2048, 5, None) == attention_fill(2048, 0, 108) == 1.0


@pytest.mark.parametrize("sms", [108, 132, 148, 160])
def test_the_benchmark_grids_the_rates_come_from_are_full(sms):
    """The FlashAttention-2 and -3 papers' benchmarks hold 16K tokens and 2,048 hidden (16
    heads of 128) at every length from 512 to 16K: no correction on any GPU preset."""
    for seq in (512, 1024, 2048, 4096, 8192, 16384):
        batch_heads = 16 * (16384 // seq)
        assert attention_fill(seq, batch_heads, sms) == 1.0


def _attention(gpu, tp, mbs, seq, kernel="default"):
    model = ModelSpec.model_validate(LLAMA_13B)
    training = TrainingSpec(global_batch_size=64, seq_length=seq, attention_kernel=kernel)
    work = layer_work(model, training, LayerShape(tp, 1, mbs, "none", tp > 1), gpu,
                      EfficiencyModel())
    km = kernel_model(gpu, training, EfficiencyModel())
    return work.attn_core_fwd_s, work.attn_core_bwd_s, km


@pytest.mark.parametrize("kernel", ["default", "flash2", "flash_triton"])
def test_a_layer_pays_the_fill_on_both_passes(kernel):
    fwd, bwd, km = _attention(A100, 8, 1, 2048, kernel)
    heads = 40 / 8
    flops = 2 * 1 * heads * 2048 * (2048 / 2) * 256    # causal: s / 2 keys a query, QK^T + PV
    fill = attention_fill(2048, heads, 108)
    assert fill > 2.5
    for seconds, backward, work in ((fwd, False, flops), (bwd, True, 2.5 * flops)):
        full = km.attention(work, 2048, head_dim=128, backward=backward)
        assert seconds == pytest.approx((full - km.kernel_overhead_s) * fill
                                        + km.kernel_overhead_s, rel=1e-9)
    # Four sequences a micro-batch fill the grid: the per-token time falls by the fill.
    fwd4, _, _ = _attention(A100, 8, 4, 2048, kernel)
    assert fwd4 / 4 == pytest.approx((fwd - km.kernel_overhead_s) / fill
                                     + km.kernel_overhead_s / 4, rel=1e-9)


def test_flashattention_v1_keeps_its_benchmark_rate():
    """v1 splits the sequence only where its own heuristic does: not modelled, no fill."""
    fwd, _, km = _attention(A100, 8, 1, 2048, "flash1")
    assert not km.attention_tiled
    fwd_full, _, _ = _attention(A100, 8, 4, 2048, "flash1")
    assert fwd_full / 4 == pytest.approx(fwd - 3 * km.kernel_overhead_s / 4, rel=1e-9)


def test_long_sequences_and_many_heads_are_unchanged():
    """Llama 13B at tp 1 (40 heads) or at 8K tokens (64 tiles a head) on H100's 132 SMs."""
    for tp, seq in ((1, 2048), (8, 8192)):
        heads = 40 / tp
        assert attention_fill(seq, heads, 132) == 1.0
        assert heads * (math.ceil(seq / 128) + 1) >= 2 * 132
