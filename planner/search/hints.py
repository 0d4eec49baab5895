"""Training settings outside the plan space that would change the answer: the search ranks plans
under the request's training settings, and some of those settings move the best plan more
than any degree does.

MoE token dispatch is one of the settings checked. Under ``moe_dispatcher`` 'alltoall' without
``moe_a2a_overlap`` the EP all-to-alls sit on the critical path with one copy per routed
expert, so expert parallelism is costly and the search often prefers ZeRO-3 with every expert
on every GPU. Megatron-LM's recipes for fine-grained MoE run the flex dispatcher with DeepEP
and overlap the all-to-alls with another micro-batch's compute (Megatron-Core MoE paper, arXiv
2603.07685: Qwen3-235B-A22B and DeepSeek-V3 on H100 with DeepEP and EP overlap); torchtitan
runs DeepEP (``expert_parallel_comm_backend = "deepep"``). When the request runs without
either, the search is run again with what is missing and, where that is at least ``MIN_GAIN``
faster, the result says so: the changed settings, the best plan under them and its step time.
A request for one framework is told only of settings that framework has
(``planner.frameworks.CAPABILITIES``: torchtitan overlaps the EP all-to-alls only inside
DualPipeV, so it is told of DeepEP alone; DeepSpeed has neither). The second search has the
request's restrictions and framework, so its plan is one that framework runs, and what is
left of the request's time limit; a first search that limit cut short gets none.

A DeepSpeed search of a MoE model is told of the other way DeepSpeed runs its experts
(``_deepspeed_experts``): AutoEP's expert parallelism with grouped GEMMs, or every expert on
every GPU in a loop; one ``moe_expert_gemm`` admits only one of them.

Context parallelism is another. Transformer Engine runs it as a ring (``ring_attention``
'te', Megatron-LM's default ``--cp-comm-type p2p``), as DeepSpeed-Ulysses' all-to-all
(``a2a``, ``planner.cost.ulysses``) or as both (``a2a+p2p``: all-to-alls over
``cp_a2a_size`` consecutive CP ranks, the ring over the groups): the ring hides its K,V
exchanges behind attention chunks that shrink as cp grows; the all-to-all exposes four
exchanges a pass but runs the attention once over the whole sequence and sends less as cp
grows. Where the best plan under the ring uses context parallelism, exposes at least
``MIN_GAIN`` of its step in the ring's exchanges (what another way can take away; below that,
the answer's latency is not multiplied for a hint that cannot come) and the request's
framework is Megatron-LM (or any), the search is run again with the all-to-all and with the
hierarchy at the two largest all-to-all sizes of 8, 4 and 2 that fit a node and split the
heads, and the result tells of the fastest where that is at least ``MIN_GAIN`` faster. A
request on the all-to-all is told of the ring or the hierarchy the same way where its answer
exposes that much, or where the all-to-all's head rule keeps cp below what the sequence
allows (``explain.a2a_cp_limit``: grouped-query K,V heads split over tp and cp run out
first); one on the hierarchy, of the ring and the all-to-all where its answer exposes that
much.

Tensor parallelism's collectives are the last: where the best plan exposes at least
``MIN_GAIN`` of its step in them and the request neither runs ``tp_comm_overlap`` nor sets the
share it hides, the search is run again with it (``planner.cost.tp_overlap``: Megatron-LM's
``--tp-comm-overlap``, torchtitan's AsyncTP), for frameworks that have it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from planner.frameworks import ANY_FRAMEWORK, CAPABILITIES
from planner.search.explain import a2a_cp_limit
from planner.search.plan_request import PlanRequest

if TYPE_CHECKING:
    from planner.search.plan_result import PlanResult

# A settings change is reported when it makes the best plan at least this much faster.
MIN_GAIN = 0.05

_DEGREES = ("dp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "recompute",
            "recompute_num_layers", "zero_stage", "dp_replicate", "sequence_parallel")


class SettingsHint(BaseModel):
    """Training settings the request did not use that make the best plan faster."""

    model_config = ConfigDict(frozen=True)

    changes: dict[str, Any] = Field(description="The training fields to change, and to what "
                                    "(null: unset, e.g. cp_a2a_size where the change leaves "
                                    "the hierarchy).")
    reason: str = Field(description="Why the change matters, in one sentence.")
    plan: dict[str, Any] = Field(description="The best plan under the changed settings: its "
                                 "degrees, micro-batch size, recompute (and block size), ZeRO "
                                 "stage and sequence parallelism.")
    step_time_s: float = Field(description="That plan's predicted step time, s.")
    mfu: float = Field(description="That plan's model FLOPs utilisation.")
    faster_pct: float = Field(description="How much shorter its step is than the best plan "
                              "under the request's own settings, % of that plan's step.")
    caveats: list[str] = Field(default_factory=list, description="That plan's caveats: where "
                               "published runs do not back its prediction (as a plan's).")


# The capability (``planner.frameworks.CAPABILITIES``) each changed setting needs.
_NEEDS = {"moe_dispatcher": "moe_deepep_dispatch", "moe_a2a_overlap": "moe_a2a_overlap",
          "tp_comm_overlap": "tp_comm_overlap"}


def _runs(framework: str | None, setting: str) -> bool:
    """Whether the request's framework (None or 'any': every framework) can run the setting at
    all; one that cannot is not told to change it (torchtitan overlaps the EP all-to-alls
    only inside DualPipeV, DeepSpeed has neither)."""
    if framework in (None, ANY_FRAMEWORK):
        return True
    return CAPABILITIES[_NEEDS[setting]][framework].status != "no"


def _moe_dispatch(req: PlanRequest) -> tuple[dict[str, Any], str] | None:
    t, framework = req.training, req.search.framework
    if not req.model.is_moe:
        return None
    changes: dict[str, Any] = {}
    why = []
    if t.moe_dispatcher != "deepep" and _runs(framework, "moe_dispatcher"):
        changes["moe_dispatcher"] = "deepep"
        why.append("DeepEP sends a token across the network once per destination node, not "
                   "once per routed expert")
    if not t.moe_a2a_overlap and _runs(framework, "moe_a2a_overlap"):
        changes["moe_a2a_overlap"] = True
        why.append("the overlap hides the all-to-alls behind another micro-batch's compute")
    if not changes:
        return None
    return changes, "the EP all-to-alls sit on the critical path; " + ", and ".join(why)


def _deepspeed_experts(req: PlanRequest) -> tuple[dict[str, Any], str] | None:
    """DeepSpeed runs a MoE model's experts two ways: without expert parallelism as the model
    code's loop over them (``moe_expert_gemm`` 'per_expert'), or over ep ranks through AutoEP
    with grouped GEMMs ('grouped'); one setting admits only one of the two, so the other is
    searched too."""
    if req.search.framework != "deepspeed" or not req.model.is_moe:
        return None
    if req.training.moe_expert_gemm == "per_expert":
        return ({"moe_expert_gemm": "grouped"},
                "DeepSpeed's AutoEP spreads the experts over ep ranks and runs them as grouped "
                "GEMMs; with one GEMM per expert the search keeps every expert on every GPU")
    return ({"moe_expert_gemm": "per_expert"},
            "without AutoEP DeepSpeed keeps every expert on every GPU and loops over them; with "
            "grouped GEMMs the search holds AutoEP's expert parallelism only")


_TO_RING = ("; Transformer Engine's ring (Megatron-LM --cp-comm-type p2p) hides its K,V "
            "exchanges behind the attention and takes any cp")


def _hierarchies(req: PlanRequest, why: str = "") -> list[tuple[dict[str, Any], str]]:
    """Hierarchical context parallelism to try (``ring_attention`` 'a2a+p2p'): the two largest
    all-to-all sizes of 8, 4 and 2 that fit a node and split every head count; ``why`` the
    reason's beginning."""
    m, npn = req.model, req.cluster.gpus_per_node
    sizes = [a for a in (8, 4, 2) if a <= npn and m.attention_kv_heads % a == 0
             and m.num_attention_heads % a == 0][:2]
    return [({"ring_attention": "a2a+p2p", "cp_a2a_size": a},
             why + f"hierarchical context parallelism (Megatron-LM --cp-comm-type a2a+p2p "
             f"--hierarchical-context-parallel-sizes {a} cp/{a}) runs the all-to-alls over "
             f"{a} consecutive CP ranks and Transformer Engine's ring over the groups: fewer, "
             "larger ring steps") for a in sizes]


