"""Cluster description: nodes of identical GPUs, one link tier inside a node, one across nodes.

Link conventions (the same as DESIGN.md's JSON contract):
- ``intra_node.bandwidth_gb_per_s`` is per GPU, one direction (NVLink 3 on A100: 600 GB/s
  bidirectional = 300 GB/s each way; NVLink 4 on H100/H200: 450 GB/s each way).
- ``inter_node.bandwidth_gb_per_s`` is per node, one direction, all NICs together (DGX-1 and
  DGX-2 with V100: 4 and 8 x 100 Gb/s EDR = 50 and 100 GB/s; DGX A100:
  8 x 200 Gb/s HDR = 200 GB/s; DGX H100/H200/B200: 8 x 400 Gb/s NDR = 400 GB/s; DGX B300:
  8 x 800 Gb/s = 800 GB/s).
- A node is one NVLink domain: 8 GPUs on a DGX, 72 on a GB200 or GB300 NVL72 rack, whose
  hosts hold 4 GPUs each (``gpus_per_host``, what launch files use).
- ``efficiency`` is the fraction of that bandwidth a large collective actually achieves (its
  nccl-tests bus bandwidth over the link rate). Defaults per link kind come from published
  nccl-tests runs: all_reduce busbw of about 230-240 GB/s on 300 GB/s A100 NVSwitch (0.8),
  about 90% of line rate on InfiniBand. Calibration replaces them with measured numbers.
- ``latency_us`` is the alpha of one algorithm step over that link (NCCL's own tuner uses
  0.6-3.4 us per NVLink hop and 2.7-14 us per network hop by protocol; src/graph/tuning.cc).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.specs._preset import PresetSpec
from planner.specs.cloud import cloud_presets
from planner.specs.gpu import GPUSpec

LinkKind = Literal["nvswitch", "nvlink", "pcie", "loopback", "infiniband", "roce", "ethernet"]
INTRA_KINDS = ("nvswitch", "nvlink", "pcie", "loopback")
INTER_KINDS = ("infiniband", "roce", "ethernet", "loopback")

DEFAULT_LINK_EFFICIENCY: dict[str, float] = {
    "nvswitch": 0.8, "nvlink": 0.8, "pcie": 0.7, "loopback": 1.0,
    "infiniband": 0.9, "roce": 0.85, "ethernet": 0.7,
}

# NVLink SHARP (NVLS): on Hopper and Blackwell NVSwitch nodes NCCL (2.17 on) runs all_reduce
# inside a node by having the switches reduce (multimem loads and stores), by default. Its bus
# bandwidth on 8 GPUs over the ring's, the one the link's bandwidth x efficiency gives (how it
# varies with the group's size: ``collectives.nvls_algbw``):
# - Hopper: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an
#   effective NVLink bandwidth of 370GB/s [...] Now allreduce uses NVLink SHARP by default
#   [...] On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" (NCCL's
#   maintainer, NVIDIA/nccl-tests issue 212; GTC talk S62129 quotes the same 480 GB/s):
#   480 / 370 = 1.30.
# - Blackwell: NCCL's tuner rates NVLS at 0.74 of the NVLink bandwidth on Blackwell against
#   0.85 on Hopper (src/graph/tuning.cc ``nvlsEfficiency``), so 1.30 x 0.74 / 0.85 = 1.13.
#   One user's 8 B200 node measured all_reduce at "830+" GB/s busbw where NCCL's topology puts
#   the ring at 721.8 (NVIDIA/nccl issue 1807): 1.15, within 2%.
# Across nodes NCCL's NVLS tree gains little beyond two nodes (320 GB/s busbw with or without
# NVLS on 4 nodes of 8 H100, against 330 -> 430 GB/s on one or two; NVIDIA/nccl issue 1221),
# so the cost model uses NVLS for single-node groups only (``collectives.nccl_time``).
NVLS_BUSBW_RATIO: dict[str, float] = {"hopper": 1.30, "blackwell": 1.13}


class LinkSpec(PresetSpec):
    """One tier of the network: what kind of link, its bandwidth and its per-step latency."""

    kind: LinkKind = Field(description="Link technology.")
    bandwidth_gb_per_s: float = Field(
        ge=1e-3, le=1e6,
        description="GB/s (1e9 B/s), one direction: per GPU inside a node, per node across."
    )
    latency_us: float = Field(ge=0, le=1e7, description="Alpha: latency of one algorithm step, us.")
    efficiency: float | None = Field(
        None, ge=1e-3, le=1,
        description="Achieved fraction of the bandwidth in large collectives (nccl-tests busbw "
        "over link rate). Default depends on the kind (0.8 NVLink/NVSwitch, 0.9 InfiniBand).",
    )
    nics_per_node: int | None = Field(
        None, ge=1, le=1024,
        description="Inter-node only: NICs per node (informational; bandwidth is the sum)."
    )
    nvls_busbw_ratio: float | None = Field(
        None, ge=0.1, le=10,
        description="Intra-node NVSwitch only: NVLink SHARP (the switch reduces), NCCL's NVLS "
        "algorithm for all_reduce inside a node, whose bus bandwidth on 8 GPUs is this multiple "
        "of the link's ring bus bandwidth (bandwidth x efficiency; fewer GPUs get less of it, "
        "as measured). The Hopper and Blackwell presets "
        "set it (NCCL enables NVLS by default on their NVSwitch nodes); GPUs older than "
        "Hopper (no fp8 peak) never use it; null: no NVLS (NCCL_NVLS_ENABLE=0, or a switch "
        "without it).")

    @property
    def effective_efficiency(self) -> float:
        return self.efficiency if self.efficiency is not None else DEFAULT_LINK_EFFICIENCY[self.kind]

    @property
    def effective_bandwidth(self) -> float:
        """Achieved bandwidth in bytes/s."""
        return self.bandwidth_gb_per_s * 1e9 * self.effective_efficiency

    @property
    def alpha_s(self) -> float:
        return self.latency_us * 1e-6


def _dgx_nodes(name: str, gpu: str, nvlink_gb_per_s: float, network_gb_per_s: float,
               gpus: int = 8, nics: int | None = None, intra_kind: str = "nvswitch",
               nvls: float | None = None, intra_efficiency: float | None = None,
               inter_kind: str = "infiniband", **more: Any) -> dict[str, Any]:
    """A preset of NVLink nodes on InfiniBand: NVLink per GPU and direction (through NVSwitch,
    or GPU to GPU where ``intra_kind`` is "nvlink"), the network per node and direction (all
    NICs together; one a GPU unless ``nics`` says otherwise), and NVLink SHARP's all_reduce
    bus bandwidth over the ring's where the switches have it (``NVLS_BUSBW_RATIO``); AMD's
    nodes the same with their Infinity Fabric as GPU-to-GPU links, its measured share where
    one is published (``intra_efficiency``), and their network's kind."""
    intra = {"kind": intra_kind, "bandwidth_gb_per_s": nvlink_gb_per_s, "latency_us": 1.0,
             "nvls_busbw_ratio": nvls}
    if intra_efficiency is not None:
        intra["efficiency"] = intra_efficiency
    return {"name": name, "num_nodes": 1, "gpus_per_node": gpus, "gpu": gpu, **more,
            "intra_node": intra,
            "inter_node": {"kind": inter_kind, "bandwidth_gb_per_s": network_gb_per_s,
                           "latency_us": 5.0, "nics_per_node": nics or gpus}}


