"""Memoised cost components of one (model, cluster, training, efficiency) setting.

Every quantity here depends on a few plan variables only (a layer's work on (tp, cp,
micro_batch_size, recompute, sequence_parallel); its collectives also on where their group's
ranks sit, which the processes per node decide; a collective on its op, size and group), so a
search over tens of thousands of plans computes each of them once. ``batch.py`` composes them
into step times; the single-plan ``estimate`` goes through the same tables and composition.

Exposed communication of a layer (per micro-batch), Megatron-LM's schedule:
- TP without sequence parallelism: two all-reduces in the forward (after attention-out and
  MLP-down) on the critical path; in the backward the all-reduces of the QKV and MLP-up input
  gradients run beside those layers' weight-gradient GEMMs (``allreduce_dgrad`` in
  ``LinearWithGradAccumulationAndAsyncCommunication``), so only what the wgrad GEMMs cannot
  hide is exposed. With sequence parallelism the forward does two all-gathers and two
  reduce-scatters; the backward two blocking all-gathers of the output gradients, the input
  re-gathers beside the dgrad GEMMs and the input-gradient reduce-scatters beside the wgrad
  GEMMs (Korthikanti et al. section 4.2.2); a stack that keeps the gathered input and
  reduce-scatters its gradient before going on (``async_tensor_model_parallel_allreduce``
  false) blocks for both all-gathers and both reduce-scatters. Full recompute repeats the
  forward's collectives.
- CP (ring attention): cp - 1 exchanges of K and V per layer forward, of K, V and their
  gradients backward, each beside one block of the attention (Liu et al., Ring Attention).
- EP (MoE layers, Megatron-Core's alltoall dispatcher): an all-to-all over the EP group to
  dispatch the routed tokens and one to combine them, in the forward and again (their
  transposes) in the backward, with an all-gather and a reduce-scatter over the ETP group
  when etp > 1; blocking, on the critical path (Megatron-LM's MoE README: "EP All-to-All can
  consume 30-40% of training time without optimization"), unless ``moe_a2a_overlap`` hides
  them behind another micro-batch's compute. The busiest rank's share sets the time
  (``TrainingSpec.moe_load``). The DeepEP dispatcher (``moe_dispatcher = "deepep"``) sends a
  token across the network once per destination node and fans it out over NVLink, so per
  rank and pass the network carries T/tp tokens times the expected number of distinct remote
  nodes its top-k experts fall on, and NVLink the expected distinct GPUs (uniform routing:
  a node holding E/n of the E experts is hit with probability 1 - C(E - E/n, k) / C(E, k),
  less with group-limited routing, ``routing.py``; DeepSeek-V3 report, section 3.2.2;
  DeepEP's normal kernels).
Overlapped collectives slow the compute they hide behind (``overlap_slowdown``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from functools import lru_cache

from planner.calibration.fit import predict
from planner.calibration.model import CalibrationIn, Fit
from planner.collectives import (
    BACKEND_ALGORITHMS,
    NCCL_BASE_LATENCY_S,
    AlphaBeta,
    CollectiveCost,
    GroupTopology,
    collective_time,
    nccl_time,
)
from planner.cost.efficiency import EfficiencyModel
from planner.cost.keyed import RowMemo
from planner.cost.layers import (
    HeadWork,
    LayerShape,
    LayerWork,
    distributes_saved_input,
    head_work,
    kernel_model,
    layer_works,
    moe_tokens,
    mtp_work,
)
from planner.cost.memory import expert_stage_params, stage_params
from planner.cost.reuse import backward_gathers, layer_matrices
from planner.cost.ring import received_kv_width, torch_ring_exchange_bytes, uses_torch_ring
from planner.cost.routing import unit_hit_probability
from planner.cost.tp_overlap import tp_overlap_share
from planner.cost.ulysses import a2a_tensor_elems, cp_split, uses_a2a
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.specs.layout import Layout
from planner.specs.placement import GroupSpan, group_span, launch_layout
from planner.vocabulary import RECOMPUTE


def ddp_bucket_params(dp_size: int) -> int:
    """Megatron-LM's default DDP bucket: max(4e7, 1e6 * dp) parameters
    (``distributed_data_parallel.py``; one bucket without --overlap-grad-reduce)."""
    return max(40_000_000, 1_000_000 * dp_size)


def ring_bandwidth_scale(nodes: int) -> float:
    """Ring collectives across many nodes reach less bus bandwidth than across a few: measured
    reduce-scatter busbw on DGX H100 falls from about 360 to 260 GB/s between 4 and 128 nodes
    (nccl-tests issue 309), about 6% per doubling of the node count beyond 4."""
    if nodes <= 4:
        return 1.0
    return max(0.5, 1.0 - 0.06 * math.log2(nodes / 4))


@dataclass(frozen=True)
class CollectiveUse:
    """A collective a plan issues ``calls`` times per layer per micro-batch (or per step)."""

    strategy: str
    cost: CollectiveCost
    calls: float
    group: GroupTopology
    # Hybrid sharding's all-reduce across the replicas (once a step, or every micro-batch
    # with ``training.hsdp_all_reduce_every_microbatch`` and no pipeline).
    replica: bool = False


# A collective priced once for every recompute mode: (cost, group, calls a pass, calls
# besides), its calls per layer and micro-batch ``a * passes + b`` for the passes that mode
# runs (``uses_of``).
Priced = tuple[CollectiveCost, GroupTopology, int, int]


def uses_of(strategy: str, priced: list[Priced], passes: int) -> list[CollectiveUse]:
    return [CollectiveUse(strategy, cost, a * passes + b, g) for cost, g, a, b in priced]


@dataclass(frozen=True)
class LayerCost:
    """One layer, one micro-batch: compute and the communication it exposes (seconds)."""

    work: LayerWork
    tp_fwd: float       # exposed TP time in the forward
    tp_bwd: float       # in the backward (recomputed forward included)
    cp_fwd: float
    cp_bwd: float
    cp_network_fwd: float = 0.0   # seconds the CP ring occupies the node's NICs (across nodes)
    cp_network_bwd: float = 0.0
    ep_fwd: float = 0.0           # the MoE layers' all-to-all (and ETP) time, mean layer
    ep_bwd: float = 0.0

    @property
    def fwd(self) -> float:
        return self.work.fwd_s + self.tp_fwd + self.cp_fwd + self.ep_fwd

    @property
    def bwd(self) -> float:
        return (self.work.bwd_s + self.work.recompute_s + self.tp_bwd + self.cp_bwd
                + self.ep_bwd)


def overlapped(comm: float, compute: float, slowdown: float) -> float:
    """Time a collective beside ``compute`` adds: what the compute cannot hide, plus the
    compute's slowdown while both run."""
    return max(0.0, comm - compute) + slowdown * min(comm, compute)


