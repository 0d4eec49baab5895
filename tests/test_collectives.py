"""Collective formulas against numbers worked by hand (Thakur et al. 2005; nccl-tests)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.collectives import (
    ALGORITHMS,
    BACKEND_ALGORITHMS,
    COLLECTIVES,
    AlphaBeta,
    GroupTopology,
    bus_bandwidth,
    bus_factor,
    collective_time,
)

GIB = 2**30
A = 1e-6          # alpha: 1 us per step
BW = 100e9        # 100 GB/s
LINK = AlphaBeta(A, BW)


def one_node(p: int) -> GroupTopology:
    return GroupTopology(size=p, ranks_per_node=p, intra=LINK, inter=AlphaBeta(5e-6, 10e9))


def t(op, alg, n, p):
    return collective_time(op, n, one_node(p), alg).time_s


# Hand-worked: p = 8, n = 1 GiB = 1,073,741,824 B, n * beta = 0.01073741824 s.
NB = 0.01073741824


@pytest.mark.parametrize("op,alg,expected", [
    # ring all_reduce: 2(p-1) a + 2(p-1)/p n b = 14e-6 + 1.75 * NB
    ("all_reduce", "ring", 14e-6 + 0.01879048192),
    # double binary tree: 2 lg p a + 2 n b = 6e-6 + 2 NB
    ("all_reduce", "tree", 6e-6 + 0.02147483648),
    # recursive doubling: lg p (a + n b) = 3e-6 + 3 NB
    ("all_reduce", "recursive_doubling", 3e-6 + 0.03221225472),
    # Rabenseifner: 2 lg p a + 2 (p-1)/p n b
    ("all_reduce", "halving_doubling", 6e-6 + 0.01879048192),
    # ring all_gather / reduce_scatter: (p-1) a + (p-1)/p n b = 7e-6 + 0.875 NB
    ("all_gather", "ring", 7e-6 + 0.00939524096),
    ("reduce_scatter", "ring", 7e-6 + 0.00939524096),
    ("all_gather", "recursive_doubling", 3e-6 + 0.00939524096),
    ("reduce_scatter", "halving_doubling", 3e-6 + 0.00939524096),
    # binomial broadcast: lg p (a + n b)
    ("broadcast", "tree", 3e-6 + 0.03221225472),
    ("reduce", "tree", 3e-6 + 0.03221225472),
    # scatter/gather: tree lg p a, direct (p-1) a, both + (p-1)/p n b
    ("scatter", "tree", 3e-6 + 0.00939524096),
    ("gather", "direct", 7e-6 + 0.00939524096),
    # pairwise all_to_all (n = bytes one rank sends): (p-1) a + (p-1)/p n b
    ("all_to_all", "direct", 7e-6 + 0.00939524096),
    # Bruck: lg p a + (n/2) lg p b = 3e-6 + 1.5 NB
    ("all_to_all", "recursive_doubling", 3e-6 + 0.01610612736),
])
def test_formula_by_hand(op, alg, expected):
    assert t(op, alg, GIB, 8) == pytest.approx(expected, rel=1e-12)


def test_send_recv_is_alpha_plus_n_beta():
    c = collective_time("send_recv", GIB, one_node(2))
    assert c.time_s == pytest.approx(1e-6 + NB)
    assert c.algorithm == "direct"


def test_pipelined_chain_broadcast_beats_tree_for_large_messages():
    # (p - 2 + k)(a + n b / k) with the best k is close to n b for huge n.
    ring = t("broadcast", "ring", GIB, 8)
    assert NB < ring < 1.05 * NB
    assert ring < t("broadcast", "tree", GIB, 8)


def test_non_power_of_two_recursive_doubling_pays_two_extra_steps():
    # p = 6: lg p = 3 plus two fold steps (a + n b) each.
    n = 1e6
    nb = n / BW
    assert t("all_reduce", "recursive_doubling", n, 6) == pytest.approx(3 * (A + nb) + 2 * (A + nb))


def test_hierarchical_all_reduce_by_hand():
    # 2 nodes x 8 ranks; intra 1 us / 100 GB/s; each rank's network share 5 us / 10 GB/s.
    inter = AlphaBeta(5e-6, 10e9)
    g = GroupTopology(size=16, ranks_per_node=8, intra=LINK, inter=inter)
    n = 800e6
    rs = 7 * A + 7 / 8 * n / BW
    # inter-node all_reduce of n/8 = 100 MB over 2 ranks: ring 2(1) a + 2(1/2) m b = tree etc.
    m = n / 8
    inter_ar = min(2 * 5e-6 + m / 10e9, 2 * 5e-6 + 2 * m / 10e9, 5e-6 + m / 10e9)
    expected = rs + inter_ar + rs
    assert collective_time("all_reduce", n, g, "hierarchical").time_s == pytest.approx(expected)


def test_flat_algorithm_across_nodes_runs_at_its_slowest_hop():
    inter = AlphaBeta(5e-6, 10e9)
    g = GroupTopology(size=16, ranks_per_node=8, intra=LINK, inter=inter)
    # 8 rails leave each node: min(100 GB/s, 8 * 10 GB/s) = 80 GB/s, network alpha.
    assert g.flat_link == AlphaBeta(5e-6, 80e9)
    assert g.tier == "inter_node" and g.nodes == 2
    one_per_node = GroupTopology(size=4, ranks_per_node=1, intra=LINK, inter=inter)
    assert one_per_node.flat_link == AlphaBeta(5e-6, 10e9)
    n = 1e9
    assert collective_time("all_reduce", n, one_per_node, "ring").time_s == pytest.approx(
        6 * 5e-6 + 1.5 * n / 10e9)


def test_all_to_all_across_nodes_runs_at_the_rails_speed():
    """Every rank sends (p - g)/p of its buffer over its own rail and (g - 1)/p over NVLink at
    once: a ring's bandwidth (8 rails together) would be 8 times too fast."""
    from planner.collectives import NCCL_BASE_LATENCY_S, nccl_time

    inter = AlphaBeta(5e-6, 10e9)
    g = GroupTopology(size=16, ranks_per_node=8, intra=LINK, inter=inter)
    n = 1e9
    flat = collective_time("all_to_all", n, g, "direct").time_s
    assert flat == pytest.approx(15 * 5e-6 + max(7 / 16 * n / BW, 8 / 16 * n / 10e9))
    got = nccl_time("all_to_all", n, g)
    # NCCL's Simple protocol: base latency, p - nodes = 14 NVLink steps and 1 network step,
    # then the larger of the two transfers.
    want = (NCCL_BASE_LATENCY_S["direct"][2] + 14 * A + 1 * 5e-6 + 8 / 16 * n / 10e9)
    assert got.time_s == pytest.approx(want) and got.algorithm == "direct/Simple"
    assert got.busbw_gb_per_s == pytest.approx(n / want * 15 / 16 / 1e9)
    # Inside one node nothing changes: (p - 1)/p n over NVLink.
    one = nccl_time("all_to_all", n, one_node(8))
    assert one.time_s == pytest.approx(NCCL_BASE_LATENCY_S["direct"][2] + 7 * A + 7 / 8 * n / BW)


