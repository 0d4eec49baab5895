"""How a model's layers are laid out over pipeline ranks and their virtual stages (chunks).

A layout gives, for each of the pp pipeline ranks, the transformer layers of each of its vpp
model chunks; the embedding lives in chunk 0 of rank 0, the LM head and loss in the last chunk
of the last rank. Megatron-LM runs virtual stage k = chunk * pp + rank in order (its
``--pipeline-model-parallel-layout`` lists stages that way, ``pipeline_parallel_layer_layout.py``).

The default layout of (L layers, pp, vpp), in the order a user's framework would take it:

- ``even``: every chunk holds L / (pp * vpp) layers.
- ``embedding_loss``: the embedding and the loss count as one layer each, and the L + 2 units
  split evenly over the pp * vpp chunks, so the first chunk of rank 0 and the last chunk of the
  last rank hold one layer less (Megatron's ``--account-for-embedding-in-pipeline-split`` and
  ``--account-for-loss-in-pipeline-split``; torchtitan's default
  ``pipeline_parallel_first/last_stage_less_layers = 1``; how Llama 3 405B's 126 layers run on
  16 stages, Dubey et al. 2024 section 3.3.2).
- ``first_last`` (one chunk per rank): the middle ranks hold c layers and the first and last
  ranks share the rest, the last taking the smaller half (Megatron's
  ``--decoder-first/last-pipeline-num-layers``).
- ``custom``: anything else, e.g. layers that do not divide pp * vpp: each rank's layers
  (the ``first_last`` totals) spread as evenly as possible over its chunks (Megatron's
  ``--pipeline-model-parallel-layout``; torchtitan's ``module_fqns_per_model_part``).

An explicit ``layers_per_stage`` (per rank) is laid out the same way inside each rank. Its
last rank may hold no layer where there are no virtual stages: the LM head and the loss alone
(``custom``: Megatron-LM's layout string ending '|L', whose --decoder-last-pipeline-num-layers
must be positive; nanotron's cost-balanced split, models/base.py ``build_model``, places a
large vocabulary's head so).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

LayoutKind = Literal["even", "embedding_loss", "first_last", "custom"]


@dataclass(frozen=True)
class Layout:
    """Transformer layers per rank and per (rank, chunk)."""

    stages: tuple[int, ...]
    chunks: tuple[tuple[int, ...], ...]
    kind: LayoutKind
    # Multi-token prediction in its own virtual stage before the loss's (``explicit_layout``).
    mtp_standalone: bool = False

    @property
    def mtp_rank(self) -> int:
        """The rank whose last chunk holds the multi-token prediction modules: the last, or
        the one before it when they stand alone."""
        return self.pp - 2 if self.mtp_standalone else self.pp - 1

    @property
    def pp(self) -> int:
        return len(self.stages)

    @property
    def vpp(self) -> int:
        return len(self.chunks[0])

    def virtual_stages(self) -> list[int]:
        """Layers of each virtual stage in execution order (chunk-major, rank-minor)."""
        return [self.chunks[r][c] for c in range(self.vpp) for r in range(self.pp)]


@lru_cache(maxsize=4096)
def first_last_splits(num_layers: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """Every split of the layers over pp ranks that Megatron-LM's
    ``--decoder-first/last-pipeline-num-layers`` express: a layer or more on every rank, the
    middle ranks equal (pp = 2: any first and last)."""
    if pp == 1:
        return ((num_layers,),)
    out = []
    mids = range(1, (num_layers - 2) // (pp - 2) + 1) if pp > 2 else [0]
    for mid in mids:
        ends = num_layers - (pp - 2) * mid
        out += [(f,) + (mid,) * (pp - 2) + (ends - f,) for f in range(1, ends)]
    return tuple(out)


@lru_cache(maxsize=4096)
def interleaved_splits(num_layers: int, pp: int, vpp: int) -> tuple[tuple[int, ...], ...]:
    """The first/last splits whose every rank holds a layer per chunk at least (each rank's
    layers then spread evenly over its vpp chunks, ``explicit_layout``; Megatron-LM's
    ``--pipeline-model-parallel-layout`` runs any of them)."""
    splits = first_last_splits(num_layers, pp)
    return splits if vpp == 1 else tuple(s for s in splits if min(s) >= vpp)


@lru_cache(maxsize=4096)
def head_alone_splits(num_layers: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """The splits whose last rank holds the LM head and the loss alone (no layer), the others
    in the first/last form: the first rank f layers, the middle ranks the same count, a layer
    or more each (Megatron-LM's layout '...|L'; without virtual stages only)."""
    if pp < 2:
        return ()
    if pp == 2:
        return ((num_layers, 0),)
    return tuple((num_layers - (pp - 2) * mid,) + (mid,) * (pp - 2) + (0,)
                 for mid in range(1, (num_layers - 1) // (pp - 2) + 1))


@lru_cache(maxsize=4096)
def search_splits(num_layers: int, pp: int, vpp: int) -> tuple[tuple[int, ...], ...]:
    """The splits the search's uneven-stage pass costs: ``interleaved_splits``, and without
    virtual stages the ``head_alone_splits`` too."""
    splits = interleaved_splits(num_layers, pp, vpp)
    return splits + head_alone_splits(num_layers, pp) if vpp == 1 else splits


def layout_of(num_layers: int, pp: int, vpp: int = 1) -> Layout:
    """The default layout of a plan already known to have one (a plan of the search space)."""
    layout = default_layout(num_layers, pp, vpp)
    if layout is None:
        raise ValueError(f"no layout of {num_layers} layers over pp({pp}) * vpp({vpp})")
    return layout


def split_layers(num_layers: int, pp: int) -> tuple[int, ...]:
    """Per-rank layers of the ``first_last`` form: the middle ranks hold c layers and the first
    and last share the rest, the last taking the smaller half. c is ceil(L / p) when that leaves
    the first and last rank a layer each, else floor(L / p); an even split when p divides L."""
    if pp == 1:
        return (num_layers,)
    if pp == 2:
        return (num_layers - num_layers // 2, num_layers // 2)
    c = -(-num_layers // pp)
    if num_layers - (pp - 2) * c < 2:
        c = num_layers // pp
    ends = num_layers - (pp - 2) * c
    return (ends - ends // 2,) + (c,) * (pp - 2) + (ends // 2,)


def _spread(n: int, v: int) -> tuple[int, ...]:
    """n layers over v chunks as evenly as possible, the larger chunks first: a rank whose
    last chunk runs longer than its others stalls the interleaved schedule (the event
    simulation, ``cost.pipeline.simulate``)."""
    base, extra = divmod(n, v)
    return tuple([base + 1] * extra + [base] * (v - extra))


def _common_chunk(stages: tuple[int, ...], vpp: int) -> int | None:
    """Layers of a chunk on the ranks whose layers fill whole chunks, the most of them (the
    larger count on a tie); None when no rank's do."""
    counts = [n // vpp for n in stages if n % vpp == 0 and n]
    return max(set(counts), key=lambda c: (counts.count(c), c)) if counts else None


def _chunks_of(stages: tuple[int, ...], vpp: int) -> tuple[tuple[int, ...], ...]:
    """Each rank's layers over its chunks as NVIDIA's published layouts place them: every
    chunk holds the common count c, and a rank one chunk short of v c leaves the shortfall
    in its first chunk on the first rank (beside the embedding) and in its last elsewhere
    (beside the loss, or the MTP modules); other ranks spread evenly, larger chunks first.
    Megatron-Bridge 25.09's DeepSeek-V3 layout 'Et|(tt|)*30mL' (ranks of 7, 8, ..., 8, 6
    layers: 1 2 2 2, 2 2 2 2, ..., 2 2 2 0) and the Megatron Core MoE report's
    'Et*3|(tt|)*29m|L' (9, 8, ..., 6, 6: 3 2 2 2, ..., 2 2 2 0) are this rule's; with the
    report's first rank at 2 2 2 3, a heavy last chunk, the event simulation runs 5% longer
    than at 3 2 2 2."""
    if vpp == 1:
        return tuple((n,) for n in stages)
    c = _common_chunk(stages, vpp)
    out = []
    for r, n in enumerate(stages):
        short = -1 if c is None else n - (vpp - 1) * c
        if c is not None and 0 <= short < c:
            out.append((short,) + (c,) * (vpp - 1) if r == 0 else (c,) * (vpp - 1) + (short,))
        else:
            out.append(_spread(n, vpp))
    return tuple(out)


@lru_cache(maxsize=65536)
def default_layout(num_layers: int, pp: int, vpp: int = 1) -> Layout | None:
    """The layout a plan without explicit stages gets, or None when the layers cannot fill
    pp * vpp chunks (fewer layers than chunks, the embedding and loss chunks aside)."""
    chunks = pp * vpp
    if num_layers + 2 < chunks or (pp == 1 and vpp > 1):
        return None
    if num_layers % chunks == 0:
        per = num_layers // chunks
        return Layout((per * vpp,) * pp, ((per,) * vpp,) * pp, "even")
    if pp > 1 and (num_layers + 2) % chunks == 0 and (num_layers + 2) // chunks >= 1:
        u = (num_layers + 2) // chunks
        rows = [[u] * vpp for _ in range(pp)]
        rows[0][0] -= 1
        rows[-1][-1] -= 1
        return Layout(tuple(sum(r) for r in rows), tuple(tuple(r) for r in rows),
                      "embedding_loss")
    if num_layers < chunks:
        return None
    stages = split_layers(num_layers, pp)
    if min(stages) < vpp:
        return None
    return Layout(stages, _chunks_of(stages, vpp), "first_last" if vpp == 1 else "custom")


def explicit_layout(stages: tuple[int, ...], vpp: int = 1, mtp_standalone: bool = False,
                    mtp_layers: int = 0) -> Layout:
    """The layout of explicit per-rank layer counts (the default's when they match it), with
    ``mtp_layers`` multi-token prediction modules placed by ``place_mtp``."""
    stages = tuple(stages)
    default = default_layout(sum(stages), len(stages), vpp)
    if default is not None and default.stages == stages:
        return place_mtp(default, mtp_layers, mtp_standalone)
    chunks = _chunks_of(stages, vpp)
    kind: LayoutKind = "custom"
    if len(stages) > 1 and vpp == 1 and len(set(stages[1:-1])) <= 1 and stages[-1]:
        # (Megatron-LM's --decoder-last-pipeline-num-layers must be > 0: a last stage of the
        # head and the loss alone is its layout string's '|L'.)
        kind = "first_last"
    return place_mtp(Layout(stages, chunks, kind), mtp_layers, mtp_standalone)


def place_mtp(layout: Layout, mtp_layers: int, standalone: bool = False) -> Layout:
    """Where the multi-token prediction modules run: beside the loss in the last rank's last
    chunk (Megatron-LM's default), or, ``standalone``, in the last chunk of the rank before
    the last, the loss alone in the last rank's last chunk, whose layers go to its other
    chunks (Megatron-LM's 'MTP standalone' mode, e.g. 'Et*3|(tt|)*29m|L', Megatron Core MoE
    report section 9.2.2; Megatron-Bridge's ``mtp_standalone``)."""
    if not (mtp_layers and standalone):
        return layout
    p, v = layout.pp, layout.vpp
    chunks = list(layout.chunks)
    if chunks[p - 1][-1]:
        chunks[p - 1] = _spread(layout.stages[p - 1], v - 1) + (0,)
    return Layout(layout.stages, tuple(chunks), "custom", mtp_standalone=True)


def megatron_layout_string(layout: Layout, mtp_layers: int = 0) -> str:
    """``--pipeline-model-parallel-layout``: virtual stages in order, separated by '|', each
    a run of 't' (decoder layers), the embedding 'E' first and the loss 'L' last, after the
    multi-token prediction modules 'm' (Megatron-LM pipeline_parallel_layer_layout.py: all of
    them in one virtual stage, after every decoder layer)."""
    stages = layout.virtual_stages()
    at = len(stages) - (2 if layout.mtp_standalone else 1)      # rank mtp_rank, last chunk
    parts = []
    for k, n in enumerate(stages):
        s = "t" * n
        if k == 0:
            s = "E" + s
        if k == at:
            s += "m" * mtp_layers
        if k == len(stages) - 1:
            s += "L"
        parts.append(s)
    return "|".join(parts)
