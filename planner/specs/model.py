"""Transformer model description (decoder-only, dense), with presets and HF config import.

Parameter counts follow the architecture exactly (biases ignored, norm weights counted):
per layer ``2h^2 + 2*h*kv*d`` attention (Q and O are h x h; K and V are h x kv*d under GQA/MQA),
``2hf`` (GELU, two matrices) or ``3hf`` (SwiGLU, gate/up/down) MLP, ``2h`` norm weights; plus
``V*h`` token embedding, another ``V*h`` LM head unless tied, and the final norm ``h``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from planner.specs._preset import PresetSpec

FfnType = Literal["gelu", "swiglu"]

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
}


# The fields a mixture-of-experts spec would carry (DESIGN.md); refused until MoE is modelled.
MOE_FIELDS = ("num_experts", "moe_top_k", "moe_ffn_hidden_size", "num_shared_experts",
              "first_k_dense_layers")


class ModelSpec(PresetSpec):
    """A dense decoder-only transformer. Preset (``{"preset": "llama3-70b"}``), explicit fields,
    or ``{"hf_config": {...config.json...}}``."""

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

    @model_validator(mode="before")
    @classmethod
    def _from_hf(cls, data: Any) -> Any:
        if isinstance(data, dict):
            from planner.specs.hf_import import MOE_MESSAGE

            experts = [f"{k}={data[k]}" for k in MOE_FIELDS if data.get(k) not in (None, 0, 1)]
            if experts:
                raise ValueError("the model " + MOE_MESSAGE.format(keys=", ".join(experts)))
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
        return self

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
    def q_width(self) -> int:
        """Width of the Q projection output (= h for the usual head_dim = h/a)."""
        return self.num_attention_heads * self.d_head

    @property
    def kv_width(self) -> int:
        """Width of each of the K and V projection outputs."""
        return self.kv_heads * self.d_head

    # Parameter counts -----------------------------------------------------------------------
    @property
    def params_per_layer(self) -> int:
        h = self.hidden_size
        attention = h * self.q_width * 2 + 2 * h * self.kv_width
        mlp = self.mlp_matrices * h * self.ffn
        norms = 2 * h
        return attention + mlp + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """LM head parameters not shared with the embedding (0 when tied)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        return (self.num_layers * self.params_per_layer + self.embedding_params
                + self.lm_head_params + self.hidden_size)
