"""The plan request (DESIGN.md contract), shared by ``planner plan`` and ``POST /v1/plans``."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field, model_validator

from planner.frameworks import autotp_column_inputs
from planner.request import SetupRequest
from planner.revision import revision
from planner.search.spec import SearchSpec
from planner.specs import ModelSpec, TrainingSpec

# What a named framework's execution implies for the training switches a request leaves unset:
# torchtitan shards with FSDP2, whose gathers and reduce-scatters copy per parameter, whose
# HSDP all-reduces every micro-batch and whose pipelined stages reduce after their last
# backward (torch.distributed.pipelining ``perform_reduce_grad``), accumulating every
# micro-batch's bf16 gradients into fp32 ones until then (FSDP2's reduce dtype), and its
# context parallelism
# rotates K and V by PyTorch's default all-gather (v0.2.2 never sets the rotate method);
# DeepSpeed's ZeRO-1/2 gather the updated weights at the end of the optimizer step, never
# beside the next forward (deepspeed/runtime/zero/stage_1_and_2.py ``step``), and all-reduce
# their gradient buckets (``average_tensor``: ``use_multi_rank_bucket_allreduce``, true by
# default since 0.12.4); its pipeline engine reduces at the end of the schedule
# (``ReduceGrads``); and its AutoTP leaves every TP rank the whole logits
# (``auto_tp.py``), so the loss runs over the full vocabulary; its experts spread over ranks
# through AutoEP's layer, and torchtitan's MoE layer copies its tokens its own way
# (``moe_routing`` 'autoep', 'torchtitan'); torchtitan's artifact turns torch.compile on for
# the model and the loss (v0.2.2's ``Compile.components`` default; ``launch.torchtitan``), so
# its loss is the compiled one (``loss_implementation`` 'fused').
FRAMEWORK_TRAINING: dict[str, dict[str, Any]] = {
    "torchtitan": {"zero3_per_parameter": True, "ring_attention": "torch_allgather",
                   "hsdp_all_reduce_every_microbatch": True,
                   "grad_reduce_after_last_backward": True, "microbatch_grad_upcast": True,
                   "moe_routing": "torchtitan", "loss_implementation": "fused"},
    "deepspeed": {"overlap_param_gather": False, "grad_reduce_after_last_backward": True,
                  "zero_grad_allreduce": True, "vocab_parallel_loss": False,
                  "moe_routing": "autoep"}}


def model_implied_training(framework: str | None, model: Any) -> dict[str, Any]:
    """What a framework's execution implies for this model: DeepSpeed's AutoTP wraps each
    Hugging Face linear on its own, so a dense SwiGLU layer of the Llama family (q, k, v, gate
    and up projections) all-reduces five input gradients a layer without sequence parallelism
    (``TrainingSpec.tp_column_parallel_inputs``; deepspeed/module_inject/auto_tp.py gives every
    linear but o_proj and down_proj a LinearLayer, whose ColumnParallel backward all-reduces).
    Nothing for a model that does not validate (the request's own validation says why)."""
    if framework != "deepspeed":
        return {}
    try:
        spec = model if isinstance(model, ModelSpec) else ModelSpec.model_validate(model)
    except (ValueError, TypeError):
        return {}
    inputs = autotp_column_inputs(spec)
    return {"tp_column_parallel_inputs": inputs} if inputs else {}


class PlanRequest(SetupRequest):
    """Find the best plans: ``planner plan`` and ``POST /v1/plans``."""

    search: SearchSpec = Field(default_factory=SearchSpec)

    @model_validator(mode="before")
    @classmethod
    def _framework_execution(cls, data: Any) -> Any:
        """A search for one framework costs what that framework runs: training switches the
        request leaves unset take the framework's (``FRAMEWORK_TRAINING``)."""
        if not isinstance(data, dict):
            return data
        search = data.get("search")
        name = (search.get("framework") if isinstance(search, dict)
                else getattr(search, "framework", None))
        implied = FRAMEWORK_TRAINING.get(name) if isinstance(name, str) else None
        if implied is not None:
            implied = {**implied, **model_implied_training(name, data.get("model"))}
        training = data.get("training")
        if not implied or training is None:
            return data
        if isinstance(training, TrainingSpec):
            unset = {k: v for k, v in implied.items() if k not in training.model_fields_set}
            return {**data, "training": training.model_copy(update=unset)} if unset else data
        if isinstance(training, dict):
            return {**data, "training": {**implied, **training}}
        return data

    def request_id(self) -> str:
        """Same request, same id: a hash of the canonical (fully expanded) request and of the
        planner's revision (``planner.revision``: an upgraded planner plans it anew)."""
        canon = json.dumps({"request": self.model_dump(mode="json"), "revision": revision()},
                           sort_keys=True, separators=(",", ":"))
        return "plan-" + hashlib.sha256(canon.encode()).hexdigest()[:16]
