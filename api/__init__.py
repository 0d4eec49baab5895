"""HTTP service (FastAPI) over the planner core; see the service issue."""
