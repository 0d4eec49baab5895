"""Map a Hugging Face ``config.json`` dict to ModelSpec fields.

Two naming families are understood:
- Llama-style (llama, mistral, mixtral-free dense, qwen2, qwen3, gemma, phi3, olmo, ...):
  ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
  ``intermediate_size``, ``vocab_size``, ``tie_word_embeddings``, ``head_dim``.
- GPT-2 style: ``n_layer``, ``n_embd``, ``n_head``, ``n_inner`` (None means 4h); GPT-NeoX uses the
  Llama-style names with a non-gated GELU MLP.
Gated MLPs (SwiGLU, GeGLU: three matrices) are recognised by ``model_type`` or, for an unknown
type, by a SiLU activation.

Mixture-of-experts configs (field names as in transformers' configuration classes):
- ``mixtral``: ``num_local_experts``, ``num_experts_per_tok``; ``intermediate_size`` is the
  expert width and every layer is MoE.
- ``qwen2_moe`` / ``qwen3_moe``: ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``shared_expert_intermediate_size`` (qwen2_moe), sparse layers
  where ``(i + 1) % decoder_sparse_step == 0`` and i is not in ``mlp_only_layers``.
- ``deepseek_v3`` (and ``deepseek_v2``): ``n_routed_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``n_shared_experts``, ``first_k_dense_replace``,
  ``moe_layer_freq``, ``scoring_func``, group-limited routing's ``n_group`` and
  ``topk_group``, multi-token prediction's ``num_nextn_predict_layers``; MLA's
  ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
  ``v_head_dim``.
- ``gpt_oss``: ``num_local_experts``, ``num_experts_per_tok``, ``intermediate_size`` (expert
  width), ``sliding_window`` on the layers ``layer_types`` marks ``sliding_attention``.
"""

from __future__ import annotations

from typing import Any

GATED_MODEL_TYPES = {
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo",
    "olmo2", "cohere", "internlm2", "yi", "baichuan", "deepseek", "granite", "stablelm",
}
PLAIN_MLP_MODEL_TYPES = {"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "opt", "bloom", "falcon",
                         "phi", "starcoder2", "codegen"}
# tie_word_embeddings defaults in transformers differ by family.
TIED_BY_DEFAULT = {"gpt2", "gpt_bigcode", "opt", "bloom", "codegen", "gemma", "gemma2"}

_LLAMA_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
_GPT2_KEYS = ("n_layer", "n_embd", "n_head", "vocab_size")


MOE_MODEL_TYPES = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                   "gpt_oss"}
GATED_MODEL_TYPES |= MOE_MODEL_TYPES
# Keys by which other configs declare routed experts (olmoe, jamba: num_experts; dbrx:
# ffn_config.moe_num_experts): refused, since their layouts are not mapped.
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def unmapped_moe_keys(config: dict) -> list[str]:
    """Expert keys of a MoE config whose model_type the import does not map."""
    found = []
    for key in MOE_KEYS:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1:
            found.append(f"{key}={value}")
    ffn = config.get("ffn_config")
    if isinstance(ffn, dict) and (ffn.get("moe_num_experts") or 0) > 1:
        found.append(f"ffn_config.moe_num_experts={ffn['moe_num_experts']}")
    return found


def moe_fields(config: dict, model_type: str) -> dict[str, Any]:
    """ModelSpec's expert (and MLA, sliding-window) fields of a mapped MoE config."""
    out: dict[str, Any] = {}
    L = int(config["num_hidden_layers"])
    if model_type in ("mixtral", "gpt_oss"):
        out |= {"num_experts": config.get("num_local_experts"),
                "moe_top_k": config.get("num_experts_per_tok"),
                "moe_ffn_hidden_size": config.get("intermediate_size")}
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        step = int(config.get("decoder_sparse_step") or 1)
        dense = sorted(int(i) for i in config.get("mlp_only_layers") or [])
        if dense != list(range(len(dense))):
            raise ValueError(f"hf_config mlp_only_layers {dense}: only leading dense layers "
                             "are modelled")
        out |= {"num_experts": config.get("num_experts"),
                "moe_top_k": config.get("num_experts_per_tok"),
                "moe_ffn_hidden_size": config.get("moe_intermediate_size"),
                "moe_shared_ffn_hidden_size": config.get("shared_expert_intermediate_size") or 0,
                "first_k_dense_layers": len(dense), "moe_layer_freq": step}
    else:   # deepseek_v2 / deepseek_v3
        out |= {"num_experts": config.get("n_routed_experts"),
                "moe_top_k": config.get("num_experts_per_tok"),
                "moe_ffn_hidden_size": config.get("moe_intermediate_size"),
                "num_shared_experts": int(config.get("n_shared_experts") or 0),
                "first_k_dense_layers": int(config.get("first_k_dense_replace") or 0),
                "moe_layer_freq": int(config.get("moe_layer_freq") or 1),
                "moe_router_score": ("sigmoid" if config.get("scoring_func") == "sigmoid"
                                     else "softmax")}
        if int(config.get("n_group") or 1) > 1:      # group-limited routing
            out |= {"moe_router_num_groups": int(config["n_group"]),
                    "moe_router_group_topk": int(config.get("topk_group") or 1)}
        if int(config.get("num_nextn_predict_layers") or 0) > 0:   # multi-token prediction
            out["mtp_num_layers"] = int(config["num_nextn_predict_layers"])
        if config.get("kv_lora_rank"):
            out |= {"kv_lora_rank": config["kv_lora_rank"],
                    "q_lora_rank": config.get("q_lora_rank"),
                    "head_dim": config.get("qk_nope_head_dim"),
                    "qk_rope_head_dim": int(config.get("qk_rope_head_dim") or 0),
                    "v_head_dim": config.get("v_head_dim")}
    window = config.get("sliding_window")
    kinds = config.get("layer_types")
    if window and isinstance(kinds, list):
        n = sum(1 for k in kinds[:L] if k == "sliding_attention")
        if n:
            out |= {"sliding_window": int(window), "num_sliding_window_layers": n}
    missing = [k for k in ("num_experts", "moe_top_k") if not out.get(k)]
    if missing:
        raise ValueError(f"hf_config (model_type {model_type!r}) lacks the expert count or "
                         "experts per token (num_experts_per_tok)")
    return {k: v for k, v in out.items() if v is not None}


