"""Calibration: alpha-beta fits of collectives from measurements (pure functions).

Readers turn nccl-tests logs and torch.profiler traces into samples; ``fit`` turns samples into
per-collective alpha-beta models with their quality; the probe package produces samples from
its own torch.distributed sweeps.
"""

from planner.calibration.fit import fit_samples
from planner.calibration.model import Calibration, CalibrationIn, Fit, Sample, Segment

__all__ = ["Calibration", "CalibrationIn", "Fit", "Sample", "Segment", "fit_samples"]
