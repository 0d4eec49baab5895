"""Anchor the step model on measured steps of the user's own stack.

The model's kernel rates are fitted on NVIDIA's Megatron-LM runs (``planner.cost.efficiency``),
and published runs of other stacks land off by a stack-wide amount: the DeepSpeed pipelines of
2021-22 18-28% slower than predicted, torchtitan's 10%, 2025's Megatron-Bridge recipes 8%
faster (README, "The model, and how accurate it is"). Within one stack the error is nearly
constant. A step the user measured on their own stack therefore fixes that one number,
``EfficiencyModel.compute_scale`` (the speed of every kernel against the model's rates), and
every other plan on that stack is then predicted with it; ``benchmarks/anchored_accuracy.py``
measures how well on the published corpus, each source anchored on its smallest run and
scored on the others.

Each measured run is an estimate request (``planner estimate``'s JSON) with the step time it
measured. One run fixes the scale exactly: the step time falls as the scale grows (every kernel
faster, communication and host time unchanged), so the scale that predicts the measured step
is the root of a monotone function, found by the Illinois variant of regula falsi on its
logarithm. Several runs fix it in the least-squares sense on the logarithm of the step times
(relative errors count alike): the minimum lies between the runs' own roots, where a
golden-section search finds it. How far the runs' own scales disagree says whether the gap is
a kernel speed at all: a network slower than the cluster spec grows with the traffic, not the
compute, and shows as scales that differ between plans; there (by default) the network's speed
across nodes, ``EfficiencyModel.network_scale``, is fitted with the kernels' by
Levenberg-Marquardt (``fit_speeds``, ``fit_two``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from planner.calibration.model import AnchoredRun
from planner.cost import estimate
from planner.cost.caveats import HOST_BOUND_MS, MEASURED_OVER_PREDICTED, layer_ms
from planner.errors import PlannerInputError
from planner.request import EstimateRequest, parse_request
from planner.result import PlanEstimate
from planner.specs import ClusterSpec, ModelSpec

# The scales the fit searches; inside the field's own limits (0.05 to 20).
SCALE_LOW, SCALE_HIGH = 0.1, 10.0
# Relative tolerance of a fitted scale.
TOLERANCE = 1e-4
# A fitted scale outside this range says the runs' settings, not the kernels, may be off.
PLAUSIBLE = (0.67, 1.5)
# Runs whose own scales differ by more than this ratio do not share one kernel speed.
DISAGREE = 1.15
# The network speeds the two-number fit searches (inside the field's 0.01 to 10), and the range
# outside which a fitted one is flagged.
# (A spec's links are their nominal rates times a measured efficiency: no fabric beats them
# by half again.)
NETWORK_LOW, NETWORK_HIGH = 0.02, 1.5
PLAUSIBLE_NETWORK = (0.1, 1.2)
# Finite-difference step of the two-number fit, in the logarithm of a speed.
STEP = 0.02
# A run whose layers the model puts under caveats.HOST_BOUND_MS a micro-batch and that
# measured a longer layer than nine in ten held-out dense runs do against their predictions
# (the dense step-time band's high decile) is flagged as host-bound.
HOST_BOUND_SLOWER = MEASURED_OVER_PREDICTED["dense"][4]
# Whether the network's speed is fitted too: 'auto' where the runs call for it.
NetworkMode = Literal["auto", "fit", "spec"]


class AnchorRun(EstimateRequest):
    """One measured run: an estimate request and the step time it measured."""

    name: str | None = Field(None, max_length=200, description="A label for the tables.")
    measured_step_time_s: float = Field(gt=0, le=1e7, description="Measured time of one "
                                        "optimizer step, seconds (steady state, not the first "
                                        "steps).")


# The longest log a run takes: what the service's default body limit (1 MB) leaves room for.
# The reader needs Megatron-LM's arguments block (some 40 kB) and the iteration lines, or
# torchtitan's mesh and step lines: trim a longer log to those.
LOG_CHARS = 900_000


class _LoggedRun(BaseModel):
    """A measured run given as what its framework wrote (a log, a config), on a cluster: read
    into the estimate request it holds (``anchor_run``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    # The framework that wrote it (``planner.frameworks``).
    framework: ClassVar[str]

    name: str | None = Field(None, max_length=200, description="A label for the tables.")
    cluster: ClusterSpec = Field(description="Where it ran (its node count is taken from the "
                                 "log's world size).")
    skip: int = Field(1, ge=0, le=10_000, description="Logged intervals left out at the start "
                      "(compilation, warm-up); the step is the median of the rest.")

    def _read(self, index: int, read: Callable[[dict], tuple[dict, list[str]]],
              field: Callable[[str], str]) -> tuple[AnchorRun, list[str]]:
        """``read(cluster)``'s run as an estimate request, and its notes; a
        ``PlannerInputError`` it raises named ``runs.{index}.{field(its field)}``."""
        try:
            run, notes = read(self.cluster.model_dump(mode="json"))
            req = parse_request(AnchorRun, run)
            return req, notes + not_run_as_costed(req, self.framework)
        except PlannerInputError as exc:
            raise PlannerInputError(f"runs.{index}.{field(exc.field)}",
                                    f"{exc.field}: {exc.reason}") from exc


def not_run_as_costed(run: AnchorRun, framework: str) -> list[str]:
    """A note where the framework that ran ``run`` does not run its plan as the planner costs
    it (``planner.frameworks``' rules: a multi-token prediction module torchtitan does not
    build, say): fitted to it, the speeds would absorb an execution the model does not
    describe."""
    from planner.launch import with_launch

    est = with_launch(estimate(run.model, run.cluster, run.training, run.plan), run.model,
                      run.cluster, run.training)
    reasons = est.launch.not_runnable.get(framework) if est.launch else None
    return ([f"{framework} does not run this plan as the planner costs it, so the fitted "
             f"speeds absorb the difference: {'; '.join(reasons)}"] if reasons else [])


class MegatronLogRun(_LoggedRun):
    """One measured run as Megatron-LM logged it (``planner.calibration.megatron_log``): its
    arguments and iteration times, on a cluster."""

    framework = "megatron"

    megatron_log: str = Field(min_length=1, max_length=LOG_CHARS, description="Rank 0's "
                              "training log: the arguments block Megatron-LM prints at start-up "
                              "and the 'elapsed time per iteration (ms)' lines.")

    def anchor_run(self, index: int) -> tuple[AnchorRun, list[str]]:
        """The run as an estimate request with its measured step, and what the log could not
        say; ``PlannerInputError`` on ``runs.{index}.megatron_log`` where it cannot be read."""
        from planner.calibration.megatron_log import anchor_run

        return self._read(index, lambda c: anchor_run(self.megatron_log, c, self.name,
                                                      self.skip),
                          lambda _: "megatron_log")


class TorchtitanRun(_LoggedRun):
    """One measured run as torchtitan ran and logged it (``planner.calibration.torchtitan_run``):
    its job config, its log (the device mesh, each interval's tokens per second), on a
    cluster."""

    framework = "torchtitan"

    torchtitan_config: str = Field(min_length=1, max_length=100_000, description="The job "
                                   "config (TOML) the run started with.")
    torchtitan_log: str = Field(min_length=1, max_length=LOG_CHARS, description="Rank 0's "
                                "log: the 'Building device mesh with parallelism' line and the "
                                "'step: ... tps: ...' lines.")
    model: ModelSpec | None = Field(None, description="The model; default: the config's "
                                    "flavor, Llama 3's (8B, 70B, 405B) or Qwen3's MoE "
                                    "(30B-A3B, 235B-A22B); one given with such a config must "
                                    "have its shape.")

    def anchor_run(self, index: int) -> tuple[AnchorRun, list[str]]:
        """The run as an estimate request with its measured step, and notes;
        ``PlannerInputError`` on ``runs.{index}.torchtitan_config`` (or ``_log``) where it
        cannot be read."""
        from planner.calibration.torchtitan_run import anchor_run

        model = None if self.model is None else self.model.model_dump(mode="json")
        return self._read(index, lambda c: anchor_run(self.torchtitan_config,
                                                      self.torchtitan_log, c, model,
                                                      self.name, self.skip),
                          lambda f: "torchtitan_log" if f == "log" else "torchtitan_config")


def _run_kind(v: object) -> str:
    if isinstance(v, MegatronLogRun) or isinstance(v, dict) and "megatron_log" in v:
        return "~log"
    if isinstance(v, TorchtitanRun) or isinstance(v, dict) and "torchtitan_config" in v:
        return "~titan"
    return "~run"


class AnchorRequest(BaseModel):
    """``planner calibrate anchor`` and ``POST /v1/anchors``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: list[Annotated[Annotated[AnchorRun, Tag("~run")]
                         | Annotated[MegatronLogRun, Tag("~log")]
                         | Annotated[TorchtitanRun, Tag("~titan")],
                         Discriminator(_run_kind)]] = Field(
        min_length=1, max_length=32, description="Measured runs of one stack (framework, "
        "version and settings): each an estimate request with its measured_step_time_s, a "
        "Megatron-LM training log, or a torchtitan job config and log, with the cluster it "
        "ran on.")
    network: NetworkMode = Field(
        "auto", description="efficiency.network_scale, the bandwidth across nodes against the "
        "cluster spec's: 'fit' fits it with the kernels' speed (two runs or more, whose shares "
        "of time on the network differ); 'spec' keeps the runs' own; 'auto' fits it where "
        "there are two runs or more and the kernel speeds that fit each alone differ by more "
        "than 15% (a gap one kernel speed does not explain).")

    @model_validator(mode="after")
    def _network_needs_two_runs(self) -> AnchorRequest:
        if self.network == "fit" and len(self.runs) < 2:
            raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                type=PydanticCustomError("value_error", "fitting the network's speed as well "
                                         "needs two runs or more (one run fixes one number)"),
                loc=("network",), input=self.network)])
        return self


class AnchorFit(BaseModel):
    model_config = ConfigDict(frozen=True)

    compute_scale: float = Field(description="The fitted kernel speed against the model's "
                                 "rates: add it to requests as efficiency.compute_scale.")
    network_scale: float = Field(1.0, description="The fitted bandwidth across nodes against "
                                 "the cluster spec's (efficiency.network_scale); the first run's "
                                 "own where it was not fitted.")
    network_fitted: bool = Field(False, description="Whether network_scale was fitted.")
    efficiency: dict[str, float] = Field(description="What to merge into a request's "
                                         "'efficiency' to predict with the fit.")
    runs: list[AnchoredRun]
    scale_range: tuple[float, float] = Field(description="The smallest and largest of the "
                                             "runs' own scales.")
    notes: list[str] = Field(default_factory=list)


def _root(f: Callable[[float], float], lo: float, hi: float, f_lo: float, f_hi: float) -> float:
    """The root of ``f``, decreasing on [lo, hi] with f(lo) > 0 > f(hi): Illinois regula
    falsi (Dowell & Jarratt 1971), to ``TOLERANCE`` in the logarithm of the scale."""
    side = 0
    x = lo
    for _ in range(100):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        fx = f(x)
        if fx == 0 or hi - lo < TOLERANCE:
            return x
        if fx > 0:
            lo, f_lo = x, fx
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo /= 2
            side = 1
        if abs(fx) < TOLERANCE / 10:
            return x
    return x


def golden_min(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The minimum of a unimodal ``f`` on [lo, hi], to ``TOLERANCE`` (golden-section)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while b - a > TOLERANCE:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


class _Run:
    """One run's predictions, kept per scale (each is a full estimate)."""

    def __init__(self, run: AnchorRun, index: int) -> None:
        self.run = run
        self.index = index
        self.name = run.name or f"run {index + 1}"
        self._seen: dict[tuple[float, float], PlanEstimate] = {}

    def _estimate(self, scale: float, network: float | None = None) -> PlanEstimate:
        """The run's estimate at kernel speed ``scale`` and network speed ``network`` (None:
        the run's own), once per pair."""
        r = self.run
        net = r.efficiency.network_scale if network is None else network
        if (scale, net) not in self._seen:
            eff = r.efficiency.model_copy(update={"compute_scale": scale, "network_scale": net})
            try:
                self._seen[(scale, net)] = estimate(r.model, r.cluster, r.training, r.plan,
                                                    eff, calibration=r.calibration)
            except PlannerInputError as exc:     # name the run as well as its field
                raise PlannerInputError(f"runs.{self.index}.{exc.field}", exc.reason) from exc
        return self._seen[(scale, net)]

    def predict(self, scale: float, network: float | None = None) -> tuple[float, bool, float]:
        """(step time, fits in memory, memory GiB) at kernel speed ``scale`` and network
        speed ``network`` (None: the run's own)."""
        est = self._estimate(scale, network)
        return est.step_time_s, est.fits_in_memory, est.memory.total_gib

    def host_bound(self) -> str | None:
        """A note where the run's layers take so little on the GPU that an eager stack's host
        sets their pace (``caveats.HOST_BOUND_MS``) and the run measured a longer layer, with
        no host floor given: the kernel speed fitted to it would be the host's."""
        r = self.run
        if r.efficiency.layer_host_floor_us:
            return None
        # (The estimate at the run's own speeds, which the answer's 'before' reads too.)
        kernels, measured = layer_ms(self._estimate(r.efficiency.compute_scale),
                                     r.measured_step_time_s)
        if kernels >= HOST_BOUND_MS or measured < HOST_BOUND_SLOWER * kernels:
            return None
        return (f"{self.name}: its layers take {kernels:.2f} ms a micro-batch on the GPU in "
                f"the model and {measured:.2f} ms as measured (the step less the model's other "
                "parts): a host-bound layer, which a kernel speed fits badly; set "
                f"efficiency.layer_host_floor_us to about {round(measured * 1000, -1):g} for "
                "this stack, and anchor its kernel speed on runs of larger layers")

    def residual(self, a: float, b: float | None = None) -> float:
        """log(predicted / measured) at kernel speed e^a (falling as it grows) and network
        speed e^b (None: the run's own)."""
        net = None if b is None else math.exp(b)
        return math.log(self.predict(math.exp(a), net)[0] / self.run.measured_step_time_s)

    def alone(self) -> tuple[float, str | None]:
        """The scale that predicts this run by itself, and a note when the search's range
        holds none (the scale then stops at the range's end)."""
        def step(scale: float) -> float:
            return self.predict(scale)[0]

        scale = scale_for(step, self.run.measured_step_time_s)
        if scale == SCALE_HIGH:
            return scale, (
                f"{self.name}: measured faster than the model predicts even with kernels "
                f"{SCALE_HIGH:g} times as fast (its communication and fixed costs alone take "
                "longer): check the run's cluster links and settings")
        if scale == SCALE_LOW:
            return scale, (
                f"{self.name}: measured slower than the model predicts even with kernels "
                f"{SCALE_LOW:g} times as fast: check the run's settings")
        return scale, None


def scale_for(step_time: Callable[[float], float], measured_s: float) -> float:
    """The kernel speed at which ``step_time(scale)`` (seconds, falling as the scale grows)
    equals ``measured_s``; ``SCALE_HIGH`` or ``SCALE_LOW`` when the search's range holds none
    (measured faster than even the fastest scale predicts, or slower than the slowest)."""
    def f(u: float) -> float:
        return math.log(step_time(math.exp(u)) / measured_s)

    lo, hi = math.log(SCALE_LOW), math.log(SCALE_HIGH)
    f_lo, f_hi = f(lo), f(hi)
    if f_hi >= 0:
        return SCALE_HIGH
    if f_lo <= 0:
        return SCALE_LOW
    return math.exp(_root(f, lo, hi, f_lo, f_hi))


def fit_two(residuals: Callable[[float, float], list[float]], a0: float
            ) -> tuple[float, float, str | None]:
    """(log kernel speed, log network speed) minimising the summed squares of
    ``residuals(a, b)`` (each run's log(predicted / measured) at kernel speed e^a and network
    speed e^b: ``_Run.residual``), by Levenberg-Marquardt (Marquardt 1963: Gauss-Newton steps on
    forward-difference derivatives, damped by a multiple of the diagonal that shrinks after a
    step that lowers the loss and grows after one that does not), from the kernel-only fit
    ``a0`` and the spec's network; with a note, and the network left at the spec's, where the
    runs cannot tell the two apart."""
    # Inside the range by a hair: exp(log(10)) is a shade above 10, which the field refuses.
    lo_a, hi_a = math.log(SCALE_LOW) + 1e-9, math.log(SCALE_HIGH) - 1e-9
    lo_b, hi_b = math.log(NETWORK_LOW) + 1e-9, math.log(NETWORK_HIGH) - 1e-9
    a, b = a0, 0.0
    f = residuals(a, b)
    loss = sum(x * x for x in f)
    lam = 1e-3
    for it in range(40):
        # Forward differences, backward ones at the range's upper end.
        sa = STEP if a + STEP <= hi_a else -STEP
        sb = STEP if b + STEP <= hi_b else -STEP
        ja = [(x - y) / sa for x, y in zip(residuals(a + sa, b), f, strict=True)]
        jb = [(x - y) / sb for x, y in zip(residuals(a, b + sb), f, strict=True)]
        g11 = sum(x * x for x in ja)
        g22 = sum(x * x for x in jb)
        g12 = sum(x * y for x, y in zip(ja, jb, strict=True))
        if it == 0:
            if max(abs(x) for x in jb) < 0.01:
                return a0, 0.0, ("the runs spend too little of their step on the network "
                                 "as the cluster spec costs it (under 1%; collectives a "
                                 "calibration covers do not count) to fit its speed: the "
                                 "network is left at the spec's")
            if g11 * g22 - g12 * g12 < 1e-3 * g11 * g22:
                return a0, 0.0, ("the runs' shares of time on the network are too alike to "
                                 "tell the network's speed from the kernels': the network is "
                                 "left at the spec's (anchor on runs whose traffic differs)")
        g1 = sum(x * y for x, y in zip(ja, f, strict=True))
        g2 = sum(x * y for x, y in zip(jb, f, strict=True))
        while True:
            m11, m22 = g11 * (1 + lam), g22 * (1 + lam)
            det = m11 * m22 - g12 * g12
            if det <= 0:        # a speed no longer moves any run: stay where the fit is
                return a, b, None
            da, db = (-g1 * m22 + g2 * g12) / det, (-g2 * m11 + g1 * g12) / det
            na, nb = min(hi_a, max(lo_a, a + da)), min(hi_b, max(lo_b, b + db))
            nf = residuals(na, nb)
            new = sum(x * x for x in nf)
            if new < loss:
                lam /= 3
                break
            lam *= 4
            if lam > 1e8:
                return a, b, None
        moved = max(abs(na - a), abs(nb - b))
        a, b, f, loss = na, nb, nf, new
        if moved < TOLERANCE:
            break
    return a, b, None


@dataclass(frozen=True)
class Speeds:
    """What ``fit_speeds`` found."""

    compute: float              # the kernel speed
    network: float | None       # the network speed, where it was fitted
    disagree: bool              # the runs' own kernel speeds differ by more than DISAGREE
    tried: bool                 # the network's fit was tried
    note: str | None            # why it was not fitted, where it was tried


def fit_speeds(residuals: Callable[[float, float | None], list[float]], own: list[float],
               network: NetworkMode) -> Speeds:
    """The speeds that best predict the runs: ``residuals(a, b)`` gives each run's
    log(predicted / measured) at kernel speed e^a and network speed e^b (None: the runs'
    own), ``own`` each run's own kernel speed (``scale_for``). One run's is its own; several
    runs' the least-squares one, which lies between their own (golden-section). The network
    is fitted too (``fit_two``) where ``network`` is 'fit', or 'auto' and the runs' own kernel
    speeds differ by more than ``DISAGREE``. What ``planner calibrate anchor`` fits, and what
    ``benchmarks/anchored_accuracy.py`` scores."""
    if len(own) == 1:
        compute = own[0]
    else:
        compute = math.exp(golden_min(lambda u: sum(f * f for f in residuals(u, None)),
                                      math.log(min(own)), math.log(max(own))))
    disagree = len(own) > 1 and max(own) / min(own) > DISAGREE
    if not (network == "fit" or (network == "auto" and disagree)):
        return Speeds(compute, None, disagree, False, None)
    a, b, note = fit_two(residuals, math.log(compute))
    if note:
        return Speeds(compute, None, disagree, True, note)
    return Speeds(math.exp(a), math.exp(b), disagree, True, None)


def _error_pct(measured: float, predicted: float) -> float:
    return (measured / predicted - 1) * 100


def fit_anchor(request: AnchorRequest) -> AnchorFit:
    """The kernel speed that best predicts the measured runs, and each run before and after.
    Raises ``PlannerInputError`` (from the estimate) naming the run and field of a plan the
    model refuses."""
    notes: list[str] = []
    given: list[AnchorRun] = []
    for i, item in enumerate(request.runs):
        if isinstance(item, MegatronLogRun | TorchtitanRun):
            run, said = item.anchor_run(i)
            notes += [f"{run.name}: {n}" for n in said]
        else:
            run = item
        given.append(run)
    runs = [_Run(r, i) for i, r in enumerate(given)]
    alone = []
    for r in runs:
        scale, note = r.alone()
        alone.append(scale)
        if note:
            notes.append(note)
        if (host := r.host_bound()) is not None:
            notes.append(host)
    speeds = fit_speeds(lambda a, b: [r.residual(a, b) for r in runs], alone, request.network)
    if speeds.note:
        notes.append(speeds.note)
    best = round(speeds.compute, 4)
    network = None if speeds.network is None else round(speeds.network, 4)
    lo, hi = min(alone), max(alone)
    out = []
    for r, scale in zip(runs, alone, strict=True):
        before, fits, gib = r.predict(r.run.efficiency.compute_scale)
        after = r.predict(best, network)[0]
        m = r.run.measured_step_time_s
        out.append(AnchoredRun(
            name=r.name, measured_step_time_s=m, predicted_step_time_s=before,
            anchored_step_time_s=after, error_pct=_error_pct(m, before),
            anchored_error_pct=_error_pct(m, after), scale_alone=round(scale, 4),
            fits_in_memory=fits))
        if not fits:
            notes.append(f"{r.name}: over the GPU's memory in the model ({gib:.1f} GiB); it "
                         "ran, so the model's memory is pessimistic for it")
    if not PLAUSIBLE[0] <= best <= PLAUSIBLE[1]:
        way = "slower" if best < 1 else "faster"
        notes.append(
            f"the kernels run {abs(1 / best - 1) * 100:.0f}% {way} than the model's rates: "
            "check the runs' settings (precision, flash_attention and its kernel, recompute, "
            "overlap) before trusting the scale")
    gpus = sorted({r.run.cluster.gpu.name for r in runs})
    if len(gpus) > 1:
        notes.append(f"the runs are on {len(gpus)} kinds of GPU ({', '.join(gpus)}): one kernel "
                     "speed is fitted for all of them; anchor each kind's runs apart if their "
                     "own scales differ")
    if speeds.disagree:
        notes.append(
            f"the runs' own kernel speeds range from {lo:.3f} to {hi:.3f}: they do not share "
            "one; a gap that grows with the communication points to links slower than the "
            "cluster spec" + (", so the network's speed was fitted as well" if network is not None
                              else "" if speeds.tried   # the fit's own note says why not
                              else ": fit the network's speed too (--network fit, \"network\": "
                              "\"fit\") or calibrate the collectives (planner calibrate)"))
    efficiency = {"compute_scale": best}
    if network is not None:
        efficiency["network_scale"] = network
        link = runs[0].run.cluster.inter_node
        notes.append(
            f"across nodes the runs moved data at {network:.3g} times the spec's rate: "
            f"{runs[0].name}'s nodes at {link.effective_bandwidth / 1e9 * network:.4g} GB/s "
            f"each where its cluster spec gives {link.effective_bandwidth / 1e9:.4g}")
        if not PLAUSIBLE_NETWORK[0] <= network <= PLAUSIBLE_NETWORK[1]:
            notes.append("that network speed is far from the spec's: check the runs' cluster "
                         "(nodes, NICs) and settings before trusting it")
    return AnchorFit(compute_scale=best, network_scale=(
        network if network is not None else runs[0].run.efficiency.network_scale),
        network_fitted=network is not None, efficiency=efficiency, runs=out,
        scale_range=(round(lo, 4), round(hi, 4)), notes=notes)