_CLUSTER_PRESETS: dict[str, dict[str, Any]] = {
    # V100 servers (NVIDIA's DGX-1 and DGX-2 datasheets): DGX-1, 8 V100 SXM2 32 GB whose six
    # NVLink 2 links (25 GB/s each way) join them GPU to GPU in a hybrid cube-mesh, 150 GB/s
    # a GPU each way, and 4 x 100 Gb/s EDR InfiniBand; DGX-2, 16 V100 32 GB whose six links
    # go to NVSwitches (the same 150 GB/s to every GPU), and 8 x 100 Gb/s InfiniBand.
    "dgx-1": _dgx_nodes("dgx-1", "v100-32gb", 150, 50, nics=4, intra_kind="nvlink"),
    "dgx-2": _dgx_nodes("dgx-2", "v100-32gb", 150, 100, gpus=16, nics=8),
    "dgx-a100": _dgx_nodes("dgx-a100", "a100-80gb", 300, 200),
    "dgx-h100": _dgx_nodes("dgx-h100", "h100-sxm", 450, 400,
                           nvls=NVLS_BUSBW_RATIO["hopper"]),
    "dgx-h200": _dgx_nodes("dgx-h200", "h200-sxm", 450, 400,
                           nvls=NVLS_BUSBW_RATIO["hopper"]),
    # HGX A800: 8 A800 80GB on the HGX A100's NVSwitch board at 400 GB/s per GPU both ways
    # together (200 each way), its NVLink cut from the A100's 600 (gpu.py); the network is not
    # published for A800 systems: the DGX A100's eight 200 Gb/s HDR NICs, which a table's
    # hardware text that names its NICs replaces.
    "hgx-a800": _dgx_nodes("hgx-a800", "a800-80gb", 200, 200),
    # HGX H800: 8 H800 on third-generation NVSwitch at 400 GB/s per GPU both ways together
    # (200 each way; NVIDIA H800 datasheet), one 400 Gb/s InfiniBand NIC per GPU. DeepSeek-V3's
    # report measures what they give: "NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times
    # that of IB (50 GB/s)" (arXiv 2412.19437, section 3.2.2), 0.8 of the link as the NVSwitch
    # default efficiency has it. NVLink SHARP as on the other Hopper NVSwitch nodes.
    "hgx-h800": _dgx_nodes("hgx-h800", "h800-sxm", 200, 400,
                           nvls=NVLS_BUSBW_RATIO["hopper"]),
    # DGX B200: NVLink 5, 1.8 TB/s per GPU bidirectional (900 GB/s each way); 8 single-port
    # ConnectX-7 at 400 Gb/s for the compute fabric (DGX B200 datasheet), as on DGX H100.
    "dgx-b200": _dgx_nodes("dgx-b200", "b200-sxm", 900, 400,
                           nvls=NVLS_BUSBW_RATIO["blackwell"]),
    # GB200 NVL72: one NVLink domain of 72 GPUs (18 compute trays of 4 GPUs, NVLink 5 at
    # 1.8 TB/s per GPU through the rack's NVLink switches; GB200 NVL72 specifications) is one
    # "node" of the cost model; each tray is a host of 4 GPUs (gpus_per_host) for torchrun,
    # Slurm and Kubernetes, with one 400 Gb/s ConnectX-7 per GPU (72 x 50 GB/s a rack). Each
    # Grace CPU reaches its two GPUs over NVLink-C2C, 900 GB/s both ways together (GB200
    # NVL72 specifications): 225 GB/s per GPU and direction to host memory.
    "gb200-nvl72": _dgx_nodes("gb200-nvl72", "gb200", 900, 72 * 50, gpus=72,
                              gpus_per_host=4, host_link_gb_per_s=225,
                              nvls=NVLS_BUSBW_RATIO["blackwell"]),
    # DGX B300 and GB300 NVL72: the same NVLink 5 and NVLink-C2C, ConnectX-8 at 800 Gb/s per
    # GPU (DGX B300 datasheet: 8 OSFP ports; GB300 NVL72: 72 ConnectX-8, 4 a tray).
    "dgx-b300": _dgx_nodes("dgx-b300", "b300-sxm", 900, 800,
                           nvls=NVLS_BUSBW_RATIO["blackwell"]),
    "gb300-nvl72": _dgx_nodes("gb300-nvl72", "gb300", 900, 72 * 100, gpus=72,
                              gpus_per_host=4, host_link_gb_per_s=225,
                              nvls=NVLS_BUSBW_RATIO["blackwell"]),
    # AMD Instinct nodes, their Infinity Fabric costed as GPU-to-GPU links ("nvlink" kind):
    # HPE Cray EX235a (Frontier's and LUMI-G's node): 4 MI250X, 8 GCDs, each a GPU; the two
    # GCDs of a module share 200 GB/s each way and GCDs of different modules 50-100 GB/s
    # ("GCDs on different MI250X ... ranges from 50-100 GB/s", OLCF's Frontier user guide), so
    # a ring over the 8 crosses 50 GB/s links: 50 a GCD (TP of 2 within a module is faster
    # than this uniform link says); "[4x] HPE Slingshot 200 Gbps (25 GB/s) NICs providing a
    # node-injection bandwidth of 800 Gbps (100 GB/s)" (the same guide), Slingshot's RDMA
    # Ethernet costed as RoCE.
    "hpe-cray-ex235a": _dgx_nodes("hpe-cray-ex235a", "mi250x-gcd", 50, 100, nics=4,
                                  intra_kind="nvlink", inter_kind="roce"),
    # 8 MI300X (or MI325X) in a full mesh, each "connected to its seven peer GPUs via xGMI
    # links", "448 GB/s (7x64 GB/s)" a GPU, where RCCL's 8-GPU all_reduce reaches 315-319 GB/s
    # bus bandwidth at 1-16 GiB (ROCm blog 'mi300x-rccl-xgmi', RCCL 2.22.3): 0.71 of it; the
    # network of Azure's ND MI300X v5, "8x400 Gigabit NDR" InfiniBand.
    "mi300x-8": _dgx_nodes("mi300x-8", "mi300x", 448, 400, intra_kind="nvlink",
                           intra_efficiency=0.71),
    "mi325x-8": _dgx_nodes("mi325x-8", "mi325x", 448, 400, intra_kind="nvlink",
                           intra_efficiency=0.71),
    # Cloud instances, each one node (``planner/specs/cloud.py``: the providers' pages, and
    # AWS's measurements of two EFA instances beside what the presets cost).
    **cloud_presets(_dgx_nodes, NVLS_BUSBW_RATIO["hopper"]),
    # This development machine: 4 gloo ranks over loopback TCP. Alpha and bandwidth are the
    # order of magnitude measured with gloo on a 2-core VM (research/collectives.md section 5:
    # all_reduce alpha 0.3-0.6 ms, busbw 0.6-0.9 GB/s); calibration refines them.
    "local-cpu": {
        "name": "local-cpu", "num_nodes": 1, "gpus_per_node": 4, "gpu": "cpu",
        "intra_node": {"kind": "loopback", "bandwidth_gb_per_s": 0.8, "latency_us": 300.0},
        "inter_node": {"kind": "ethernet", "bandwidth_gb_per_s": 1.25, "latency_us": 50.0},
    },
}


