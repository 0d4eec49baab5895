"""The planner's revision: a digest of its rule files, hashed into every plan id, so that an
upgraded planner plans a request anew instead of answering it from a store written under older
rules."""

import re
import shutil
from pathlib import Path

from planner import revision as rev
from planner.search import PlanRequest, plan

REQ = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
       "training": {"global_batch_size": 64, "seq_length": 4096}, "search": {"top_k": 1}}


def test_the_digest_follows_the_rule_files_and_nothing_else(tmp_path):
    root = tmp_path / "planner"
    shutil.copytree(Path(rev.__file__).parent, root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    first = rev.digest(root)
    assert re.fullmatch(r"[0-9a-f]{12}", first) and first == rev.revision()
    (root / "__pycache__").mkdir(exist_ok=True)
    (root / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    (root / "notes.txt").write_text("not a rule")
    assert rev.digest(root) == first
    cost = root / "cost" / "efficiency.py"
    cost.write_text(cost.read_text() + "\n# a constant moved\n")
    changed = rev.digest(root)
    assert changed != first
    # A file moved elsewhere with the same bytes is a different package.
    cost.rename(root / "cost" / "efficiency2.py")
    assert rev.digest(root) not in (first, changed)


def test_the_plan_id_and_the_answer_carry_the_revision(monkeypatch):
    req = PlanRequest.model_validate(REQ)
    res = plan(req)
    assert res.id == req.request_id() and res.search.revision == rev.revision()
    assert PlanRequest.model_validate(REQ).request_id() == res.id      # same request, same id
    # The same request under other rules is another answer.
    monkeypatch.setattr("planner.search.plan_request.revision", lambda: "000000000000")
    assert req.request_id() != res.id