def test_auto_picks_the_cheapest_and_respects_the_backend():
    g = one_node(8)
    for op in COLLECTIVES:
        if op == "send_recv":
            continue
        for n in (8, 1e4, 1e9):
            auto = collective_time(op, n, g)
            assert auto.time_s == pytest.approx(min(
                collective_time(op, n, g, alg).time_s
                for alg in ALGORITHMS[op] if alg != "hierarchical"))
    nccl = BACKEND_ALGORITHMS["nccl"]
    small = collective_time("all_reduce", 1024, g, allowed=nccl)
    large = collective_time("all_reduce", GIB, g, allowed=nccl)
    assert small.algorithm == "tree"    # latency-bound: 2 lg p steps beat 2(p-1)
    assert large.algorithm == "ring"    # bandwidth-bound: 2(p-1)/p beats 2


def test_nccl_tests_bus_bandwidth():
    # nccl-tests: busbw = algbw * 2(n-1)/n for all_reduce; 1 GB in 10 ms on 8 ranks:
    # algbw 100 GB/s, busbw 175 GB/s.
    assert bus_bandwidth("all_reduce", 1e9, 8, 0.01) == pytest.approx(175e9)
    assert bus_factor("all_gather", 4) == 0.75
    assert bus_factor("broadcast", 16) == 1.0
    # A predicted ring all_reduce has busbw close to the link's bandwidth for large n.
    c = collective_time("all_reduce", 8 * GIB, one_node(8), "ring")
    assert c.busbw_gb_per_s == pytest.approx(100, rel=1e-3)


def test_single_rank_costs_nothing():
    assert collective_time("all_reduce", GIB, one_node(1)).time_s == 0.0


@pytest.mark.parametrize("call,msg", [
    (lambda: collective_time("allreduce", 1, one_node(2)), "unknown collective"),
    (lambda: collective_time("all_gather", 1, one_node(4), "tree"), "not available"),
    (lambda: collective_time("send_recv", 1, one_node(4)), "between 2 ranks"),
    (lambda: collective_time("all_reduce", -1, one_node(4)), "must be >= 0"),
    (lambda: collective_time("all_reduce", 1, one_node(4), "hierarchical"), "several nodes"),
    (lambda: AlphaBeta(1e-6, 0), "bandwidth > 0"),
])
def test_bad_input_is_rejected(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


@given(op=st.sampled_from([o for o in COLLECTIVES if o != "send_recv"]),
       p=st.integers(2, 64), g=st.sampled_from([1, 2, 4, 8]),
       n1=st.floats(1, 1e10), n2=st.floats(1, 1e10))
def test_cost_grows_with_message_size(op, p, g, n1, n2):
    g = min(g, p)
    topo = GroupTopology(p, g, LINK, AlphaBeta(5e-6, 10e9))
    lo, hi = sorted((n1, n2))
    assert collective_time(op, lo, topo).time_s <= collective_time(op, hi, topo).time_s * (
        1 + 1e-12)
    assert math.isfinite(collective_time(op, hi, topo).time_s)
