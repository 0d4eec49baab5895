"""The planner's revision: a digest of the package's own files, which decide every answer (the
cost model and its constants, the search, the launch renderers).

An answer belongs to the revision that computed it. The plan id hashes the revision with the
request (``PlanRequest.request_id``), so after an upgrade the same request is planned anew by
today's rules instead of being answered from a store written under older ones; the answers
stored before keep their own ids and stay readable. ``SearchStats.revision`` and the
service's ``/healthz`` report it, so a scheduler can tell which rules produced an answer and
whether every replica of a rolling deploy runs the same ones.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

# The files that make up the planner's rules; compiled caches are not.
SUFFIXES = (".py", ".json", ".toml", ".yaml", ".yml")


def digest(root: Path) -> str:
    """12 hex digits of SHA-256 over every rule file under ``root`` (relative path and bytes,
    in path order)."""
    h = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                   and "__pycache__" not in p.parts)
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


@lru_cache(maxsize=1)
def revision() -> str:
    """This installed planner's revision (read once per process)."""
    return digest(Path(__file__).resolve().parent)
