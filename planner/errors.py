"""Errors raised by the planner core for input that is well-formed JSON but makes no sense."""

from __future__ import annotations


class PlannerInputError(ValueError):
    """A request that cannot be planned, naming the field at fault and why.

    ``field`` is a dotted path into the request (``plan.tp``, ``model.hidden_size``) so that the
    CLI can print it and the API can turn it into a problem+json pointer.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
