"""The published-accuracy benchmark meets its target with the default efficiency model."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import published_accuracy  # noqa: E402


def test_megatron_table1_within_target(tmp_path, capsys):
    out = tmp_path / "acc.json"
    assert published_accuracy.main(["--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["rows"]) == 10
    assert result["summary"]["median_abs_error_pct"] <= 5.0
    assert result["summary"]["max_abs_error_pct"] <= 12.0
    assert "median |error|" in capsys.readouterr().out