def model_fields_from_hf_config(config: Any) -> dict[str, Any]:
    """Return ModelSpec fields for ``config``; ValueError naming the missing keys otherwise
    (or the expert keys of a mixture-of-experts config, which is refused)."""
    if not isinstance(config, dict):
        raise ValueError("hf_config must be the JSON object of a config.json")
    model_type = str(config.get("model_type", "")).lower()
    experts = unmapped_moe_keys(config) if model_type not in MOE_MODEL_TYPES else []
    if experts:
        raise ValueError(
            f"hf_config describes a mixture-of-experts model ({', '.join(experts)}) of "
            f"model_type {model_type!r}, whose expert layout is not mapped; mapped MoE types: "
            f"{', '.join(sorted(MOE_MODEL_TYPES))} (or give the expert fields explicitly)")
    if "text_config" in config and isinstance(config["text_config"], dict):
        # Multimodal wrappers keep the language model under text_config.
        inner = dict(config["text_config"])
        inner.setdefault("model_type", model_type)
        return model_fields_from_hf_config(inner)

    if all(k in config for k in _GPT2_KEYS) or model_type == "gpt2":
        missing = [k for k in _GPT2_KEYS if config.get(k) is None]
        if missing:
            raise ValueError(_missing(model_type or "gpt2", missing))
        h = int(config["n_embd"])
        fields: dict[str, Any] = {
            "num_layers": int(config["n_layer"]),
            "hidden_size": h,
            "num_attention_heads": int(config["n_head"]),
            "ffn_hidden_size": int(config.get("n_inner") or 4 * h),
            "ffn_type": "gelu",
            "vocab_size": int(config["vocab_size"]),
            "tied_embeddings": bool(config.get("tie_word_embeddings", True)),
        }
    else:
        missing = [k for k in _LLAMA_KEYS if config.get(k) is None]
        if model_type in GATED_MODEL_TYPES or model_type in PLAIN_MLP_MODEL_TYPES:
            if config.get("intermediate_size") is None and model_type != "falcon":
                missing.append("intermediate_size")
        if missing:
            raise ValueError(_missing(model_type or "unknown", missing))
        h = int(config["hidden_size"])
        act = str(config.get("hidden_act") or config.get("hidden_activation") or "").lower()
        gated = model_type in GATED_MODEL_TYPES or (
            model_type not in PLAIN_MLP_MODEL_TYPES and act in ("silu", "swish")
        )
        fields = {
            "num_layers": int(config["num_hidden_layers"]),
            "hidden_size": h,
            "num_attention_heads": int(config["num_attention_heads"]),
            "ffn_hidden_size": int(config.get("intermediate_size") or 4 * h),
            "ffn_type": "swiglu" if gated else "gelu",
            "vocab_size": int(config["vocab_size"]),
            "tied_embeddings": bool(
                config.get("tie_word_embeddings", model_type in TIED_BY_DEFAULT)
            ),
        }
        kv = config.get("num_key_value_heads")
        if kv is None and config.get("multi_query"):
            kv = 1
        if kv is not None:
            fields["num_kv_heads"] = int(kv)
        if config.get("head_dim") is not None:
            fields["head_dim"] = int(config["head_dim"])
        if model_type in MOE_MODEL_TYPES:
            fields |= moe_fields(config, model_type)
            if fields.get("kv_lora_rank"):
                fields.pop("num_kv_heads", None)     # MLA: every head has its keys and values
    name = config.get("_name_or_path") or config.get("name_or_path") or model_type or "hf-model"
    fields["name"] = str(name).rstrip("/").split("/")[-1] or "hf-model"
    return fields


def _missing(model_type: str, keys: list[str]) -> str:
    return (
        f"hf_config (model_type {model_type!r}) lacks required keys: {', '.join(keys)}; "
        "supported are Llama/Mistral/Qwen2-style configs (num_hidden_layers, hidden_size, "
        "num_attention_heads, intermediate_size, vocab_size) and GPT-2-style configs "
        "(n_layer, n_embd, n_head, vocab_size)"
    )