def _context_parallel(req: PlanRequest, result: PlanResult
                      ) -> list[tuple[dict[str, Any], str]] | None:
    """The other ways Transformer Engine runs context parallelism, to search where this one
    exposes its exchanges (or, on the all-to-all, where the head rule stops cp)."""
    best = result.plans[0]
    ring = req.training.ring_attention
    if ring not in ("te", "a2a", "a2a+p2p") or req.search.framework not in (
            None, ANY_FRAMEWORK, "megatron"):
        return None
    exposed = best.cp > 1 and best.breakdown["cp_comm"] >= MIN_GAIN * best.step_time_s
    if ring == "te":
        if not exposed:
            return None
        return [({"ring_attention": "a2a"},
                 "the ring hides its K,V exchanges behind attention chunks that shrink as cp "
                 "grows; the all-to-all (Megatron-LM --cp-comm-type a2a) runs the attention "
                 "once over the whole sequence on a share of the heads"), *_hierarchies(req)]
    if ring == "a2a+p2p":
        if not exposed:
            return None
        return [({"ring_attention": "te", "cp_a2a_size": None},
                 "the hierarchy's exchanges are exposed" + _TO_RING),
                ({"ring_attention": "a2a", "cp_a2a_size": None},
                 "the hierarchy's exchanges are exposed; the all-to-all (Megatron-LM "
                 "--cp-comm-type a2a) runs the attention once over the whole sequence")]
    limit = a2a_cp_limit(req)
    why = ((["the all-to-all's exchanges are exposed"] if exposed else [])
           + (["it stops where the heads of a tensor-parallel rank no longer split over the "
               "cp ranks"] if limit is not None else []))
    if not why:
        return None
    return [({"ring_attention": "te"}, " and ".join(why) + _TO_RING),
            *_hierarchies(req, " and ".join(why) + "; ")]


