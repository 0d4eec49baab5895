"""Transformer model description (decoder-only, dense or mixture-of-experts), with presets and
HF config import.

Parameter counts follow the architecture exactly (biases ignored, norm weights counted):
per layer ``2h^2 + 2*h*kv*d`` attention (Q and O are h x h; K and V are h x kv*d under GQA/MQA),
``2hf`` (GELU, two matrices) or ``3hf`` (SwiGLU, gate/up/down) MLP, ``2h`` norm weights; plus
``V*h`` token embedding, another ``V*h`` LM head unless tied, and the final norm ``h``.

Multi-head latent attention (DeepSeek-V2/V3, MLA): queries go through a rank-``q_lora_rank``
bottleneck (h x r_q, its norm, r_q x a (d_nope + d_rope)), keys and values through a shared
latent (h x (r_kv + d_rope), its norm, r_kv x a (d_nope + d_v)), the output projection is
a d_v x h (DeepSeek-V3 report, section 2.1.1).

Mixture of experts (Shazeer et al. 2017; Fedus et al., Switch Transformer; Mixtral, DeepSeek-V3):
a MoE layer replaces the MLP by ``num_experts`` MLPs of width ``moe_ffn_hidden_size``, a router
(h x E), and optionally shared experts every token uses; each token runs ``moe_top_k`` routed
experts. The first ``first_k_dense_layers`` layers keep a dense MLP (DeepSeek-V3: 3), and after
them every ``moe_layer_freq``-th layer is MoE (layer i is when (i + 1) % freq == 0, HF's
``decoder_sparse_step``). ``parameters.active`` counts what one token uses: everything but the
routed experts it does not go to (the embedding included, as Mistral and Qwen count it).

Multi-token prediction (DeepSeek-V3 report, section 2.2; Megatron-LM
``megatron/core/transformer/multi_token_prediction.py``): each of ``mtp_num_layers`` modules
normalises the hidden state and the embedding of the next token, projects their concatenation
(2h x h), runs one transformer layer built like the last decoder layer, and predicts through
the shared LM head. Its parameters are not in ``parameters.total`` (DeepSeek-V3's 671B leaves
out its 14B MTP module, shared embedding and head included).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from planner.specs._preset import PresetSpec

FfnType = Literal["gelu", "swiglu"]

def _dense(name: str, layers: int, hidden: int, heads: int, ffn: int, ffn_type: str,
           vocab: int, kv: int | None = None, tied: bool = False) -> dict[str, Any]:
    """A dense preset's fields, as a report's table gives them."""
    return {"name": name, "num_layers": layers, "hidden_size": hidden,
            "num_attention_heads": heads, "ffn_hidden_size": ffn, "ffn_type": ffn_type,
            "vocab_size": vocab, "tied_embeddings": tied,
            **({"num_kv_heads": kv} if kv is not None else {})}


_MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # Brown et al. 2020, Table 2.1; GPT-2 BPE vocabulary, embeddings tied.
    "gpt3-175b": {"name": "gpt3-175b", "num_layers": 96, "hidden_size": 12288,
                  "num_attention_heads": 96, "ffn_hidden_size": 49152, "ffn_type": "gelu",
                  "vocab_size": 50257, "tied_embeddings": True},
    # Touvron et al. 2023 (Llama 2) and the released config.json files.
    "llama2-7b": {"name": "llama2-7b", "num_layers": 32, "hidden_size": 4096,
                  "num_attention_heads": 32, "ffn_hidden_size": 11008, "ffn_type": "swiglu",
                  "vocab_size": 32000},
    "llama2-13b": {"name": "llama2-13b", "num_layers": 40, "hidden_size": 5120,
                   "num_attention_heads": 40, "ffn_hidden_size": 13824, "ffn_type": "swiglu",
                   "vocab_size": 32000},
    "llama2-70b": {"name": "llama2-70b", "num_layers": 80, "hidden_size": 8192,
                   "num_attention_heads": 64, "num_kv_heads": 8, "ffn_hidden_size": 28672,
                   "ffn_type": "swiglu", "vocab_size": 32000},
    # Llama 3 herd paper, Table 3, and the released config.json files.
    "llama3-8b": {"name": "llama3-8b", "num_layers": 32, "hidden_size": 4096,
                  "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
                  "ffn_type": "swiglu", "vocab_size": 128256},
    "llama3-70b": {"name": "llama3-70b", "num_layers": 80, "hidden_size": 8192,
                   "num_attention_heads": 64, "num_kv_heads": 8, "ffn_hidden_size": 28672,
                   "ffn_type": "swiglu", "vocab_size": 128256},
    "llama3-405b": {"name": "llama3-405b", "num_layers": 126, "hidden_size": 16384,
                    "num_attention_heads": 128, "num_kv_heads": 8, "ffn_hidden_size": 53248,
                    "ffn_type": "swiglu", "vocab_size": 128256},
    # Mistral 7B: Jiang et al. 2023 (arXiv 2310.06825), Table 1: every layer attends through
    # a 4,096-token sliding window.
    "mistral-7b": {"name": "mistral-7b", "num_layers": 32, "hidden_size": 4096,
                   "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
                   "ffn_type": "swiglu", "vocab_size": 32000, "sliding_window": 4096,
                   "num_sliding_window_layers": 32},
    # Published large dense runs' models, as their reports give them (the 2-matrix MLPs of
    # OPT's ReLU and Nemotron-4's squared ReLU cost as GELU's; GLM-130B's GeGLU has SwiGLU's
    # three matrices): GPT-NeoX-20B, Black et al. 2022 (arXiv 2204.06745) and configs/20B.yml;
    # OPT-175B, Zhang et al. 2022 (arXiv 2205.01068), Table 1; BLOOM, BigScience 2022 (arXiv
    # 2211.05100), Table 3; MT-NLG, Smith et al. 2022 (arXiv 2201.11990), section 2; GLM-130B,
    # Zeng et al. 2022 (arXiv 2210.02414), section 2 and appendix; Nemotron-4 15B, Parmar et
    # al. 2024 (arXiv 2402.16819), Table 1; Nemotron-4 340B, NVIDIA 2024 (arXiv 2406.11704),
    # Table 1.
    "gpt-neox-20b": _dense("gpt-neox-20b", 44, 6144, 64, 24576, "gelu", 50432),
    "opt-175b": _dense("opt-175b", 96, 12288, 96, 49152, "gelu", 50272, tied=True),
    "bloom-176b": _dense("bloom-176b", 70, 14336, 112, 57344, "gelu", 250880, tied=True),
    "mt-nlg-530b": _dense("mt-nlg-530b", 105, 20480, 128, 81920, "gelu", 51200, tied=True),
    "glm-130b": _dense("glm-130b", 70, 12288, 96, 32768, "swiglu", 150528, tied=True),
    "nemotron4-15b": _dense("nemotron4-15b", 32, 6144, 48, 24576, "gelu", 256000, kv=8),
    "nemotron4-340b": _dense("nemotron4-340b", 96, 18432, 96, 73728, "gelu", 256000, kv=8),
    # Falcon-180B (Almazrouei et al. 2023, arXiv 2311.16867; tiiuae/falcon-180B's config as
    # TensorRT-LLM's Falcon example restates it): 80 layers of 14,848, 232 query heads of 64 in
    # 8 KV groups, a GELU MLP of 4h, 65,024 tokens, untied; its attention and MLP run in
    # parallel off one norm, costed as the planner's sequential layer (the same FLOPs).
    "falcon-180b": _dense("falcon-180b", 80, 14848, 232, 59392, "gelu", 65024, kv=8),
    # MosaicML's MPT configurations, which llm-foundry's training benchmarks (scripts/train/
    # benchmarking/README.md) print as "125m" to "70b": scripts/train/yamls/pretrain/mpt-*.yaml
    # at cc8351c4d (2024-05-08), d_model, n_heads, n_layers, expansion_ratio 4 (a GELU MLP of
    # 4 d), vocab_size 50368, no separate output layer (MPT ties it to the embedding).
    **{f"mpt-{size}": _dense(f"mpt-{size}", layers, hidden, heads, 4 * hidden, "gelu", 50368,
                             tied=True)
       for size, layers, hidden, heads in (
           ("125m", 12, 768, 12), ("350m", 24, 1024, 16), ("760m", 24, 1536, 12),
           ("1b", 24, 2048, 16), ("3b", 32, 2560, 20), ("7b", 32, 4096, 32),
           ("13b", 40, 5120, 40), ("30b", 48, 7168, 56), ("70b", 80, 8192, 64))},
    # Mixture of experts, from the released config.json files (Mixtral: Jiang et al. 2024;
    # Qwen3 technical report 2025; DeepSeek-V3 report 2024, Table/section 4.2; gpt-oss model
    # card 2025).
    "mixtral-8x7b": {"name": "mixtral-8x7b", "num_layers": 32, "hidden_size": 4096,
                     "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
                     "ffn_type": "swiglu", "vocab_size": 32000, "num_experts": 8,
                     "moe_top_k": 2},
    "mixtral-8x22b": {"name": "mixtral-8x22b", "num_layers": 56, "hidden_size": 6144,
                      "num_attention_heads": 48, "num_kv_heads": 8, "ffn_hidden_size": 16384,
                      "ffn_type": "swiglu", "vocab_size": 32768, "num_experts": 8,
                      "moe_top_k": 2},
    "qwen3-30b-a3b": {"name": "qwen3-30b-a3b", "num_layers": 48, "hidden_size": 2048,
                      "num_attention_heads": 32, "num_kv_heads": 4, "head_dim": 128,
                      "ffn_hidden_size": 6144, "ffn_type": "swiglu", "vocab_size": 151936,
                      "num_experts": 128, "moe_top_k": 8, "moe_ffn_hidden_size": 768},
    "qwen3-235b-a22b": {"name": "qwen3-235b-a22b", "num_layers": 94, "hidden_size": 4096,
                        "num_attention_heads": 64, "num_kv_heads": 4, "head_dim": 128,
                        "ffn_hidden_size": 12288, "ffn_type": "swiglu", "vocab_size": 151936,
                        "num_experts": 128, "moe_top_k": 8, "moe_ffn_hidden_size": 1536},
    "deepseek-v3": {"name": "deepseek-v3", "num_layers": 61, "hidden_size": 7168,
                    "num_attention_heads": 128, "head_dim": 128, "ffn_hidden_size": 18432,
                    "ffn_type": "swiglu", "vocab_size": 129280, "num_experts": 256,
                    "moe_top_k": 8, "moe_ffn_hidden_size": 2048, "num_shared_experts": 1,
                    "first_k_dense_layers": 3, "moe_router_score": "sigmoid",
                    "moe_router_num_groups": 8, "moe_router_group_topk": 4,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "mtp_num_layers": 1},
    "gpt-oss-120b": {"name": "gpt-oss-120b", "num_layers": 36, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_kv_heads": 8, "head_dim": 64,
                     "ffn_hidden_size": 2880, "ffn_type": "swiglu", "vocab_size": 201088,
                     "num_experts": 128, "moe_top_k": 4, "sliding_window": 128,
                     "num_sliding_window_layers": 18},
}


class ModelSpec(PresetSpec):
    """A decoder-only transformer, dense or mixture-of-experts. Preset
    (``{"preset": "llama3-70b"}``), explicit fields, or ``{"hf_config": {...config.json...}}``."""

    _presets: ClassVar[dict[str, dict[str, Any]]] = _MODEL_PRESETS

    name: str = Field("model", min_length=1, max_length=200, description="Label shown in results.")
    num_layers: int = Field(ge=1, le=10_000, description="Transformer layers.")
    hidden_size: int = Field(ge=1, le=1_000_000, description="Model width h.")
    num_attention_heads: int = Field(ge=1, le=100_000, description="Query heads a.")
    num_kv_heads: int | None = Field(
        None, ge=1, le=100_000,
        description="Key/value heads (GQA/MQA). Default: num_attention_heads (MHA)."
    )
    head_dim: int | None = Field(None, ge=1, le=100_000,
                                 description="Per-head width. Default: h / a.")
    ffn_hidden_size: int | None = Field(None, ge=1, le=10_000_000,
                                        description="MLP width f. Default: 4h.")
    ffn_type: FfnType = Field("gelu", description="gelu: 2 matrices; swiglu: 3 (gate, up, down).")
    vocab_size: int = Field(ge=1, le=10_000_000, description="Vocabulary size V.")
    tied_embeddings: bool = Field(False, description="LM head shares the embedding matrix.")
    # Attention variants.
    q_lora_rank: int | None = Field(
        None, ge=1, le=1_000_000, description="MLA: rank of the query bottleneck (DeepSeek-V3: "
        "1536). Null: queries projected directly (also under MLA, as in DeepSeek-V2-Lite).")
    kv_lora_rank: int | None = Field(
        None, ge=1, le=1_000_000, description="MLA (multi-head latent attention) when set: rank "
        "of the shared key/value latent (DeepSeek-V3: 512). head_dim is then the non-rotary "
        "query/key head width (qk_nope_head_dim).")
    qk_rope_head_dim: int = Field(0, ge=0, le=100_000,
                                  description="MLA: rotary part of each query/key head (64).")
    v_head_dim: int | None = Field(None, ge=1, le=100_000,
                                   description="MLA: value head width. Default: head_dim.")
    sliding_window: int | None = Field(
        None, ge=1, le=100_000_000, description="Attention window (tokens) of the sliding-"
        "window layers (GPT-OSS: 128 on every other layer).")
    num_sliding_window_layers: int = Field(
        0, ge=0, le=10_000, description="How many layers attend within sliding_window only.")
    # Mixture of experts.
    num_experts: int | None = Field(
        None, ge=1, le=100_000, description="Routed experts per MoE layer (null or 1: dense).")
    moe_top_k: int | None = Field(None, ge=1, le=100_000,
                                  description="Routed experts each token uses (required for MoE).")
    moe_ffn_hidden_size: int | None = Field(
        None, ge=1, le=10_000_000, description="Width of each routed expert. Default: "
        "ffn_hidden_size.")
    num_shared_experts: int = Field(0, ge=0, le=1000,
                                    description="Experts every token uses (DeepSeek-V3: 1).")
    moe_shared_ffn_hidden_size: int | None = Field(
        None, ge=0, le=10_000_000, description="Total width of the shared experts. Default: "
        "num_shared_experts * moe_ffn_hidden_size.")
    first_k_dense_layers: int = Field(0, ge=0, le=10_000,
                                      description="Leading layers with a dense MLP.")
    moe_layer_freq: int = Field(1, ge=1, le=10_000, description="After the dense layers, "
                                "every freq-th layer is MoE (layer i when (i + 1) % freq == 0).")
    moe_router_score: Literal["softmax", "sigmoid"] = Field(
        "softmax", description="Router scoring: softmax (Mixtral, Qwen) or sigmoid "
        "(DeepSeek-V3).")
    moe_router_num_groups: int | None = Field(
        None, ge=1, le=100_000, description="Group-limited routing: the experts form this "
        "many groups of consecutive experts (Megatron-LM --moe-router-num-groups, HF n_group; "
        "DeepSeek-V3: 8, one per node at EP 64). Null: no groups.")
    moe_router_group_topk: int | None = Field(
        None, ge=1, le=100_000, description="Group-limited routing: a token's experts come "
        "from this many groups (Megatron-LM --moe-router-group-topk, HF topk_group; "
        "DeepSeek-V3: 4).")
    # Multi-token prediction.
    mtp_num_layers: int = Field(
        0, ge=0, le=100, description="Multi-token prediction depth (DeepSeek-V3 report "
        "section 2.2; HF num_nextn_predict_layers; Megatron-LM --mtp-num-layers; DeepSeek-V3: "
        "1): each MTP module adds a transformer layer, a projection and a pass through the "
        "shared LM head and loss, on the last pipeline stage. 0: none.")

    @model_validator(mode="before")
    @classmethod
    def _from_hf(cls, data: Any) -> Any:
        if isinstance(data, dict) and "hf_config" in data:
            from planner.specs.hf_import import model_fields_from_hf_config

            rest = {k: v for k, v in data.items() if k != "hf_config"}
            return {**model_fields_from_hf_config(data["hf_config"]), **rest}
        return data

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelSpec:
        a, kv = self.num_attention_heads, self.kv_heads
        if self.head_dim is None and self.hidden_size % a:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads {a}; "
                "give head_dim explicitly if that is intended"
            )
        if kv > a or a % kv:
            raise ValueError(f"num_attention_heads {a} is not a multiple of num_kv_heads {kv}")
        if self.is_moe:
            if self.moe_top_k is None:
                raise ValueError(f"num_experts {self.num_experts} needs moe_top_k (the routed "
                                 "experts each token uses)")
            if self.moe_top_k > self.experts:
                raise ValueError(f"moe_top_k {self.moe_top_k} exceeds num_experts "
                                 f"{self.num_experts}")
            self._check_groups()
            if self.num_moe_layers == 0:
                raise ValueError(
                    f"no MoE layer: first_k_dense_layers({self.first_k_dense_layers}) and "
                    f"moe_layer_freq({self.moe_layer_freq}) leave none of the "
                    f"{self.num_layers} layers")
        if self.num_sliding_window_layers > self.num_layers:
            raise ValueError(f"num_sliding_window_layers {self.num_sliding_window_layers} "
                             f"exceeds num_layers {self.num_layers}")
        if self.num_sliding_window_layers and self.sliding_window is None:
            raise ValueError("num_sliding_window_layers needs sliding_window")
        return self

    def _check_groups(self) -> None:
        G, g = self.moe_router_num_groups, self.moe_router_group_topk
        if (G is None) != (g is None):
            raise ValueError("moe_router_num_groups and moe_router_group_topk go together "
                             "(group-limited routing)")
        if G is None or g is None:
            return
        if self.experts % G:
            raise ValueError(f"moe_router_num_groups {G} does not divide num_experts "
                             f"{self.experts}")
        if g > G:
            raise ValueError(f"moe_router_group_topk {g} exceeds moe_router_num_groups {G}")
        if self.top_k > g * (self.experts // G):
            raise ValueError(f"moe_top_k {self.top_k} exceeds the {g * (self.experts // G)} "
                             f"experts of {g} groups")

    @property
    def router_groups(self) -> tuple[int, int]:
        """(groups, groups a token's experts come from); (1, 1) without group-limited
        routing."""
        return (self.moe_router_num_groups or 1, self.moe_router_group_topk or 1)

    # Derived shapes -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.ffn_type == "swiglu" else 2

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head (the rotary part included under MLA)."""
        return self.d_head + (self.qk_rope_head_dim if self.mla else 0)

    @property
    def v_dim(self) -> int:
        return (self.v_head_dim or self.d_head) if self.mla else self.d_head

    @property
    def q_width(self) -> int:
        """Width of the Q projection output (= h for the usual head_dim = h/a)."""
        return self.num_attention_heads * self.qk_head_dim

    @property
    def attention_kv_heads(self) -> int:
        """K,V heads the attention op reads: every query head has its own under MLA."""
        return self.num_attention_heads if self.mla else self.kv_heads

    @property
    def kv_width(self) -> float:
        """Mean width of the K and V tensors attention reads (every head has its own under MLA,
        with keys of qk_head_dim and values of v_head_dim)."""
        return self.attention_kv_heads * (self.qk_head_dim + self.v_dim) / 2

    @property
    def grouped_query(self) -> bool:
        """Grouped-query attention: fewer K,V heads than query heads (MLA has one per head)."""
        return not self.mla and self.kv_heads < self.num_attention_heads

    @property
    def o_width(self) -> int:
        """Input width of the output projection (heads x value width)."""
        return self.num_attention_heads * self.v_dim

    def attention_keys(self, s: int, causal: bool = False) -> float:
        """Mean keys per query over the layers. Published FLOPs convention (``causal`` False):
        s for full attention, min(window, s) for sliding-window layers. Executed under the
        causal mask: s / 2, and w - w^2 / 2s for a window w < s (query i sees min(i, w) keys)."""
        n = self.num_sliding_window_layers
        w = min(self.sliding_window or s, s)
        if causal:
            full, slid = s / 2, (w - w * w / (2 * s) if w < s else s / 2)
        else:
            full, slid = s, w
        return ((self.num_layers - n) * full + n * slid) / self.num_layers

    # Mixture of experts ---------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return (self.num_experts or 1) > 1

    @property
    def experts(self) -> int:
        return self.num_experts or 1

    @property
    def top_k(self) -> int:
        return self.moe_top_k or 1 if self.is_moe else 1

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn

    @property
    def shared_ffn(self) -> int:
        if self.moe_shared_ffn_hidden_size is not None:
            return self.moe_shared_ffn_hidden_size
        return self.num_shared_experts * self.expert_ffn

    @property
    def num_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        # Layers i in [k, L) with (i + 1) % f == 0: the multiples of f in [k + 1, L].
        k, f = self.first_k_dense_layers, self.moe_layer_freq
        return max(0, self.num_layers // f - k // f)

    @property
    def moe_share(self) -> float:
        """Share of the layers that are MoE (the mean layer's mix; 0 for dense models)."""
        return self.num_moe_layers / self.num_layers

    # Parameter counts -----------------------------------------------------------------------
    @property
    def attention_params(self) -> float:
        h, a = self.hidden_size, self.num_attention_heads
        if self.kv_lora_rank is None:
            return h * self.q_width + 2 * h * self.kv_width + self.o_width * h
        rq, rkv, dr = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim
        q = (h * rq + rq + rq * self.q_width) if rq else h * self.q_width
        kv = h * (rkv + dr) + rkv + rkv * a * (self.d_head + self.v_dim)
        return q + kv + self.o_width * h

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden_size * self.ffn

    @property
    def expert_params(self) -> int:
        """One routed expert's weights."""
        return self.mlp_matrices * self.hidden_size * self.expert_ffn

    @property
    def moe_shared_params(self) -> int:
        """A MoE layer's parameters outside its routed experts: router and shared experts."""
        return self.hidden_size * self.experts + self.mlp_matrices * self.hidden_size * (
            self.shared_ffn)

    @property
    def params_per_layer(self) -> float:
        """Parameters of the mean layer (MoE and dense layers mixed by their counts)."""
        return self.nonexpert_params_per_layer + self.expert_params_per_layer

    @property
    def nonexpert_params_per_layer(self) -> float:
        """The mean layer's parameters that TP splits and data parallelism replicates."""
        phi = self.moe_share
        mlp = phi * self.moe_shared_params + (1 - phi) * self.dense_mlp_params
        return self.attention_params + mlp + 2 * self.hidden_size

    @property
    def expert_params_per_layer(self) -> float:
        """The mean layer's routed-expert parameters (expert parallelism splits them)."""
        return self.moe_share * self.experts * self.expert_params if self.is_moe else 0.0

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """LM head parameters not shared with the embedding (0 when tied)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    @property
    def mtp_layer_is_moe(self) -> bool:
        """An MTP module's transformer layer is built like the last decoder layer (Megatron-LM
        ``get_gpt_mtp_block_spec``): MoE when that one is."""
        i = self.num_layers - 1
        return self.is_moe and i >= self.first_k_dense_layers and (i + 1) % self.moe_layer_freq == 0

    @property
    def mtp_nonexpert_params(self) -> float:
        """Parameters of the MTP modules that TP splits, the routed experts and the copy of the
        embedding apart: per module its transformer layer, the projection of [embedding;
        hidden] (2h x h) and three norms (embedding, hidden, final)."""
        h = self.hidden_size
        mlp = self.moe_shared_params if self.mtp_layer_is_moe else self.dense_mlp_params
        return self.mtp_num_layers * (self.attention_params + mlp + 2 * h + 2 * h * h + 3 * h)

    @property
    def mtp_expert_params(self) -> float:
        """Routed-expert parameters of the MTP modules."""
        return (self.mtp_num_layers * self.experts * self.expert_params
                if self.mtp_layer_is_moe else 0.0)

    @property
    def num_params(self) -> int:
        return round(self.num_layers * self.params_per_layer + self.embedding_params
                     + self.lm_head_params + self.hidden_size)

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the routed experts it is not sent to."""
        unused = self.num_moe_layers * (self.experts - self.top_k) * self.expert_params
        return self.num_params - unused
