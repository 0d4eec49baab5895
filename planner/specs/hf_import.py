"""Map a Hugging Face ``config.json`` dict to ModelSpec fields.

Two naming families are understood:
- Llama-style (llama, mistral, mixtral-free dense, qwen2, qwen3, gemma, phi3, olmo, ...):
  ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
  ``intermediate_size``, ``vocab_size``, ``tie_word_embeddings``, ``head_dim``.
- GPT-2 style: ``n_layer``, ``n_embd``, ``n_head``, ``n_inner`` (None means 4h); GPT-NeoX uses the
  Llama-style names with a non-gated GELU MLP.
Gated MLPs (SwiGLU, GeGLU: three matrices) are recognised by ``model_type`` or, for an unknown
type, by a SiLU activation.
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


# Keys by which transformers' configs declare routed experts (mixtral and gpt_oss:
# num_local_experts; qwen2_moe, qwen3_moe, olmoe, jamba: num_experts; deepseek_v2/v3:
# n_routed_experts; dbrx: ffn_config.moe_num_experts) and how many each token uses.
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
            "num_experts_per_tok", "moe_intermediate_size")
MOE_MESSAGE = ("describes a mixture-of-experts model ({keys}); the planner models dense "
               "transformers only (expert parallelism is not supported yet), and costing it "
               "as a dense model would be wrong: refusing it")


def moe_keys(config: dict) -> list[str]:
    """The expert keys of a config that declare more than one expert."""
    found = []
    for key in MOE_KEYS:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1 or (
                key == "moe_intermediate_size" and value):
            found.append(f"{key}={value}")
    ffn = config.get("ffn_config")
    if isinstance(ffn, dict) and (ffn.get("moe_num_experts") or 0) > 1:
        found.append(f"ffn_config.moe_num_experts={ffn['moe_num_experts']}")
    return found


def model_fields_from_hf_config(config: Any) -> dict[str, Any]:
    """Return ModelSpec fields for ``config``; ValueError naming the missing keys otherwise
    (or the expert keys of a mixture-of-experts config, which is refused)."""
    if not isinstance(config, dict):
        raise ValueError("hf_config must be the JSON object of a config.json")
    model_type = str(config.get("model_type", "")).lower()
    experts = moe_keys(config)
    if experts:
        raise ValueError("hf_config " + MOE_MESSAGE.format(keys=", ".join(experts)))
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
