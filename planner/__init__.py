"""Parallelism planner: the pure core (specs, collective costs, plan cost model, search).

Nothing in this package performs HTTP, touches a database or keeps global mutable state;
everything is a function over immutable values.
"""

__version__ = "0.1.0"
