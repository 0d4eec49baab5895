"""Request examples shown (and runnable) on the /docs page."""

PLAN_EXAMPLES = {
    "llama3-70b on 4 DGX H100": {
        "summary": "Llama 3 70B on four DGX H100 nodes",
        "value": {
            "model": {"preset": "llama3-70b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 1024, "seq_length": 4096, "precision": "bf16"},
            "search": {"top_k": 5},
        },
    },
    "restricted": {
        "summary": "Only tp 4 or 8, selective or full recompute, at most 8 stages",
        "value": {
            "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-a100", "num_nodes": 2},
            "training": {"global_batch_size": 256, "seq_length": 8192},
            "search": {"top_k": 3, "tp": [4, 8], "recompute": ["selective", "full"],
                       "pp": {"max": 8}},
        },
    },
    "mixtral-8x7b on 4 DGX H100": {
        "summary": "A mixture-of-experts model: the search adds expert parallel degrees",
        "value": {
            "model": {"preset": "mixtral-8x7b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 256, "seq_length": 4096},
            "search": {"top_k": 3},
        },
    },
    "llama3-70b in MXFP8 on a GB200 NVL72 rack": {
        "summary": "Llama 3 70B in MXFP8 (Blackwell's block-scaled fp8) on one GB200 NVL72 "
                   "rack, idle GPUs allowed: NVIDIA's recipes run 64 of its 72",
        "value": {
            "model": {"preset": "llama3-70b"},
            "cluster": {"preset": "gb200-nvl72", "num_nodes": 1},
            "training": {"global_batch_size": 256, "seq_length": 8192, "precision": "fp8",
                         "fp8_recipe": "mxfp8"},
            "search": {"top_k": 3, "allow_idle_gpus": True},
        },
    },
    "pools of H100 and A100 nodes": {
        "summary": "A heterogeneous cluster: pipeline stages assigned to pools",
        "value": {
            "model": {"preset": "llama3-70b"},
            "cluster": {"pools": [{"preset": "dgx-h100", "num_nodes": 2},
                                  {"preset": "dgx-a100", "num_nodes": 4}]},
            "training": {"global_batch_size": 256, "seq_length": 4096},
            "search": {"top_k": 3},
        },
    },
    "long context, all-to-all CP": {
        "summary": "Llama 3 8B at 128K tokens on one DGX H100 node with Megatron-LM's "
                   "all-to-all context parallelism (DeepSpeed-Ulysses' scheme; the answer "
                   "hints at the ring where that is faster)",
        "value": {
            "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 8, "seq_length": 131072,
                         "ring_attention": "a2a"},
            "search": {"top_k": 3, "framework": "megatron"},
        },
    },
    "long context, hierarchical CP": {
        "summary": "Llama 3 8B at 128K tokens on 4 DGX H100 nodes with Megatron-LM's "
                   "hierarchical context parallelism: all-to-alls over 8 consecutive CP ranks "
                   "(one node), Transformer Engine's ring over the groups",
        "value": {
            "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 8, "seq_length": 131072,
                         "ring_attention": "a2a+p2p", "cp_a2a_size": 8},
            "search": {"top_k": 3, "framework": "megatron"},
        },
    },
    "deepspeed autoep": {
        "summary": "Mixtral 8x7B on 4 DGX H100 nodes with DeepSpeed: its experts spread over "
                   "ranks through AutoEP, with grouped expert GEMMs",
        "value": {
            "model": {"preset": "mixtral-8x7b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 256, "seq_length": 4096,
                         "moe_expert_gemm": "grouped"},
            "search": {"top_k": 3, "framework": "deepspeed"},
        },
    },
    "Hugging Face config": {
        "summary": "A model given by its config.json",
        "value": {
            "model": {"hf_config": {"model_type": "mistral", "num_hidden_layers": 32,
                                    "hidden_size": 4096, "num_attention_heads": 32,
                                    "num_key_value_heads": 8, "intermediate_size": 14336,
                                    "vocab_size": 32000, "hidden_act": "silu"}},
            "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 128, "seq_length": 4096},
        },
    },
}

ESTIMATE_EXAMPLES = {
    "deepseek-v3 ep64": {
        "summary": "DeepSeek-V3 on 128 DGX H100 nodes: 64-way expert parallelism, DeepEP",
        "value": {
            "model": {"preset": "deepseek-v3"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 128},
            "training": {"global_batch_size": 8192, "seq_length": 4096, "precision": "fp8",
                         "moe_dispatcher": "deepep"},
            "plan": {"dp": 64, "tp": 2, "pp": 8, "ep": 64, "micro_batch_size": 1,
                     "recompute": "selective", "zero_stage": 1, "sequence_parallel": True},
        },
    },
    "llama3-70b te tp-comm-overlap": {
        "summary": "Llama 3 70B as NVIDIA's recipe runs it on 8 DGX H100 nodes (tp4 pp4 cp2 "
                   "vpp5) with Megatron-LM's --tp-comm-overlap",
        "value": {
            "model": {"preset": "llama3-70b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 8},
            "training": {"global_batch_size": 512, "seq_length": 8192, "tp_comm_overlap": "te"},
            "plan": {"dp": 2, "tp": 4, "pp": 4, "cp": 2, "vpp": 5, "micro_batch_size": 1,
                     "zero_stage": 1, "sequence_parallel": True},
        },
    },
    "llama3-8b hsdp": {
        "summary": "Llama 3 8B on 128 DGX H100 nodes: ZeRO-3 sharded over 16 replicas of 64 "
                   "ranks (hybrid sharding, HSDP)",
        "value": {
            "model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 128},
            "training": {"global_batch_size": 512, "seq_length": 8192},
            "plan": {"dp": 512, "cp": 2, "micro_batch_size": 1, "zero_stage": 3,
                     "dp_replicate": 16},
        },
    },
    "llama3-70b tp8 pp2": {
        "summary": "Llama 3 70B, tp=8, pp=2, dp=2 on four DGX H100 nodes",
        "value": {
            "model": {"preset": "llama3-70b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 1024, "seq_length": 4096},
            "plan": {"dp": 2, "tp": 8, "pp": 2, "micro_batch_size": 1,
                     "recompute": "selective", "zero_stage": 1, "sequence_parallel": True},
        },
    },
}

CLUSTER_EXAMPLES = {
    "48 DGX A100 40GB": {
        "summary": "A preset with overrides",
        "value": {"preset": "dgx-a100", "name": "selene-slice", "num_nodes": 48,
                  "gpu": "a100-40gb"},
    },
    "pools": {
        "summary": "Pools of different GPUs (plan assigns pipeline stages to them)",
        "value": {"name": "mixed-lab", "pools": [{"preset": "dgx-h100", "num_nodes": 2},
                                                 {"preset": "dgx-a100", "num_nodes": 4}]},
    },
    "explicit": {
        "summary": "Every field given",
        "value": {"name": "pcie-lab", "num_nodes": 2, "gpus_per_node": 4, "gpu": "a100-80gb",
                  "intra_node": {"kind": "pcie", "bandwidth_gb_per_s": 32, "latency_us": 3},
                  "inter_node": {"kind": "ethernet", "bandwidth_gb_per_s": 12.5,
                                 "latency_us": 20}},
    },
}
