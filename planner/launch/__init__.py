"""From a plan to a running job: framework configs and scheduler artifacts (pure renderers).

Every function here turns values into text or argv; none runs anything. The service and the
CLI attach the result to each plan as ``launch``; the probe launchers reuse the scheduler
renderers.
"""

from planner.launch.build import (
    FORMATS,
    LaunchFormat,
    LaunchSpec,
    NotRunnable,
    build_launch,
    render,
    with_launch,
)

__all__ = ["FORMATS", "LaunchFormat", "LaunchSpec", "NotRunnable", "build_launch", "render", "with_launch"]
