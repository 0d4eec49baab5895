"""Where a token's routed copies land: the chance that a unit of consecutive experts (a GPU or
a node of the expert-parallel group) receives at least one of a token's top-k copies, under
balanced routing (every expert equally likely, as NVIDIA's benchmarks force it) and
group-limited routing.

Group-limited routing (DeepSeek-V2 section 2.1.2 "device-limited routing", DeepSeek-V3 report
section 2.1.2 "node-limited routing": each token goes to at most M nodes; Megatron-LM
``--moe-router-num-groups G --moe-router-group-topk g``, HF ``n_group`` / ``topk_group``)
splits the E experts into G groups of s = E / G consecutive experts, picks g groups per token
and its k experts among those g s. With balanced routing:

- a unit holding whole groups (u = j_max s experts) is hit unless none of its groups is picked
  or, given j of them are, none of the k experts falls in them:
      P = sum_j H(j; G, j_max, g) (1 - C((g - j) s, k) / C(g s, k)),
  H the hypergeometric law of picking j of the unit's j_max groups among g of G;
- a unit inside one group (s a multiple of u) is hit when its group is picked and one of the
  k experts among the g s is its own: P = (g / G) (1 - C(g s - u, k) / C(g s, k)).

Without groups (G = g = 1) both reduce to 1 - C(E - u, k) / C(E, k). DeepEP sends a token over
the network once per distinct remote node and over NVLink once per distinct GPU, so these
probabilities set its traffic (``tables.CostTables.deepep_dispatch``).
"""

from __future__ import annotations

import math


def unit_hit_probability(experts: int, top_k: int, unit_experts: int, groups: int = 1,
                         group_topk: int = 1) -> float:
    """P(a unit of ``unit_experts`` consecutive experts gets at least one of a token's
    ``top_k`` copies); see the module docstring. Units that neither hold whole groups nor
    sit inside one are costed as without groups (the wider spread: an upper bound)."""
    E, k, u = experts, top_k, max(1, min(unit_experts, experts))
    G, g = max(1, groups), max(1, min(group_topk, groups))
    s = E // G
    if G == 1 or E % G:
        return 1.0 - math.comb(E - u, k) / math.comb(E, k)
    pool = math.comb(g * s, k)
    if u % s == 0:
        held = u // s
        p = 0.0
        for j in range(max(0, g - (G - held)), min(held, g) + 1):
            picked = math.comb(held, j) * math.comb(G - held, g - j) / math.comb(G, g)
            p += picked * (1.0 - math.comb((g - j) * s, k) / pool)
        return p
    if s % u == 0:
        return g / G * (1.0 - math.comb(g * s - u, k) / pool)
    return 1.0 - math.comb(E - u, k) / math.comb(E, k)