def list_fill_bytes(op: str, message_bytes: float) -> float:
    """Bytes a framework that gathers into per-rank lists writes before the call: DeepSpeed
    0.3.13's ``_allgather_param`` zero-fills the flat buffer it narrows (``torch.zeros`` of
    the whole gathered tensor); its reduce-scatter fills nothing."""
    return message_bytes if op == "all_gather" else 0.0


def rank_views(op: str) -> int:
    """Eager views a rank's entry of a per-rank list costs the Python loop that builds it
    (DeepSpeed 0.3.13 ``partition_parameters.py``): a gather's ``flat_tensor.narrow(...)``,
    a reduce-scatter's ``param.grad.view(-1).narrow(...)``."""
    return 2 if op == "reduce_scatter" else 1


class CostTables:
    def __init__(self, model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                 eff: EfficiencyModel, calibration: CalibrationIn | None = None) -> None:
        self.model, self.cluster, self.training, self.eff = model, cluster, training, eff
        self.calibration = calibration
        self._fits: dict[tuple[str, str], list[Fit]] = {}
        for fit in calibration.fits if calibration else ():
            self._fits.setdefault((fit.op, fit.tier), []).append(fit)
        self.nccl = cluster.intra_node.kind != "loopback"
        self.allowed = BACKEND_ALGORITHMS["nccl" if self.nccl else "gloo"]
        self._work: dict[tuple, dict[str, LayerWork]] = {}
        self._layer: dict[tuple, LayerCost] = {}
        self._head: dict[tuple, HeadWork] = {}
        self._mtp: dict[tuple, tuple[float, float, float, float, float]] = {}
        self._coll: dict[tuple, CollectiveCost] = {}
        self._topo: dict[GroupSpan, GroupTopology] = {}
        self._stage_params: dict[tuple, float] = {}
        self._dp: dict[tuple, tuple[float, float, float, float, float]] = {}
        self._p2p: dict[tuple, float] = {}
        self._z3: dict[tuple, tuple[float, float, float, float, float]] = {}
        self._tp_priced: dict[tuple, tuple[GroupTopology, list[CollectiveCost]]] = {}
        self._cp_priced: dict[tuple, list[Priced]] = {}
        self._ep_priced: dict[tuple, list[Priced]] = {}
        self._memos: dict[str, dict] = {}
        self._row_memos: dict[str, RowMemo] = {}

    def memo(self, name: str) -> dict:
        """A named dictionary for callers' derived values (they live as long as the tables)."""
        return self._memos.setdefault(name, {})

    def row_memo(self, name: str) -> RowMemo:
        """A named ``RowMemo`` for one function of key rows (it lives as long as the tables)."""
        return self._row_memos.setdefault(name, RowMemo())

    # -- topology and collectives ---------------------------------------------------------
    def npn(self, world: int) -> int:
        """Processes per node of a plan of ``world`` ranks."""
        return launch_layout(world, self.cluster.gpus_per_node).nproc_per_node

    def topology(self, span: GroupSpan) -> GroupTopology:
        """A group's links: NVLink inside a node (with NVLink SHARP's all_reduce where the
        switches have it); across nodes each member's share of its node's NICs (one rail per
        GPU), rings across many nodes a little slower."""
        hit = self._topo.get(span)
        if hit is None:
            c = self.cluster
            intra = AlphaBeta(c.intra_node.alpha_s, c.intra_node.effective_bandwidth)
            inter = AlphaBeta(c.inter_node.alpha_s, c.inter_node.effective_bandwidth
                              * self.eff.network_scale / c.gpus_per_node
                              * ring_bandwidth_scale(span.nodes))
            nvls = c.nvls_ratio if span.nodes == 1 else None
            hit = self._topo[span] = GroupTopology(span.size, span.min_per_node, intra, inter,
                                                   num_nodes=span.nodes,
                                                   nvls_ratio=nvls or 0.0)
        return hit

    def group(self, size: int, stride: int, npn: int) -> GroupTopology:
        return self.topology(group_span(size, stride, npn))

    def pair(self, size: int, stride: int, npn: int) -> GroupTopology:
        """Two ring or pipeline neighbours: across the network when any neighbouring pair of
        the group is (the slowest hop sets the pace)."""
        return self.topology(_pair_span(group_span(size, stride, npn).neighbours_cross))

    def collective(self, op: str, nbytes: float, group: GroupTopology) -> CollectiveCost:
        key = (op, nbytes, group)
        hit = self._coll.get(key)
        if hit is None:
            hit = self._calibrated(op, nbytes, group)
            if hit is None:
                hit = (nccl_time(op, nbytes, group) if self.nccl else
                       collective_time(op, nbytes, group, allowed=self.allowed))
            self._coll[key] = hit
        return hit

    def _calibrated(self, op: str, nbytes: float, group: GroupTopology) -> CollectiveCost | None:
        """The measured model of ``op`` on this tier, scaled to the group size from the fit
        of the nearest size (``calibration.fit.predict``), when the calibration has one."""
        fits = self._fits.get((op, group.tier))
        if not fits or group.size < 2 or self.calibration is None:
            return None
        fit = min(fits, key=lambda f: (abs(f.group_size - group.size), -f.group_size))
        t = predict(fit, nbytes, group.size) * 1e-6
        return CollectiveCost(op, f"measured ({fit.algorithm} scaling)", nbytes, group.size,
                              group.tier, t, source=self.calibration.id)

    # -- per-layer work ---------------------------------------------------------------------
    def work(self, tp: int, cp: int, mbs: int, rec: int, sp: int, ep: int = 1, etp: int = 1
             ) -> LayerWork:
        key = (tp, cp, mbs, sp, ep, etp)
        hit = self._work.get(key)
        if hit is None:       # every recompute mode's at once (``layers.layer_works``)
            hit = self._work[key] = layer_works(
                self.model, self.training, LayerShape(tp, cp, mbs, "none", bool(sp), ep, etp),
                self.cluster.gpu, self.eff)
        return hit[RECOMPUTE[rec]]

    def layer(self, tp: int, cp: int, mbs: int, rec: int, sp: int, npn: int, ep: int = 1,
              etp: int = 1) -> LayerCost:
        """A layer's compute and exposed TP, CP and EP time per micro-batch on ranks placed
        ``npn`` per node."""
        key = (tp, cp, mbs, rec, sp, npn, ep, etp)
        hit = self._layer.get(key)
        if hit is not None:
            return hit
        lw = self.work(tp, cp, mbs, rec, sp, ep, etp)
        k = self.eff.overlap_slowdown
        ov = tp_overlap_share(self.training, self.eff, bool(sp), tp, npn)
        tp_f = tp_b = cp_f = cp_b = 0.0
        if tp > 1:
            uses = self.tp_uses(tp, cp, mbs, rec, sp, npn)
            t = {u.cost.op: u.cost.time_s for u in uses}
            if sp:
                ag, rs = t["all_gather"], t["reduce_scatter"]
                blocking_f = 2 * ag + 2 * rs
                tp_f = (1 - ov) * blocking_f + overlapped(ov * blocking_f, lw.fwd_s, k)
                if self.training.async_tensor_model_parallel_allreduce:
                    tp_b = ((1 - ov) * 2 * ag + overlapped(2 * ag, lw.dgrad_colpar_s, k)
                            + overlapped(2 * rs, lw.wgrad_colpar_s, k))
                else:
                    tp_b = 2 * ag + 2 * rs
            else:
                ar = t["all_reduce"]
                inputs = self.training.tp_column_parallel_inputs
                tp_f = (1 - ov) * 2 * ar + overlapped(ov * 2 * ar, lw.fwd_s, k)
                tp_b = (overlapped(inputs * ar, lw.wgrad_colpar_s, k)
                        if self.training.async_tensor_model_parallel_allreduce else inputs * ar)
            if rec == 2:
                tp_b += tp_f + sum(u.cost.time_s * u.calls for u in
                                   self.saved_input_gathers(tp, cp, mbs, rec, sp, npn))
            else:       # selective recompute of the MLP block repeats its half of them
                tp_b += tp_f / 2 * self.mlp_recomputed(rec)
                if sp and self.per_op(rec):     # the recomputed norms' outputs re-gathered
                    tp_b += 2 * t["all_gather"]
        net_f = net_b = 0.0
        if uses_a2a(self.training, cp):
            # All-to-all context parallelism (ulysses.py): every all-to-all exposed, the
            # recomputed forward's again under full recompute; in the hierarchy ('a2a+p2p')
            # then Transformer Engine's ring over the c groups, each of its c - 1 steps beside
            # a c-th of the attention.
            uses = self.cp_uses(tp, cp, mbs, rec, sp, npn)
            a2a, ring = uses[:3], uses[3:]
            passes = 2 if rec == 2 else 1
            cp_f = sum(u.cost.time_s * u.calls for u in a2a) / (passes + 1)
            cp_b = cp_f * passes
            if any(u.group.tier == "inter_node" for u in a2a):
                net_f, net_b = cp_f, cp_b
            if ring:
                fwd, bwd = ring
                c = cp_split(self.training, cp)[1]
                ring_f = (c - 1) * overlapped(fwd.cost.time_s, lw.attn_core_fwd_s / c, k)
                cp_f += ring_f
                cp_b += (c - 1) * overlapped(bwd.cost.time_s, lw.attn_core_bwd_s / c, k) + (
                    ring_f if rec == 2 else 0.0)
                if fwd.group.tier == "inter_node":
                    net_f += (c - 1) * fwd.cost.time_s
                    net_b += (c - 1) * (bwd.cost.time_s + (fwd.cost.time_s if rec == 2 else 0))
        elif uses_torch_ring(self.training, cp):
            # PyTorch's ring (ring.py): K,V passed step by step, or all-gathered behind the
            # first step of each pass; of the cp exchanges of the K,V gradients the last is
            # exposed.
            kv_use, grads = self.cp_uses(tp, cp, mbs, rec, sp, npn)
            kv, dkv = kv_use.cost.time_s, grads.cost.time_s
            step_f, step_b = lw.attn_core_fwd_s / cp, lw.attn_core_bwd_s / cp
            if self.training.ring_attention == "torch_allgather":
                cp_f = overlapped(kv, step_f, k)
                cp_b = (overlapped(kv, step_b, k) + (cp - 1) * overlapped(dkv, step_b, k)
                        + dkv)
                net_f, net_b = kv, kv + cp * dkv
            else:
                cp_f = (cp - 1) * overlapped(kv, step_f, k)
                cp_b = (cp - 1) * overlapped(kv + dkv, step_b, k) + dkv
                net_f, net_b = (cp - 1) * kv, (cp - 1) * kv + cp * dkv
            if kv_use.group.tier != "inter_node" and grads.group.tier != "inter_node":
                net_f = net_b = 0.0
            elif rec == 2:
                net_b += net_f
            if rec == 2:
                cp_b += cp_f
        elif cp > 1:
            fwd, bwd = self.cp_uses(tp, cp, mbs, rec, sp, npn)
            steps = cp - 1
            cp_f = steps * overlapped(fwd.cost.time_s, lw.attn_core_fwd_s / cp, k)
            cp_b = steps * overlapped(bwd.cost.time_s, lw.attn_core_bwd_s / cp, k)
            if fwd.group.tier == "inter_node":
                net_f = steps * fwd.cost.time_s
                net_b = steps * bwd.cost.time_s + (net_f if rec == 2 else 0.0)
            if rec == 2:
                cp_b += cp_f
        ep_f = ep_b = 0.0
        for use in self.ep_uses(tp, cp, mbs, rec, sp, npn, ep, etp):
            per_pass = use.cost.time_s * self.model.moe_share * (2 if use.cost.op ==
                                                                 "all_to_all" else 1)
            ep_f += per_pass
            ep_b += per_pass * (2 if self.moe_recomputed(rec) else 1)
        if self.training.moe_a2a_overlap and ep_f:
            ep_f, ep_b = 0.0, overlapped(ep_f + ep_b, lw.fwd_s + lw.bwd_s + lw.recompute_s, k)
        hit = self._layer[key] = LayerCost(lw, tp_f, tp_b, cp_f, cp_b, net_f, net_b, ep_f,
                                           ep_b)
        return hit

    def moe_recomputed(self, rec: int) -> bool:
        """Whether the backward runs a MoE layer's forward again (full recompute, or selective
        recompute of the module ``moe``): its all-to-alls are repeated."""
        return RECOMPUTE[rec] == "full" or (
            RECOMPUTE[rec] == "selective" and "moe" in self.training.recompute_modules)

    def per_op(self, rec: int) -> bool:
        """Whether the plan's recompute is torchtitan's per-op selective policy: it recomputes
        the norms (and with sequence parallelism re-gathers their outputs) for wk and w3."""
        return RECOMPUTE[rec] == "selective" and self.training.selective_recompute == "per_op"

    def mlp_recomputed(self, rec: int) -> float:
        """Share of the layers whose MLP block selective recompute runs again (``mlp`` for
        dense layers, ``moe`` for MoE layers): it repeats that block's TP collectives."""
        if RECOMPUTE[rec] != "selective":
            return 0.0
        mods, phi = self.training.recompute_modules, self.model.moe_share
        return (1 - phi) * ("mlp" in mods) + phi * ("moe" in mods)

    def ep_uses(self, tp: int, cp: int, mbs: int, rec: int, sp: int, npn: int, ep: int,
                etp: int) -> list[CollectiveUse]:
        """Per MoE layer and micro-batch: the dispatch and combine all-to-alls over the EP
        group (ep ranks at stride etp), forward and backward (and the recomputed forward), of
        the busiest rank's routed tokens (T k / tp copies of h values, times the load); with
        etp > 1 the all-gather (dispatch) and reduce-scatter (combine) over the ETP group.
        ``calls`` are per MoE layer."""
        if not self.model.is_moe or ep * etp == 1:
            return []
        passes = 3 if self.moe_recomputed(rec) else 2
        key = (tp, cp, mbs, sp, npn, ep, etp)
        priced = self._ep_priced.get(key)
        if priced is None:
            priced = self._ep_priced[key] = self._price_ep(tp, cp, mbs, sp, npn, ep, etp)
        return uses_of("EP", priced, passes)

    def _price_ep(self, tp: int, cp: int, mbs: int, sp: int, npn: int, ep: int, etp: int
                  ) -> list[Priced]:
        """``ep_uses``' collectives, priced once for every recompute mode."""
        pairs, _ = moe_tokens(self.model, self.training,
                              LayerShape(tp, cp, mbs, "none", bool(sp), ep, etp))
        nbytes = (pairs * self.training.moe_load * self.model.hidden_size
                  * self.training.activation_bytes)
        priced: list[Priced] = []
        if ep > 1:
            g = self.group(ep, etp, npn)
            cost = (self.deepep_dispatch(nbytes / self.model.top_k, g)
                    if self.training.moe_dispatcher == "deepep"
                    else self.collective("all_to_all", nbytes, g))
            priced.append((cost, g, 2, 0))
        if etp > 1:
            g = self.group(etp, 1, npn)
            for op in ("all_gather", "reduce_scatter"):
                priced.append((self.collective(op, nbytes * etp, g), g, 1, 0))
        return priced

    def tp_uses(self, tp: int, cp: int, mbs: int, rec: int, sp: int, npn: int
                ) -> list[CollectiveUse]:
        """Megatron's f/g operators per layer: 2 all-reduces forward and 2 backward (one per
        column-parallel input, ``TrainingSpec.tp_column_parallel_inputs``), or with sequence
        parallelism 2 all-gathers + 2 reduce-scatters forward and 4 + 2 backward (the input
        re-gathered for the weight gradients); full recompute repeats the forward ones
        (Narayanan et al. SC'21 section 2.3; Korthikanti et al. section 4.2.2)."""
        if tp == 1:
            return []
        key = (tp, cp, mbs, sp, npn)
        priced = self._tp_priced.get(key)
        if priced is None:      # (group, its collectives' costs), for every recompute mode
            nbytes = self.hidden_bytes(mbs, cp)
            g = self.group(tp, 1, npn)
            ops = ("all_gather", "reduce_scatter") if sp else ("all_reduce",)
            priced = self._tp_priced[key] = (g, [self.collective(op, nbytes, g) for op in ops])
        g, costs = priced
        extra = 2 if rec == 2 else self.mlp_recomputed(rec)
        if sp:
            regather = 2 if self.per_op(rec) else 0
            return [CollectiveUse("TP", costs[0], 6 + extra + regather, g),
                    CollectiveUse("TP", costs[1], 4 + extra, g)]
        calls = 2 + self.training.tp_column_parallel_inputs + extra
        return [CollectiveUse("TP", costs[0], calls, g)]

    def hidden_bytes(self, mbs: int, cp: int) -> int:
        """Bytes of one micro-batch's hidden state on a context-parallel rank, whole over the
        TP ranks: what TP's collectives move and what a distributed saved input gathers."""
        tokens = mbs * self.training.seq_length // cp
        return tokens * self.model.hidden_size * self.training.activation_bytes

    def saved_input_gathers(self, tp: int, cp: int, mbs: int, rec: int, sp: int, npn: int
                            ) -> list[CollectiveUse]:
        """Full recompute that distributes each layer's saved input over the TP ranks
        (``layers.distributes_saved_input``): one all-gather of that input before the layer
        is recomputed, on the critical path (Megatron-LM's gather_split_1d_tensor in
        CheckpointFunction.backward; DeepSpeed's gather_partitioned_activations)."""
        shape = LayerShape(tp, cp, mbs, RECOMPUTE[rec], bool(sp))
        if not distributes_saved_input(self.training, shape):
            return []
        g = self.group(tp, 1, npn)
        return [CollectiveUse("TP", self.collective("all_gather", self.hidden_bytes(mbs, cp), g),
                              1, g)]

    def cp_uses(self, tp: int, cp: int, mbs: int, rec: int, sp: int, npn: int
                ) -> list[CollectiveUse]:
        """Ring attention (context parallelism): cp - 1 exchanges of the K,V chunk forward,
        of K,V and their gradients backward, each overlapped with a block of attention
        (Transformer Engine's ring); PyTorch's (``TrainingSpec.ring_attention`` 'torch',
        'torch_allgather'): K,V passed cp - 1 times (or all-gathered once) per pass and cp
        exchanges of the K,V gradients (``ring.py``); all-to-all context parallelism ('a2a'):
        one all-to-all of Q, K, V and O a pass, every call exposed (``ulysses.py``); the
        hierarchy ('a2a+p2p'): those over groups of a consecutive CP ranks, then Transformer
        Engine's ring over the c strided ones (``ulysses.cp_split``), its K,V chunk the ring
        of cp ranks' (s / c tokens at kv heads / a)."""
        if cp == 1:
            return []
        key = (tp, cp, mbs, npn)
        priced = self._cp_priced.get(key)
        if priced is None:
            priced = self._cp_priced[key] = self._price_cp(tp, cp, mbs, npn)
        return uses_of("CP", priced, 2 if rec == 2 else 1)

    def _price_cp(self, tp: int, cp: int, mbs: int, npn: int) -> list[Priced]:
        """``cp_uses``' collectives, priced once for every recompute mode (full recompute
        runs the forward's twice: ``passes`` 2)."""
        tokens = mbs * self.training.seq_length // cp
        a, c = cp_split(self.training, cp)
        a2a: list[Priced] = []
        if a > 1:
            # All-to-all context parallelism (ulysses.py): Q and O (and their gradients), K
            # and V (and theirs), each one all-to-all a pass over the a ranks.
            q, kv, o = a2a_tensor_elems(self.model, tokens, tp)
            e = self.training.activation_bytes
            g = self.group(a, tp, npn)
            a2a = [(self.collective("all_to_all", n * e, g), g, calls, calls)
                   for n, calls in ((q, 1), (kv, 2), (o, 1))]
            if c == 1:
                return a2a
        if uses_torch_ring(self.training, cp):
            # PyTorch's ring (ring.py): K,V (at the heads SDPA receives: every query head's
            # under ``repeat_kv``) passed cp - 1 times per pass or all-gathered once, and cp
            # exchanges of their fp32 gradients per backward.
            own, grads = torch_ring_exchange_bytes(
                tokens * received_kv_width(self.model, self.training) / tp,
                self.training.activation_bytes)
            pair = self.pair(cp, tp, npn)
            dkv = (self.collective("send_recv", grads, pair), pair, 0, cp)
            if self.training.ring_attention == "torch_allgather":
                g = self.group(cp, tp, npn)
                return [(self.collective("all_gather", cp * own, g), g, 1, 1), dkv]
            return [(self.collective("send_recv", own, pair), pair, cp - 1, cp - 1), dkv]
        kv_bytes = 2 * tokens * self.model.kv_width / tp * self.training.activation_bytes
        pair = self.pair(c, tp * a, npn)
        return a2a + [(self.collective("send_recv", kv_bytes, pair), pair, c - 1, 0),
                      (self.collective("send_recv", 2 * kv_bytes, pair), pair, 0, c - 1)]

    def deepep_dispatch(self, token_bytes: float, group: GroupTopology) -> CollectiveCost:
        """One DeepEP dispatch (or combine) of ``token_bytes`` of tokens per rank over the EP
        group: the network carries each token once per distinct remote node its experts sit
        on, NVLink once per distinct destination GPU, at the same time (module docstring).
        Reported with the plain all-to-all's message size (k copies per token)."""
        E, k = self.model.experts, self.model.top_k
        p, n, g = group.size, group.nodes, group.ranks_per_node
        G, topg = self.model.router_groups

        def hit(holders: int) -> float:     # P(a unit holding E/holders experts gets a copy)
            return unit_hit_probability(E, k, E // holders, G, topg)

        remote = (n - 1) * hit(n) if n > 1 else 0.0
        gpus = p * hit(p)
        latency = NCCL_BASE_LATENCY_S["direct"][2] + group.flat_link.alpha_s
        # Every delivery but the one landing on the receiving rail's own GPU crosses NVLink
        # once (directly, or forwarded from the node's receiving GPU).
        t = latency + max(token_bytes * gpus * (g - 1) / g / group.intra.bandwidth,
                          token_bytes * remote / group.inter.bandwidth if remote else 0.0)
        return CollectiveCost("all_to_all", "deepep (node-deduplicated)", token_bytes * k, p,
                              group.tier, t)

    def head(self, tp: int, cp: int, mbs: int, npn: int) -> HeadWork:
        """The LM head and loss on ranks placed ``npn`` per node: ``layers.head_work``, and
        where the loss is not vocab-parallel (``TrainingSpec.vocab_parallel_loss`` false) the
        all-gather of the logits over the TP group before it, on the critical path (and again
        where the head is recomputed, ``rerun_s``)."""
        key = (tp, cp, mbs, npn)
        if key not in self._head:
            hw = head_work(self.model, self.training, LayerShape(tp, cp, mbs), self.cluster.gpu,
                           self.eff)
            if hw.gathered_bytes:
                gather = self.collective("all_gather", hw.gathered_bytes, self.group(tp, 1, npn))
                hw = replace(hw, head_fwd_s=hw.head_fwd_s + gather.time_s,
                             rerun_s=hw.rerun_s + gather.time_s)
            self._head[key] = hw
        return self._head[key]

    def mtp(self, tp: int, cp: int, mbs: int, sp: int, npn: int
            ) -> tuple[float, float, float, float, float]:
        """One multi-token prediction module's own (forward, backward) compute, its exposed
        TP (forward, backward) and its FLOPs (``layers.mtp_work``), per micro-batch. TP
        (Megatron-LM ``_concat_embeddings``), in messages of the layer's size M (T h values),
        with sequence parallelism: forward, the vocabulary-parallel embedding's
        reduce-scatter (M), eh_proj's input all-gather (2M) and the all-gather of its output
        (M); backward, their transposes and eh_proj's input re-gathered for its weight
        gradient (2M); without: the embedding's all-reduce and the output all-gather forward,
        the input gradient's all-reduce (2M) backward. Blocking, on the critical path."""
        key = (tp, cp, mbs, sp, npn)
        hit = self._mtp.get(key)
        if hit is None:
            w = mtp_work(self.model, self.training, LayerShape(tp, cp, mbs, "none", bool(sp)),
                         self.cluster.gpu, self.eff)
            tp_f = tp_b = 0.0
            if tp > 1:
                msg = mbs * self.training.seq_length // cp * (self.model.hidden_size
                                                               * self.training.activation_bytes)
                g = self.group(tp, 1, npn)

                def c(op: str, n: float) -> float:
                    return self.collective(op, n, g).time_s

                if sp:
                    tp_f = c("reduce_scatter", msg) + c("all_gather", 2 * msg) + c(
                        "all_gather", msg)
                    tp_b = c("all_gather", msg) + c("reduce_scatter", 2 * msg) + c(
                        "all_gather", msg) + c("all_gather", 2 * msg)
                else:
                    tp_f = c("all_reduce", msg) + c("all_gather", msg)
                    tp_b = c("all_reduce", 2 * msg)
            hit = self._mtp[key] = (w.fwd_s, w.bwd_s, tp_f, tp_b, w.flops)
        return hit

    def largest_stage_params(self, tp: int, layout: Layout) -> float:
        """Parameters on one GPU of the most loaded stage (what its DP group reduces)."""
        key = (tp, layout.stages, layout.mtp_rank)
        hit = self._stage_params.get(key)
        if hit is None:
            p = layout.pp
            hit = self._stage_params[key] = max(
                float(stage_params(self.model, tp, p, n, i == 0, i == p - 1,
                                   i == layout.mtp_rank))
                for i, n in enumerate(layout.stages))
        return hit

    # -- data parallelism ---------------------------------------------------------------------
    def zero3_uses(self, tp: int, cp: int, dp: int, npn: int, ep: int = 1, etp: int = 1,
                   layers: int = 0, recompute: bool = False) -> list[CollectiveUse]:
        """ZeRO-3: all_gather of a layer's weights (forward, and again in the backward) and
        reduce_scatter of its gradients, per layer per micro-batch (Rajbhandari et al. section
        7.2.2), in ``zero3_gathers_per_layer`` calls each: (all_gather, reduce_scatter) of the
        weights TP splits over the dp * cp ranks, then, for a MoE model, of the mean layer's
        routed experts over the expert data parallel group (tp cp dp / (ep etp) ranks at
        stride ep etp: Megatron-FSDP and torchtitan's FSDP shard experts over it). Under
        DeepSpeed's reuse distance (``zero3_max_reuse_params``, dense models) the backward's
        gathers are per weight matrix instead, each ``reuse.backward_gathers`` times on a
        stage of ``layers`` layers, its recompute included."""
        n = self.training.zero3_gathers_per_layer
        parts = [(dp * cp, tp, self.model.nonexpert_params_per_layer / tp)]
        if self.model.is_moe:
            parts.append((tp * cp * dp // (ep * etp), ep * etp,
                          self.model.expert_params_per_layer / (ep * etp)))
        out: list[CollectiveUse] = []
        reuse = self.reuse_counts(tp, layers, recompute)
        for size, stride, layer_p in parts:
            if size == 1:
                continue
            g = self.group(size, stride, npn)
            pb = self.training.layer_gather_bytes
            ag = self.collective("all_gather", layer_p * pb / n, g)
            rs = self.collective("reduce_scatter", layer_p * self.training.grad_reduce_bytes / n,
                                 g)
            if reuse is None:
                out.append(CollectiveUse("ZeRO", ag, 2 * n, g))
            else:
                out.append(CollectiveUse("ZeRO", ag, n, g))
                out += [CollectiveUse("ZeRO", self.collective("all_gather", w * pb, g), c, g)
                        for w, c in zip(layer_matrices(self.model, tp), reuse, strict=True)
                        if c > 0]
            out.append(CollectiveUse("DP", rs, n, g))
        return out

    @property
    def reuse_applies(self) -> bool:
        """Whether DeepSpeed's reuse distance is costed: ``zero3_max_reuse_params`` set on a
        dense model (the stage's layer count then matters to ZeRO-3's gathers)."""
        return self.training.zero3_max_reuse_params is not None and not self.model.is_moe

    def reuse_counts(self, tp: int, layers: int, recompute: bool
                     ) -> tuple[float, ...] | None:
        """Backward gathers per weight matrix (``reuse.backward_gathers``) where DeepSpeed's
        reuse distance applies (``reuse_applies``, a stage of ``layers`` > 0); None where a
        layer is gathered once for its backward."""
        limit = self.training.zero3_max_reuse_params
        if limit is None or not self.reuse_applies or layers <= 0:
            return None
        return backward_gathers(layer_matrices(self.model, tp), layers, limit, recompute)

    def p2p_use(self, tp: int, cp: int, dp: int, pp: int, mbs: int, sp: bool
                ) -> CollectiveUse:
        """Pipeline send/recv of one micro-batch's activations (``_p2p_bytes``)."""
        pair = self.pair(pp, tp * cp * dp, self.npn(tp * cp * dp * pp))
        return CollectiveUse("PP", self.collective(
            "send_recv", self._p2p_bytes(tp, cp, mbs, sp), pair), 2, pair)

    def p2p_time(self, tp: int, cp: int, mbs: int, across_nodes: bool, sp: bool) -> float:
        """Seconds of one pipeline send/recv, inside a node or across the network (memoised)."""
        key = ("p2p", tp, cp, mbs, across_nodes, sp)
        hit = self._p2p.get(key)
        if hit is None:
            hit = self._p2p[key] = self.collective(
                "send_recv", self._p2p_bytes(tp, cp, mbs, sp),
                self.topology(_pair_span(across_nodes))).time_s
        return hit

    def zero3_times(self, tp: int, cp: int, dp: int, npn: int, ep: int = 1, etp: int = 1,
                    layers: int = 0) -> tuple[float, float, float, float, float]:
        """Seconds of one layer's ZeRO-3 traffic per pass, all its calls together (dense and
        expert parts on one stream): (forward all-gather, backward all-gather without
        recompute, backward all-gather under full recompute, reduce-scatter), and 1.0 when a
        group crosses nodes (memoised). The backward gathers differ only under DeepSpeed's
        reuse distance (``zero3_uses``)."""
        key = (tp, cp, dp, npn, ep, etp, layers)
        hit = self._z3.get(key)
        if hit is None:
            n = self.training.zero3_gathers_per_layer

            def gathers(uses: list[CollectiveUse], forward: bool) -> float:
                return sum(u.calls / (2 if forward else 1) * self._call_s(u) for u in uses
                           if u.cost.op == "all_gather")

            plain = self.zero3_uses(tp, cp, dp, npn, ep, etp)
            fwd = gathers(plain, True)
            back_none = back_full = fwd
            if self.reuse_applies and layers > 0:
                back_none, back_full = (
                    gathers(self.zero3_uses(tp, cp, dp, npn, ep, etp, layers, rec), False) - fwd
                    for rec in (False, True))
            hit = self._z3[key] = (
                fwd, back_none, back_full,
                n * sum(self._call_s(u) for u in plain if u.cost.op == "reduce_scatter"),
                float(any(u.group.tier == "inter_node" for u in plain)))
        return hit

    def _call_s(self, use: CollectiveUse) -> float:
        """Seconds of one call of ``use``: the collective and its per-rank copy-out."""
        return use.cost.time_s + self.per_rank_lists_s(use)

    def per_rank_lists_s(self, use: CollectiveUse) -> float:
        """Seconds of one ZeRO-3 call's per-rank lists (``zero3_per_rank_copies``), 0 without.

        The framework builds the list of per-rank views in a Python loop before the call
        (DeepSpeed 0.3.13 ``partition_parameters.py``: ``_allgather_param`` zero-fills the
        flat buffer, ``list_fill_bytes``, and narrows it once a rank, after a
        ``torch.cuda.synchronize()`` that leaves the GPU idle;
        ``_reduce_scatter_gradient`` takes ``param.grad.view(-1).narrow(...)``, two views a
        rank), each view ``view_call_us`` of host time. PyTorch's NCCL ``allgather`` with a
        list output then runs ``outputTensors[i][j].copy_(...)`` for every rank j after the
        collective (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; a list input of
        ``reduce_scatter`` is copied in alike), so p copies of n / p bytes follow each other
        on the NCCL stream, each the longer of the host's call to issue it
        (``copy_call_us``) and the GPU's (a kernel's fixed cost, then read and write of the
        chunk)."""
        if not self.training.zero3_per_rank_copies:
            return 0.0
        p = use.cost.group_size
        chunk = use.cost.message_bytes / p
        km = kernel_model(self.cluster.gpu, self.training, self.eff)
        fill = km.memory(list_fill_bytes(use.cost.op, use.cost.message_bytes))
        return fill + p * (rank_views(use.cost.op) * self.eff.view_call_us * 1e-6
                           + max(self.eff.copy_call_us * 1e-6, km.memory(2 * chunk)))

    def _p2p_bytes(self, tp: int, cp: int, mbs: int, sp: bool) -> float:
        """Bytes one rank sends to the next stage per micro-batch: Megatron-Core sends the
        [s / cp, b, h] activation, split over the TP ranks only when sequence parallelism
        splits it (``get_tensor_shapes`` in megatron/core/pipeline_parallel/schedules.py);
        with ``training.p2p_scatter_gather`` every TP rank sends its 1 / tp share (Megatron-LM's
        2021 scatter/gather, Narayanan et al. SC'21 section 4.1; DeepSpeed's pipeline engine
        partitions activations alike)."""
        tokens = mbs * self.training.seq_length // cp
        split = tp if sp or self.training.p2p_scatter_gather else 1
        return tokens * self.model.hidden_size * self.training.activation_bytes / split

    def dp_costs(self, tp: int, cp: int, dp: int, zero: int, npn: int, stage_params: float,
                 stage_layers: int, ep: int = 1, etp: int = 1, replicas: int = 1,
                 pp: int = 1) -> tuple[float, float, float, float, float]:
        """(buckets, seconds per bucket of the once-per-step gradient reduction, seconds per
        bucket of ZeRO-2's per-micro-batch reduce-scatter, seconds per weight-gather bucket,
        1.0 when a gradient group crosses nodes) of the data-parallel reduction of the most
        loaded stage (its ``stage_params`` non-expert parameters per GPU; the experts of its
        ``stage_layers`` layers reduce over the expert data parallel group, their buckets
        included at their mean time per bucket; memoised). With ``replicas`` > 1 (hybrid
        sharding) ``dp`` is one replica's ranks and each bucket's all-reduce across the
        replicas follows its reduce-scatter, once per step (``dp_uses``), or every
        micro-batch (``every_microbatch``)."""
        key = (tp, cp, dp, zero, npn, stage_params, stage_layers, ep, etp, replicas, pp)
        hit = self._dp.get(key)
        if hit is None:
            uses = self.dp_uses(tp, cp, dp, zero, stage_params, npn,
                                layer_params=self.stage_layer_params(tp, stage_layers),
                                replicas=replicas)
            uses += self.expert_dp_uses(tp, cp, dp, zero, npn, stage_layers, ep, etp,
                                        replicas)
            grads = [u for u in uses if u.strategy == "DP"]
            gathers = [u for u in uses if u.strategy == "ZeRO"]
            # Buckets: those of the reduction (the replicas' all-reduce under ZeRO-3).
            n = sum(u.calls for u in grads if not u.replica or zero >= 3)
            once = sum(u.calls * u.cost.time_s for u in grads
                       if not self.every_microbatch(u, pp, zero))
            per_mb = sum(u.calls * u.cost.time_s for u in grads
                         if self.every_microbatch(u, pp, zero))
            tau_g = sum(u.calls * u.cost.time_s for u in gathers) / n if n else 0.0
            hit = self._dp[key] = (n, once / n if n else 0.0, per_mb / n if n else 0.0, tau_g,
                                   float(any(u.group.tier == "inter_node" for u in grads)))
        return hit

    def dp_uses(self, tp: int, cp: int, dp: int, zero: int, stage_params: float, npn: int,
                group: tuple[int, int] | None = None, layer_params: float = 0.0,
                replicas: int = 1) -> list[CollectiveUse]:
        """Gradient reduction in buckets (all_reduce; reduce_scatter when gradients or
        optimizer states are sharded, unless ``training.zero_grad_allreduce``) and, for
        ZeRO-1/2, the all_gather of the updated weights; ``calls`` = buckets. ``group``
        (size, stride) defaults to the dp * cp ranks at stride tp. ``layer_params`` of the
        ``stage_params`` are transformer-layer weights, which gather at
        ``training.layer_gather_bytes`` (the rest, embeddings and output layer, at
        ``param_bytes``).

        Hybrid sharding (``replicas`` > 1, ``plan.dp_replicate``): ``dp`` is one replica's
        ranks, the group above is one replica's, and each bucket's reduced shard (1 / group
        of the bucket) is then all-reduced across the replicas, the ranks at the same place
        in each (``replicas`` ranks at stride tp cp dp), once per step (``once``): Megatron-
        Core's partial distributed optimizer reduce-scatters a bucket inside its instance and
        all-reduces it across the instances (``--num-distributed-optimizer-instances``);
        PyTorch's HSDP all-reduces each reduce-scattered gradient across the replicate mesh
        dimension (every micro-batch where ``every_microbatch``); DeepSpeed's MiCS at
        the gradient accumulation boundary. Under ZeRO-3 only that all-reduce is here (its
        reduce-scatter is per layer: ``zero3_uses``)."""
        nd, stride = group or (dp * cp, tp)
        hybrid = replicas > 1 and zero >= 1
        if stage_params <= 0 or (nd == 1 and not hybrid) or (zero >= 3 and not hybrid):
            return []
        g = self.group(nd, stride, npn)
        if self.training.overlap_grad_reduce:
            # (Megatron sizes its buckets by the whole data-parallel group, replicas included.)
            n_buckets = max(1, math.ceil(stage_params / ddp_bucket_params(nd * replicas)))
        else:
            n_buckets = 1
        bucket = stage_params / n_buckets
        uses = []
        if zero < 3 and nd > 1:
            op = ("all_reduce" if zero == 0 or self.training.zero_grad_allreduce
                  else "reduce_scatter")
            uses.append(CollectiveUse("DP", self.collective(
                op, bucket * self.training.grad_reduce_bytes, g), n_buckets, g))
        if hybrid:
            rg = self.group(replicas, tp * cp * dp, npn)
            uses.append(CollectiveUse("DP", self.collective(
                "all_reduce", bucket * self.training.grad_reduce_bytes / nd, rg), n_buckets,
                rg, replica=True))
        if zero in (1, 2) and nd > 1:
            layers = min(max(layer_params, 0.0), stage_params)
            gather_bytes = (layers * self.training.layer_gather_bytes
                            + (stage_params - layers) * self.training.param_bytes) / n_buckets
            uses.append(CollectiveUse(
                "ZeRO", self.collective("all_gather", gather_bytes, g), n_buckets, g))
        return uses

    def every_microbatch(self, use: CollectiveUse, pp: int, zero: int) -> bool:
        """Whether a data-parallel gradient collective runs every micro-batch, not once a
        step: ZeRO-2's reduce-scatter; hybrid sharding's all-reduce across the replicas where
        FSDP2 runs it so (``training.hsdp_all_reduce_every_microbatch``: its sharded
        gradients, ZeRO-2/3, without a pipeline, whose schedule reduces at the last
        micro-batch)."""
        if use.replica:
            return self.training.hsdp_all_reduce_every_microbatch and pp == 1 and zero >= 2
        return zero == 2

    def stage_layer_params(self, tp: int, stage_layers: int) -> float:
        """Non-expert transformer-layer weights one GPU of a stage of ``stage_layers`` layers
        holds (``dp_uses``' ``layer_params``)."""
        return stage_layers * self.model.nonexpert_params_per_layer / tp

    def expert_dp_uses(self, tp: int, cp: int, dp: int, zero: int, npn: int, stage_layers: int,
                       ep: int, etp: int, replicas: int = 1) -> list[CollectiveUse]:
        """The routed experts' gradient reduction (and ZeRO-1/2 gather) of a stage of
        ``stage_layers`` layers over the expert data parallel group: tp cp dp / (ep etp) ranks
        at stride ep * etp (Megatron-Core's expert rank order etp, ep, edp); with hybrid
        sharding, ``dp`` one replica's ranks, across the replicas as the dense part."""
        if not self.model.is_moe:
            return []
        edp = tp * cp * dp // (ep * etp)
        params = float(expert_stage_params(self.model, stage_layers, ep, etp))
        return self.dp_uses(tp, cp, dp, zero, params, npn, group=(edp, ep * etp),
                            layer_params=params, replicas=replicas)


def _pair_span(cross: bool) -> GroupSpan:
    """Two ranks, on one node or on two."""
    return GroupSpan(2, 2 if cross else 1, 1 if cross else 2, 1 if cross else 2, cross)


@lru_cache(maxsize=16)
def _kept_tables(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                 eff: EfficiencyModel, calibration: CalibrationIn | None) -> CostTables:
    return CostTables(model, cluster, training, eff, calibration)


def cost_tables(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                eff: EfficiencyModel, calibration: CalibrationIn | None = None) -> CostTables:
    """The tables of one setting, kept across requests (specs are immutable, so a request for
    the same model, cluster and training reuses every component already computed). No
    component depends on the global batch (only the composition's micro-batch count does,
    which it reads from ``tables.training``), so requests that differ only in it share the
    components: each gets a view with its own training."""
    kept = _kept_tables(model, cluster, training.model_copy(update={"global_batch_size": 1}),
                        eff, calibration)
    if kept.training == training:
        return kept
    view = copy.copy(kept)          # the same component dictionaries, this request's batch
    view.training = training
    return view


cost_tables.cache_clear = _kept_tables.cache_clear  # type: ignore[attr-defined]
