"""Memoised cost components of one (model, cluster, training, efficiency) setting.

Every quantity here depends on a few plan variables only (a layer's work on (tp, cp,
micro_batch_size, recompute, sequence_parallel); a collective on its op, size and group), so a
search over tens of thousands of plans computes each of them once. ``batch.py`` composes them
into step times; the single-plan ``estimate`` goes through the same tables and composition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from planner.calibration.fit import predict
from planner.calibration.model import CalibrationIn, Fit
from planner.collectives import BACKEND_ALGORITHMS, CollectiveCost, GroupTopology, collective_time
from planner.cost.efficiency import EfficiencyModel
from planner.cost.layers import HeadWork, LayerShape, LayerWork, head_work, layer_work
from planner.cost.memory import stage_params
from planner.cost.placement import group_topology
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.specs.plan import split_layers

RECOMPUTE = ("none", "selective", "full")
DDP_BUCKET_PARAMS = 40_000_000   # Megatron-LM DDP default bucket (--ddp-bucket-size)


@dataclass(frozen=True)
class CollectiveUse:
    """A collective a plan issues ``calls`` times per layer per micro-batch (or per step)."""

    strategy: str
    cost: CollectiveCost
    calls: float
    group: GroupTopology


class CostTables:
    def __init__(self, model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                 eff: EfficiencyModel, calibration: CalibrationIn | None = None) -> None:
        self.model, self.cluster, self.training, self.eff = model, cluster, training, eff
        self.calibration = calibration
        self._fits: dict[tuple[str, str], list[Fit]] = {}
        for fit in calibration.fits if calibration else ():
            self._fits.setdefault((fit.op, fit.tier), []).append(fit)
        self.allowed = BACKEND_ALGORITHMS["gloo" if cluster.intra_node.kind == "loopback"
                                          else "nccl"]
        self._layer: dict[tuple, tuple[LayerWork, float, float]] = {}
        self._head: dict[tuple, HeadWork] = {}
        self._coll: dict[tuple, CollectiveCost] = {}
        self._groups: dict[tuple, GroupTopology] = {}
        self._stage_params: dict[tuple, float] = {}

    # -- topology and collectives ---------------------------------------------------------
    def group(self, size: int, stride: int) -> GroupTopology:
        key = (size, stride)
        if key not in self._groups:
            self._groups[key] = group_topology(self.cluster, size, stride)
        return self._groups[key]

    def pair(self, size: int, stride: int) -> GroupTopology:
        """Two neighbours of a group (ring attention, pipeline stages): inside one node when
        the whole group is, else across the network (its slowest hop sets the pace)."""
        g = self.group(size, stride)
        return GroupTopology(2, 2 if g.nodes == 1 else 1, g.intra, g.inter)

    def collective(self, op: str, nbytes: float, group: GroupTopology) -> CollectiveCost:
        # Groups of one cluster differ only in size and ranks per node: a cheap key.
        key = (op, nbytes, group.size, group.ranks_per_node)
        hit = self._coll.get(key)
        if hit is None:
            hit = self._coll[key] = self._calibrated(op, nbytes, group) or collective_time(
                op, nbytes, group, allowed=self.allowed)
        return hit

    def _calibrated(self, op: str, nbytes: float, group: GroupTopology) -> CollectiveCost | None:
        """The measured model of ``op`` on this tier, scaled to the group size from the fit
        of the nearest size (``calibration.fit.predict``), when the calibration has one."""
        fits = self._fits.get((op, group.tier))
        if not fits or group.size < 2:
            return None
        fit = min(fits, key=lambda f: (abs(f.group_size - group.size), -f.group_size))
        t = predict(fit, nbytes, group.size) * 1e-6
        return CollectiveCost(op, f"measured ({fit.algorithm} scaling)", nbytes, group.size,
                              group.tier, t, source=self.calibration.id)

    # -- per-layer work ---------------------------------------------------------------------
    def _plan(self, tp: int, cp: int, mbs: int, rec: int, sp: int) -> LayerShape:
        return LayerShape(tp, cp, mbs, RECOMPUTE[rec], bool(sp))

    def layer(self, tp: int, cp: int, mbs: int, rec: int, sp: int) -> tuple[LayerWork, float, float]:
        """(work, exposed TP seconds, exposed CP seconds) per layer per micro-batch."""
        key = (tp, cp, mbs, rec, sp)
        if key not in self._layer:
            plan = self._plan(*key)
            lw = layer_work(self.model, self.training, plan, self.cluster.gpu, self.eff)
            tp_s = sum(u.cost.time_s * u.calls for u in self.tp_uses(*key))
            tp_s *= 1 - self.eff.tp_comm_overlap
            cp_s = 0.0
            if cp > 1:
                fwd, bwd = self.cp_uses(*key)
                passes = 2 if rec == 2 else 1
                steps = cp - 1
                cp_s = (passes * max(0.0, steps * fwd.cost.time_s - lw.attn_core_fwd_s)
                        + max(0.0, steps * bwd.cost.time_s - 2.5 * lw.attn_core_fwd_s))
            self._layer[key] = (lw, tp_s, cp_s)
        return self._layer[key]

    def tp_uses(self, tp: int, cp: int, mbs: int, rec: int, sp: int) -> list[CollectiveUse]:
        """Megatron's f/g operators: 2 collectives per layer forward and 2 backward (all_reduce,
        or all_gather + reduce_scatter with sequence parallelism); full recompute repeats the
        forward ones (Narayanan et al. SC'21 section 2.3; Korthikanti et al. section 4.2.2)."""
        if tp == 1:
            return []
        tokens = mbs * self.training.seq_length // cp
        nbytes = tokens * self.model.hidden_size * self.training.activation_bytes
        passes = 3 if rec == 2 else 2
        ops = ("all_gather", "reduce_scatter") if sp else ("all_reduce",)
        g = self.group(tp, 1)
        return [CollectiveUse("TP", self.collective(op, nbytes, g), 2 * passes, g) for op in ops]

    def cp_uses(self, tp: int, cp: int, mbs: int, rec: int, sp: int) -> list[CollectiveUse]:
        """Ring attention (context parallelism): cp - 1 exchanges of the K,V chunk forward,
        of K,V and their gradients backward, each overlapped with the attention core."""
        if cp == 1:
            return []
        tokens = mbs * self.training.seq_length // cp
        kv_bytes = 2 * tokens * self.model.kv_width / tp * self.training.activation_bytes
        pair = self.pair(cp, tp)
        passes = 2 if rec == 2 else 1
        return [CollectiveUse("CP", self.collective("send_recv", kv_bytes, pair),
                              (cp - 1) * passes, pair),
                CollectiveUse("CP", self.collective("send_recv", 2 * kv_bytes, pair), cp - 1,
                              pair)]

    def head(self, tp: int, cp: int, mbs: int) -> HeadWork:
        key = (tp, cp, mbs)
        if key not in self._head:
            self._head[key] = head_work(self.model, self.training, LayerShape(tp, cp, mbs),
                                        self.cluster.gpu, self.eff)
        return self._head[key]

    def largest_stage_params(self, tp: int, pp: int,
                             layers_per_stage: tuple[int, ...] | None = None) -> float:
        """Parameters on one GPU of the most loaded stage (what its DP group reduces)."""
        key = (tp, pp, layers_per_stage)
        hit = self._stage_params.get(key)
        if hit is None:
            split = layers_per_stage or split_layers(self.model.num_layers, pp)
            hit = self._stage_params[key] = max(
                float(stage_params(self.model, tp, pp, n, i == 0, i == pp - 1))
                for i, n in enumerate(split))
        return hit

    # -- per-step communication ---------------------------------------------------------------
    def zero3_uses(self, tp: int, cp: int, dp: int) -> tuple[CollectiveUse, CollectiveUse]:
        """ZeRO-3: all_gather of a layer's weights (forward and backward) and reduce_scatter of
        its gradients, per layer per micro-batch (Rajbhandari et al. section 7.2.2)."""
        g = self.group(dp * cp, tp)
        layer_p = self.model.params_per_layer / tp
        ag = self.collective("all_gather", layer_p * self.training.param_bytes, g)
        rs = self.collective("reduce_scatter", layer_p * self.training.grad_bytes, g)
        return CollectiveUse("ZeRO", ag, 2, g), CollectiveUse("DP", rs, 1, g)

    def p2p_use(self, tp: int, cp: int, dp: int, pp: int, mbs: int) -> CollectiveUse:
        """Pipeline send/recv of one micro-batch's activations, split over the TP ranks
        (the scatter/gather optimisation, Narayanan et al. section 4.1)."""
        tokens = mbs * self.training.seq_length // cp
        nbytes = tokens * self.model.hidden_size * self.training.activation_bytes / tp
        pair = self.pair(pp, tp * cp * dp)
        return CollectiveUse("PP", self.collective("send_recv", nbytes, pair), 2, pair)

    def dp_uses(self, tp: int, cp: int, dp: int, zero: int, stage_params: float
                ) -> list[CollectiveUse]:
        """Gradient reduction in buckets (all_reduce; reduce_scatter with a sharded optimizer)
        and, for ZeRO-1/2, the all_gather of the updated weights; ``calls`` = buckets."""
        if dp * cp == 1 or zero >= 3:
            return []
        g = self.group(dp * cp, tp)
        n_buckets = max(1, math.ceil(stage_params / DDP_BUCKET_PARAMS))
        bucket = stage_params / n_buckets
        op = "all_reduce" if zero == 0 else "reduce_scatter"
        uses = [CollectiveUse("DP", self.collective(op, bucket * self.training.grad_bytes, g),
                              n_buckets, g)]
        if zero in (1, 2):
            uses.append(CollectiveUse(
                "ZeRO", self.collective("all_gather", bucket * self.training.param_bytes, g),
                n_buckets, g))
        return uses


@lru_cache(maxsize=16)
def cost_tables(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                eff: EfficiencyModel, calibration: CalibrationIn | None = None) -> CostTables:
    """The tables of one setting, kept across requests (specs are immutable, so a request for
    the same model, cluster and training reuses every component already computed)."""
    return CostTables(model, cluster, training, eff, calibration)
