"""Reader of nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
broadcast_perf, reduce_perf, alltoall_perf, sendrecv_perf, gather_perf, scatter_perf).

Format (nccl-tests src/common.cu and util.cu, v2.x; research/collectives.md section 2): a
preamble of ``#`` lines (``# nThread 1 nGpus 8 ...``, one ``#  Rank  N Group  G Pid P on HOST
device D [...] NAME`` line per rank), then one row per size::

    size  count  type  redop  root  time algbw busbw #wrong  time algbw busbw #wrong

out-of-place then in-place; older builds have no ``root`` column and print an ``error`` float
instead of ``#wrong``; ``N/A`` replaces ``#wrong`` without validation; the run ends with
``# Avg bus bandwidth : X``. Real logs interleave launcher prefixes (``[1,0]<stdout>:``, Slurm's
`` 0: ``), shell prompts, ssh warnings and NCCL INFO lines; those are skipped. ``size`` is the
full buffer in bytes, the convention of the planner's collective model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.calibration.model import Sample

BINARY_OPS = {
    "all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter", "broadcast_perf": "broadcast",
    "reduce_perf": "reduce", "alltoall_perf": "all_to_all", "sendrecv_perf": "send_recv",
    "gather_perf": "gather", "scatter_perf": "scatter",
}
_PREFIX = re.compile(r"^(\[\d+,\d+\]<std(out|err)>:|\s*\d+:\s)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+\S+")
_OP_HINT = re.compile(r"(" + "|".join(BINARY_OPS) + r")")


class NcclTestsFormatError(ValueError):
    def __init__(self, line_no: int, message: str) -> None:
        super().__init__(f"line {line_no}: {message}" if line_no else message)
        self.line_no = line_no


@dataclass
class NcclTestsLog:
    op: str
    ranks: int
    hosts: list[str]
    rows: list[dict] = field(default_factory=list)
    avg_busbw_gb_per_s: float | None = None
    notes: list[str] = field(default_factory=list)
    nodes: int | None = None     # what the caller said, for a log without its rank lines

    @property
    def tier(self) -> str:
        count = self.nodes if self.nodes is not None else len(set(self.hosts))
        return "inter_node" if count > 1 else "intra_node"

    def samples(self) -> list[Sample]:
        p = 2 if self.op == "send_recv" else self.ranks
        return [Sample(op=self.op, group_size=p, tier=self.tier, message_bytes=r["size"],
                       time_us=r["time_us"]) for r in self.rows if r["size"] > 0]


def _num(tok: str, line_no: int, what: str) -> float:
    try:
        return float(tok)
    except ValueError:
        raise NcclTestsFormatError(line_no, f"{what} {tok!r} is not a number") from None


def parse(text: str, op: str | None = None, ranks: int | None = None,
          nodes: int | None = None) -> NcclTestsLog:
    """Parse one nccl-tests run. ``op`` names the collective when the log does not; ``ranks``
    and ``nodes`` give the group a log without its ``#  Rank`` lines ran on (a trimmed log, as
    cloud providers' guides print them), and must agree with the lines where it has them."""
    for name, value in (("ranks", ranks), ("nodes", nodes)):
        if value is not None and value < 1:
            raise NcclTestsFormatError(0, f"{name} must be at least 1, got {value}")
    if ranks is not None and nodes is not None and nodes > ranks:
        raise NcclTestsFormatError(0, f"nodes {nodes} is more than the {ranks} ranks")
    found_op = op
    hosts: dict[int, str] = {}
    rows: list[dict] = []
    avg = None
    notes: list[str] = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw).rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            m = _RANK.search(line)
            if m:
                hosts[int(m.group(1))] = m.group(2)
            elif "Avg bus bandwidth" in line:
                avg = _num(line.split(":")[-1].strip(), line_no, "average bus bandwidth")
            elif found_op is None and (h := _OP_HINT.search(line)):
                found_op = BINARY_OPS[h.group(1)]
            continue
        if found_op is None and (h := _OP_HINT.search(line)):   # the command line
            found_op = BINARY_OPS[h.group(1)]
            continue
        if not _ROW_START.match(line):
            continue          # NCCL INFO lines, prompts, warnings
        tok = line.split()
        # size count type redop [root] (time algbw busbw wrong) x 2
        if len(tok) in (13, 12):
            half = tok[-8:]
        else:
            raise NcclTestsFormatError(
                line_no, f"expected 12 or 13 columns (size count type redop [root] then "
                f"time algbw busbw #wrong, out-of-place and in-place), found {len(tok)}")
        size = _num(tok[0], line_no, "size")
        t_out = _num(half[0], line_no, "out-of-place time")
        t_in = _num(half[4], line_no, "in-place time")
        busbw = _num(half[2], line_no, "out-of-place busbw")
        for wrong in (half[3], half[7]):
            if wrong.isdigit() and int(wrong) > 0:
                notes.append(f"line {line_no}: {wrong} wrong values reported")
        time_us = (t_out + t_in) / 2
        if abs(t_out - t_in) > 0.3 * min(t_out, t_in):
            time_us = min(t_out, t_in)
            notes.append(f"line {line_no}: out-of-place {t_out} us and in-place {t_in} us "
                         "differ by over 30%; the faster one is used")
        rows.append({"size": size, "time_us": time_us, "busbw_gb_per_s": busbw,
                     "time_out_us": t_out, "time_in_us": t_in})
    if not rows:
        raise NcclTestsFormatError(0, "no result rows found (size count type ... lines)")
    if found_op is None:
        raise NcclTestsFormatError(0, "the log does not say which collective it measured "
                                   "(no '*_perf' name); pass op explicitly")
    if hosts:
        found = (len(hosts), len(set(hosts.values())))
        for name, given, seen in (("ranks", ranks, found[0]), ("nodes", nodes, found[1])):
            if given is not None and given != seen:
                raise NcclTestsFormatError(0, f"{name} {given} given, but the log's '#  Rank' "
                                           f"lines show {seen}")
        return NcclTestsLog(op=found_op, ranks=found[0],
                            hosts=[hosts[r] for r in sorted(hosts)], rows=rows,
                            avg_busbw_gb_per_s=avg, notes=notes)
    if ranks is None and nodes is not None:
        raise NcclTestsFormatError(0, f"nodes {nodes} given without the ranks: a log without "
                                   "its '#  Rank' lines needs both")
    if ranks is None:
        notes.append("no '#  Rank' lines: the group size is unknown; assumed 2 (give the "
                     "ranks and nodes the test ran on)")
    elif nodes is None:
        notes.append(f"no '#  Rank' lines: {ranks} ranks as given, on one node (give the "
                     "nodes where it spanned more)")
    return NcclTestsLog(op=found_op, ranks=ranks or 2, hosts=[], rows=rows,
                        avg_busbw_gb_per_s=avg, notes=notes, nodes=nodes or 1)
