"""Step times from MLPerf Training result logs (MLLOG lines), as the corpus's MLPerf rows quote
them: each log's global batch, gradient accumulation steps, submission platform and the median
of its ``train_step_timing`` values (NeMo's per-step timer, logged as ``tracked_stats``) after
the first ``warmup`` steps; a submission's step time is the median over its logs.

    python benchmarks/mlperf_logs.py RESULTS_DIR [RESULTS_DIR ...]

RESULTS_DIR is a submission's folder of ``result_*.txt`` (for instance
``NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo/gpt3`` of github.com/mlcommons/training_results_v3.1).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

WARMUP = 3


def _value(text: str, key: str) -> str | None:
    m = re.search(rf'"key": "{re.escape(key)}", "value": "?([^,"]*)"?', text)
    return m.group(1) if m else None


def parse_log(text: str, warmup: int = WARMUP) -> dict:
    """One MLLOG result: its batch, accumulation, platform, step count and median step (s)."""
    steps = [float(x) for x in re.findall(r'"train_step_timing": ([0-9.eE+-]+)', text)]
    if len(steps) <= warmup:
        raise ValueError(f"{len(steps)} train_step_timing values, not more than the {warmup} "
                         "warm-up steps")
    gbs, ga = _value(text, "global_batch_size"), _value(text, "gradient_accumulation_steps")
    return {"global_batch_size": int(gbs) if gbs else None,
            "gradient_accumulation_steps": int(ga) if ga else None,
            "submission_platform": _value(text, "submission_platform"),
            "steps": len(steps), "median_step_s": statistics.median(steps[warmup:])}


def submission(folder: Path, warmup: int = WARMUP) -> dict:
    """Every ``result_*.txt`` of a submission folder, and the median of their medians."""
    logs = {p.name: parse_log(p.read_text(), warmup) for p in sorted(folder.glob("result_*.txt"))}
    if not logs:
        raise ValueError(f"no result_*.txt in {folder}")
    return {"logs": logs,
            "step_time_s": round(statistics.median(x["median_step_s"] for x in logs.values()), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        out = {str(f): submission(f) for f in args.folders}
    except (OSError, ValueError) as exc:
        print(f"mlperf_logs: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
