"""The cost model of one plan: compute, memory, communication and pipeline -> breakdown."""

from planner.cost.efficiency import EfficiencyModel
from planner.cost.step import Evaluation, estimate, evaluate, to_estimate

__all__ = ["EfficiencyModel", "Evaluation", "estimate", "evaluate", "to_estimate"]