def _tp_overlap(req: PlanRequest, result: PlanResult) -> list[tuple[dict[str, Any], str]] | None:
    """TP communication overlap (``training.tp_comm_overlap``), to search where the best plan
    exposes at least ``MIN_GAIN`` of its step in TP collectives (below that the overlap cannot
    make that plan ``MIN_GAIN`` faster, and the answer's latency is not doubled for a plan of
    other degrees that might be), the request neither runs it nor sets the share it hides
    (``efficiency.tp_comm_overlap``), and its framework has it: Megatron-LM's kind for
    Megatron-LM or any framework, AsyncTP for torchtitan under torch.compile."""
    t, framework = req.training, req.search.framework
    best = result.plans[0]
    if (t.tp_comm_overlap != "none" or req.efficiency.tp_comm_overlap is not None
            or best.breakdown["tp_comm"] < MIN_GAIN * best.step_time_s):
        return None
    if not _runs(framework, "tp_comm_overlap") or (framework == "torchtitan"
                                                    and t.eager_elementwise):
        return None
    why = "tensor parallelism's all-gathers and reduce-scatters sit on the critical path; "
    if framework == "torchtitan":
        return [({"tp_comm_overlap": "async_tp"}, why + "torchtitan's AsyncTP "
                 "(parallelism.enable_async_tensor_parallel, under torch.compile) pipelines "
                 "them with the GEMMs inside a node")]
    return [({"tp_comm_overlap": "te"}, why + "Megatron-LM --tp-comm-overlap (Transformer "
             "Engine's userbuffers, with sequence parallelism) pipelines them with the GEMMs "
             "inside a node")]


def settings_hints(req: PlanRequest, result: PlanResult, search) -> list[SettingsHint]:
    """Hints for the request whose search returned ``result``; ``search`` is the plan search,
    run again under each change of settings for its best plan only, within what is left of
    the request's time limit. A search the time limit cut short (FEASIBLE), or that found
    nothing to fit, gets none."""
    if result.search.status != "OPTIMAL" or not result.plans:
        return []
    hints = []
    spent = result.search.solve_ms
    dispatch, experts = _moe_dispatch(req), _deepspeed_experts(req)
    for options in ([dispatch] if dispatch else [], [experts] if experts else [],
                    _context_parallel(req, result) or [], _tp_overlap(req, result) or []):
        # One hint per question: the fastest of its alternatives.
        found = None
        for changes, reason in options:
            left_ms = int(req.search.time_limit_ms - spent)
            if left_ms < 1:
                break
            training = type(req.training).model_validate({**req.training.model_dump(),
                                                          **changes})
            other = search(req.model_copy(update={
                "training": training,
                "search": req.search.model_copy(update={"top_k": 1, "space_sample": 0,
                                                        "time_limit_ms": left_ms})}))
            spent += other.search.solve_ms
            if other.search.status != "OPTIMAL" or not other.plans:
                continue
            best = other.plans[0]
            if found is None or best.step_time_s < found[2].step_time_s:
                found = (changes, reason, best)
        if found is None:
            continue
        changes, reason, best = found
        gain = 1 - best.step_time_s / result.plans[0].step_time_s
        if gain >= MIN_GAIN:
            hints.append(SettingsHint(changes=changes, reason=reason,
                                      plan={k: getattr(best, k) for k in _DEGREES},
                                      step_time_s=best.step_time_s, mfu=best.mfu,
                                      faster_pct=100 * gain, caveats=best.caveats))
    return hints
