"""The plan search: the space, exact enumeration (uneven stages by branch and bound), and the
reasons when nothing fits."""

from planner.search.plan_request import PlanRequest
from planner.search.plan_result import PlanResult, SearchStats
from planner.search.solver import answer, plan, with_launches
from planner.search.spec import Range, SearchSpec

__all__ = ["PlanRequest", "PlanResult", "Range", "SearchSpec", "SearchStats", "answer", "plan",
           "with_launches"]
