"""This corpus as another corpus would state it: every run with its training settings cut to
the few any published table prints (the batch, the sequence, the precision; ``--keep``
adds more; ``--keep all``, every setting and efficiency override: the corpus less only its
mark) and no efficiency overrides, its model, cluster, plan, figure and citation kept.
Replayed through ``published_accuracy.py --data``, the settings left out are the table
rules' inferences from each run's source (or, with ``--no-infer``, the planner's defaults):
what a held-out set encoded by someone else gets from the planner.

Usage: python benchmarks/strip_corpus.py [--keep a,b,... | --keep all] > stated.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published_accuracy import load_runs  # noqa: E402

STATED = ("global_batch_size", "seq_length", "precision")


def stripped(run: dict, keep: tuple[str, ...] | None = STATED) -> dict:
    """The run with only the ``keep`` training settings and no efficiency overrides (``keep``
    None: the run as it is)."""
    if keep is None:
        return run
    out = {k: v for k, v in run.items() if k != "efficiency"}
    out["training"] = {k: v for k, v in run["training"].items() if k in keep}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", default="", help="more training settings to keep, "
                    "comma-separated (e.g. flash_attention,dropout), or 'all': every run as "
                    "encoded, the file without the corpus's \"settings\": \"stated\" mark")
    args = ap.parse_args(argv)
    keep = None if args.keep == "all" else STATED + tuple(k for k in args.keep.split(",") if k)
    print(json.dumps({"runs": [stripped(r, keep) for r in load_runs()]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