MAX_ALLOCATION_GPUS = 1 << 20   # a fragmented allocation is placed GPU by GPU
MAX_POOLS = 4                   # pipelines over pools try every order of the pools used


class FreeNode(BaseModel):
    """One node of an allocation a scheduler offers: its name and its free GPUs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=253, pattern=r"^[A-Za-z0-9._-]+$",
                             description="Host name (Slurm node name, Kubernetes node name).")
    gpus: tuple[int, ...] = Field(max_length=1024, description="Free GPU indices on the node.")


class ClusterSpec(PresetSpec):
    """Homogeneous nodes. A preset with overrides: ``{"preset": "dgx-h100", "num_nodes": 4}``.

    A fragmented allocation (what a scheduler has free) is given by
    ``free_gpus_per_node: [8, 8, 6, 4]`` or ``free_gpus: [{"name": "n1", "gpus": [0, 1, 2, 3]},
    ...]``; ``num_nodes`` then defaults to their count. The planner uses the same number of GPUs
    on every node it uses (what torchrun, Slurm's ``--gpus-per-node`` and one pod per node
    need) and chooses the nodes (``planner.search.allocation``)."""

    _presets: ClassVar[dict[str, dict[str, Any]]] = _CLUSTER_PRESETS

    name: str = Field("cluster", min_length=1, max_length=200, description="Label shown in results.")
    num_nodes: int = Field(ge=1, le=100_000, description="Number of nodes.")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs (ranks) per node.")
    gpus_per_host: int | None = Field(
        None, ge=1, le=1024, description="GPUs per host (operating-system node) where one "
        "NVLink domain, the cost model's node, spans several hosts: GB200 NVL72 is 72 GPUs per "
        "node and 4 per host. Launch files (torchrun, Slurm, Kubernetes) place ranks this many "
        "to a host. Default: gpus_per_node.")
    host_link_gb_per_s: float | None = Field(
        None, ge=1e-3, le=1e6, description="Bandwidth between one GPU and host memory, GB/s "
        "one direction, for activations offloaded to the CPU (plan.cpu_offload_layers). "
        "gb200-nvl72: 225 (NVLink-C2C, 900 GB/s both ways per Grace and its two GPUs). Null: "
        "offloading is not planned (PCIe hosts: give it, e.g. about 50 for PCIe 5.0 x16).")
    gpu: GPUSpec = Field(description="GPU preset name or explicit GPU spec.")
    intra_node: LinkSpec = Field(description="Link between GPUs of one node (per GPU).")
    inter_node: LinkSpec = Field(description="Network between nodes (per node, all NICs).")
    free_gpus_per_node: tuple[Annotated[int, Field(ge=0, le=1024)], ...] | None = Field(
        None, max_length=100_000, description="A fragmented allocation: free GPUs on each "
        "node (the first ones of each node are used).")
    free_gpus: tuple[FreeNode, ...] | None = Field(
        None, max_length=100_000, description="A fragmented allocation with node names and "
        "the free GPU indices of each node.")
    pools: tuple[ClusterSpec, ...] | None = Field(
        None, min_length=1, max_length=MAX_POOLS, description="A heterogeneous cluster: "
        "pools of identical nodes (each a cluster: preset, num_nodes, overrides), e.g. 2 DGX "
        "H100 and 4 DGX A100 nodes. `plan` assigns pipeline stages to pools; the top-level "
        "GPU and links are the first pool's, num_nodes their sum.")

    @model_validator(mode="before")
    @classmethod
    def _pooled(cls, data: Any) -> Any:
        """A cluster of pools takes its top-level fields from its first pool."""
        if not (isinstance(data, dict) and data.get("pools")):
            return data
        if "preset" in data:
            raise ValueError("give pools or a preset, not both (each pool has its own)")
        if not isinstance(data["pools"], (list, tuple)):
            return data                 # the field's own validation says what it must be
        pools = []
        for k, raw in enumerate(data["pools"]):
            try:
                pools.append(raw if isinstance(raw, ClusterSpec)
                             else ClusterSpec.model_validate(raw))
            except ValidationError as exc:
                err = exc.errors()[0]
                where = "".join(f".{x}" for x in err["loc"])
                raise ValueError(f"pools[{k}]{where}: "
                                 + err["msg"].removeprefix("Value error, ")) from None
        first = pools[0]
        return {"gpus_per_node": first.gpus_per_node, "gpu": first.gpu,
                "intra_node": first.intra_node, "inter_node": first.inter_node,
                "num_nodes": sum(p.num_nodes for p in pools), "name": "pools", **data}

    @model_validator(mode="before")
    @classmethod
    def _nodes_of_the_allocation(cls, data: Any) -> Any:
        if isinstance(data, dict) and "num_nodes" not in data:
            free = data.get("free_gpus_per_node") or data.get("free_gpus")
            if isinstance(free, (list, tuple)):
                data = {**data, "num_nodes": len(free)}
        return data

    @model_validator(mode="after")
    def _pool_rules(self) -> ClusterSpec:
        if self.pools is None:
            return self
        if self.free_gpus_per_node is not None or self.free_gpus is not None:
            raise ValueError("a cluster of pools takes no free_gpus / free_gpus_per_node")
        for j, pool in enumerate(self.pools):
            if pool.pools is not None or pool.free_nodes is not None:
                raise ValueError(f"pools[{j}]: a pool is plain nodes (no pools or "
                                 "free GPUs of its own)")
        first = self.pools[0]
        if (self.gpu, self.gpus_per_node, self.intra_node, self.inter_node) != (
                first.gpu, first.gpus_per_node, first.intra_node, first.inter_node):
            raise ValueError("a cluster of pools takes its gpu, gpus_per_node and links from "
                             "its first pool: set them in the pools")
        if self.num_nodes != sum(p.num_nodes for p in self.pools):
            raise ValueError(f"num_nodes ({self.num_nodes}) must be the pools' total "
                             f"({sum(p.num_nodes for p in self.pools)})")
        return self

    @model_validator(mode="after")
    def _allocation(self) -> ClusterSpec:
        if self.free_gpus_per_node is not None and self.free_gpus is not None:
            raise ValueError("give free_gpus_per_node or free_gpus, not both")
        G = self.gpus_per_node
        for j, c in enumerate(self.free_gpus_per_node or ()):   # before free_nodes builds them
            if not 0 <= c <= G:
                raise ValueError(f"free_gpus_per_node[{j}] = {c} is not in [0, "
                                 f"gpus_per_node({G})]")
        if sum(self.free_gpus_per_node or ()) > MAX_ALLOCATION_GPUS:
            raise ValueError(f"the allocation offers {sum(self.free_gpus_per_node or ())} GPUs; "
                             f"at most {MAX_ALLOCATION_GPUS:,} are planned GPU by GPU")
        free = self.free_nodes
        if free is None:
            return self
        if len(free) != self.num_nodes:
            raise ValueError(f"the allocation lists {len(free)} nodes; num_nodes is "
                             f"{self.num_nodes}")
        for j, node in enumerate(free):
            if len(set(node.gpus)) != len(node.gpus) or any(not 0 <= x < G for x in node.gpus):
                raise ValueError(f"node {node.name or j}: free GPUs {list(node.gpus)} must be "
                                 f"distinct indices in [0, gpus_per_node({G}))")
        names = [n.name for n in free if n.name]
        if len(set(names)) != len(names):
            raise ValueError("node names in free_gpus must be distinct")
        if not any(n.gpus for n in free):
            raise ValueError("the allocation has no free GPU")
        return self

    @model_validator(mode="after")
    def _hosts(self) -> ClusterSpec:
        h = self.gpus_per_host
        if h is None:
            return self
        if self.gpus_per_node % h:
            raise ValueError(f"gpus_per_host ({h}) must divide gpus_per_node "
                             f"({self.gpus_per_node}): an NVLink domain is whole hosts")
        if self.free_gpus_per_node is not None or self.free_gpus is not None:
            raise ValueError("a fragmented allocation (free_gpus / free_gpus_per_node) is given "
                             "per node of gpus_per_node GPUs; leave gpus_per_host out")
        return self

    @property
    def host_gpus(self) -> int:
        """GPUs per host: what launch files put on one machine."""
        return self.gpus_per_host or self.gpus_per_node

    @property
    def free_nodes(self) -> tuple[FreeNode, ...] | None:
        """The allocation as named nodes (counts become the first indices), or None."""
        if self.free_gpus is not None:
            return self.free_gpus
        if self.free_gpus_per_node is not None:
            return tuple(FreeNode(gpus=tuple(range(c))) for c in self.free_gpus_per_node)
        return None

    @model_validator(mode="after")
    def _link_kinds(self) -> ClusterSpec:
        if self.intra_node.kind not in INTRA_KINDS:
            raise ValueError(
                f"intra_node.kind {self.intra_node.kind!r} is a network link; "
                f"use one of {', '.join(INTRA_KINDS)}"
            )
        if self.inter_node.kind not in INTER_KINDS:
            raise ValueError(
                f"inter_node.kind {self.inter_node.kind!r} is an in-node link; "
                f"use one of {', '.join(INTER_KINDS)}"
            )
        if self.inter_node.nvls_busbw_ratio is not None:
            raise ValueError("inter_node.nvls_busbw_ratio: NVLink SHARP reduces inside an "
                             "NVSwitch node; give it on intra_node, or null")
        if self.intra_node.nvls_busbw_ratio is not None and self.intra_node.kind != "nvswitch":
            raise ValueError(
                f"intra_node.nvls_busbw_ratio needs NVSwitch (NVLink SHARP reduces in the "
                f"switches), not intra_node.kind {self.intra_node.kind!r}; set it null")
        return self

    @property
    def nvls_capable(self) -> bool:
        """Whether the nodes' switches can reduce (NVLink SHARP): NVSwitch with GPUs from
        Hopper on. Hopper's third-generation NVSwitch brought NVLink SHARP, and every GPU from
        Hopper on has fp8 tensor cores while none before it does, so a GPU without an fp8 peak
        (a preset's V100 or A100 swapped into a Hopper node preset) has none."""
        return self.intra_node.kind == "nvswitch" and self.gpu.peak_tflops.fp8 is not None

    @property
    def nvls_ratio(self) -> float | None:
        """NVLink SHARP's all_reduce bus bandwidth over the ring's inside a node, where the
        nodes have it (``nvls_capable``): ``intra_node.nvls_busbw_ratio``."""
        return self.intra_node.nvls_busbw_ratio if self.nvls_capable else None

    @property
    def num_gpus(self) -> int:
        if self.pools is not None:
            return sum(p.num_gpus for p in self.pools)
        return self.num_nodes * self.gpus_per_node
