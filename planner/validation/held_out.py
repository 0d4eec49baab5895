"""Held-out scoring of validation feedback: does a calibration fitted on what some plans'
steps measured predict the *other* plans?

Feeding a validation's measured transfers back as a calibration (``as_calibration``) and then
scoring the same plans re-measures them: their transfers were fitted. Here the measured plans
are dealt into ``folds`` folds (plan j to fold j mod folds, so each fold spans the ranking);
each fold is predicted with a calibration fitted on the other folds' samples only, the
request's own fits (a sweep) filling in collectives those plans did not run, and compared with
its own measurement. This is k-fold cross-validation (Hastie, Tibshirani and Friedman, The
Elements of Statistical Learning, 2nd ed., section 7.10).
"""

from __future__ import annotations

from typing import NamedTuple

from planner.calibration.model import CalibrationIn
from planner.search import PlanRequest
from planner.validation.evaluate import PlanProbe, ValidatedPlan, as_calibration, evaluate


class HeldOut(NamedTuple):
    plans: list[ValidatedPlan]          # the measured plans, in probe order, each predicted
    trained_on: dict[int, list[int]]    # plan index -> the plan indices its calibration saw


def held_out(req: PlanRequest, probes: list[PlanProbe], raws: dict[int, dict[str, dict]], *,
             folds: int = 2, tolerance: float = 0.5) -> HeldOut:
    """Predict every measured plan with a calibration fitted on the other folds' plans."""
    measured = [p for p in probes if not p.skipped and raws.get(p.index)]
    if len(measured) < folds or folds < 2:
        raise ValueError(f"held-out scoring needs at least {max(folds, 2)} measured plans "
                         f"and 2 folds; got {len(measured)} plans and {folds} folds")
    base = tuple(req.calibration.fits) if req.calibration else ()
    predicted: dict[int, ValidatedPlan] = {}
    trained_on: dict[int, list[int]] = {}
    for k in range(folds):
        test = [p for j, p in enumerate(measured) if j % folds == k]
        train = [p for j, p in enumerate(measured) if j % folds != k]
        fed = as_calibration(evaluate(req, train, raws, tolerance=tolerance))
        seen = {(f.op, f.tier, f.group_size) for f in fed.fits}
        fits = tuple(fed.fits) + tuple(f for f in base
                                       if (f.op, f.tier, f.group_size) not in seen)
        fold_req = req.model_copy(update={"calibration": CalibrationIn(
            id=f"held-out-fold-{k}", fits=fits)})
        result = evaluate(fold_req, test, raws, tolerance=tolerance)
        for probe, plan in zip(test, result.plans, strict=True):
            predicted[probe.index] = plan
            trained_on[probe.index] = [p.index for p in train]
    return HeldOut([predicted[p.index] for p in measured], trained_on)
