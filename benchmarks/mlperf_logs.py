"""Step times from MLPerf Training result logs (MLLOG lines), as the corpus's MLPerf rows quote
them: each log's global batch, gradient accumulation steps, submission platform and the median
of its ``train_step_timing`` values (NeMo's per-step timer, logged as ``tracked_stats``) after
the first ``warmup`` steps; a submission's step time is the median over its logs.

Logs without ``train_step_timing`` (NVIDIA's GPT-3 submissions from v4.0 on) are timed by their
training blocks instead: each ``block_start`` / ``block_stop`` pair brackets the steps between
two evaluations (evaluation runs outside them, between ``eval_start`` and ``eval_stop``), its
``epoch_count`` the tokens it trained, so a block holds epoch_count / (global batch x
max_sequence_length) steps and a step takes its wall time over that. The first
``WARMUP_BLOCKS`` blocks (warm-up after initialisation) are dropped and the median of the rest
is the log's step time.

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
WARMUP_BLOCKS = 1
_BLOCK = re.compile(r'"time_ms": (\d+), [^\n]*?"key": "block_(start|stop)"[^\n]*?'
                    r'"first_epoch_num": (\d+), "epoch_count": (\d+)')


def _value(text: str, key: str) -> str | None:
    m = re.search(rf'"key": "{re.escape(key)}", "value": "?([^,"]*)"?', text)
    return m.group(1) if m else None


def block_step_times(text: str, global_batch: int, seq_length: int) -> list[float]:
    """Seconds a step of each training block (``block_start`` to ``block_stop`` of the same
    ``first_epoch_num``), in log order; ``epoch_count`` counts tokens, so a block's steps are
    epoch_count / (global_batch x seq_length), which must be whole."""
    starts: dict[int, tuple[int, int]] = {}
    out = []
    for m in _BLOCK.finditer(text):
        time_ms, kind, first, count = int(m[1]), m[2], int(m[3]), int(m[4])
        if kind == "start":
            starts[first] = (time_ms, count)
            continue
        if first not in starts:
            continue
        began, count = starts.pop(first)
        steps, rest = divmod(count, global_batch * seq_length)
        if rest or not steps:
            raise ValueError(f"block at {first} trains {count} tokens, not a whole number of "
                             f"steps of {global_batch} x {seq_length}")
        out.append((time_ms - began) / 1000 / steps)
    return out


def parse_log(text: str, warmup: int = WARMUP, warmup_blocks: int = WARMUP_BLOCKS) -> dict:
    """One MLLOG result: its batch, accumulation, platform, how it was timed, the steps timed
    and its median step (s)."""
    steps = [float(x) for x in re.findall(r'"train_step_timing": ([0-9.eE+-]+)', text)]
    gbs, ga = _value(text, "global_batch_size"), _value(text, "gradient_accumulation_steps")
    head = {"global_batch_size": int(gbs) if gbs and gbs.isdigit() else None,
            "gradient_accumulation_steps": int(ga) if ga and ga.isdigit() else None,
            "submission_platform": _value(text, "submission_platform")}
    if not steps and '"block_start"' in text:
        seq = _value(text, "max_sequence_length")
        if not (gbs and seq and gbs.isdigit() and seq.isdigit() and int(gbs) and int(seq)):
            raise ValueError(f"block timing needs the log's global_batch_size and "
                             f"max_sequence_length as positive whole numbers (got {gbs!r}, "
                             f"{seq!r})")
        blocks = block_step_times(text, int(gbs), int(seq))
        if len(blocks) <= warmup_blocks:
            raise ValueError(f"{len(blocks)} training blocks, not more than the "
                             f"{warmup_blocks} warm-up block(s)")
        return {**head, "timing": "blocks", "steps": len(blocks),
                "median_step_s": statistics.median(blocks[warmup_blocks:])}
    if len(steps) <= warmup:
        raise ValueError(f"{len(steps)} train_step_timing values, not more than the {warmup} "
                         "warm-up steps")
    return {**head, "timing": "train_step_timing", "steps": len(steps),
            "median_step_s": statistics.median(steps[warmup:])}


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
