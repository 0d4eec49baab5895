"""Cloud GPU instances as cluster presets: one instance is one node, its GPUs, NVLink and
network as the provider's pages state them.

Sources (read 2026-12):
- AWS, Amazon EC2 User Guide (awsdocs/amazon-ec2-user-guide, accelerated-computing-instances
  and using-eni): "P4d instances offer 400 Gbps of aggregate network bandwidth throughput and
  support, Elastic Fabric Adapter (EFA)", "P4de instances offer NVIDIA 80GB-A100s GPUs", four
  network cards on p4d.24xlarge and p4de.24xlarge; its P5 EFA page: "P5 and P5e instances
  support up to 32 network cards and can deliver up to 3,200 Gbps" (translated from the
  page's Portuguese edition, the one found); AWS's P5en launch post: "up to
  3,200 Gbps network bandwidth with EFAv3" (16 EFA devices: Karpenter's instance-type
  reference, aws/karpenter-provider-aws, built from the EC2 API: p5en ``efa|16``, p5 and p5e
  ``efa|32``, p4d and p4de ``efa|4``; the same table gives the GPUs' memory, 40960 / 81920 /
  144384 MiB). The A100 and H100/H200 boards are NVIDIA's HGX with NVSwitch, 600 and 900 GB/s
  per GPU both ways together ("600 GB/s NVSwitch", "900 GB/s peer-to-peer GPU communication
  with NVIDIA NVSwitch": AWS's P4 and P5 product pages as copies of them give it; NVLink 3
  and 4's rates on NVIDIA's datasheets, as the DGX presets have them).
- Azure, virtual machine sizes (MicrosoftDocs/azure-compute-docs, sizes/gpu-accelerated): ND
  A100 v4 "eight NVIDIA Ampere A100 40GB ... 1.6 TB/s of interconnect bandwidth per VM ...
  200 GB/s NVIDIA Mellanox HDR InfiniBand" (the page's units for eight HDR ports, 200 Gb/s
  each: 1.6 Tb/s), NDm A100 v4 the same with A100 80GB, ND H100 v5 "3.2 Tbps of interconnect
  bandwidth per VM ... dedicated 400 Gbps NVIDIA Quantum-2 CX7 InfiniBand" per GPU, ND H200 v5
  "eight NVIDIA H200 Tensor Core GPUs, interconnected with 900 GB/s NVLink ... 3.2Tb/s".
- Google Cloud, GPU network bandwidth (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth):
  A3 Ultra "eight NVIDIA ConnectX-7 (CX7) network interface cards ... The eight CX7 NICs
  deliver a total network bandwidth of 3,200 Gbps ... each CX7 NIC is aligned with one NVIDIA
  H200 141GB GPU", GPUDirect RDMA over RoCE. (A3 High and A3 Mega run GPUDirect-TCPX/TCPXO,
  whose data NICs' rates the pages give only as totals that disagree between versions, 1,600
  and 1,800 Gbps for A3 Mega: no preset.)

EFA is AWS's RDMA over its own SRD transport, costed as the ``roce`` kind (its default
efficiency), as the published-table rules read it, with the presets' per-step latency of 5 us.
AWS's own nccl-tests output for two instances (aws-samples/awsome-distributed-training,
micro-benchmarks/nccl-tests/README.md; 16 ranks, ``tests/data/aws_nccl_tests``) shows what
these presets get right and what they do not (``tests/test_cloud_presets.py``):
- p5 at 256 MiB, the size of the gradient buckets training sends: 343 GB/s of all_reduce bus
  bandwidth measured, 328 costed (the ring across nodes).
- Larger messages on two instances: 444 GB/s measured at 2 GiB on p5 and 78.3 on p4de (70 at
  256 MiB), against the ring's 338 and 42.5: on two nodes NCCL's tree sends half the bytes
  over the network that a ring does, which the model does not cost.
- Small messages: an 8-byte all_reduce took 161-164 us on p4de and 65-75 on p5, against the
  model's 12.5 (EFA's per-message cost through NCCL's network plugin, which a 5 us step does
  not hold).
A calibration from the user's own nccl-tests log (``planner calibrate import-nccl-tests
--ranks 16 --nodes 2``) costs the collectives as measured instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def cloud_presets(node: Callable[..., dict[str, Any]], hopper_nvls: float
                  ) -> dict[str, dict[str, Any]]:
    """The cloud presets, built by the cluster module's node builder (``_dgx_nodes``) with
    Hopper's NVLink SHARP ratio for the H100 and H200 boards (NVSwitch, as on a DGX)."""

    def efa(name: str, gpu: str, nvlink: float, gbps: float, nics: int,
            nvls: float | None = None) -> dict[str, Any]:
        """An EC2 instance: NVLink GB/s per GPU and direction, EFA Gb/s per instance."""
        return node(name, gpu, nvlink, gbps / 8, nics=nics, inter_kind="roce", nvls=nvls)

    return {
        "aws-p4d": efa("aws-p4d", "a100-40gb", 300, 400, 4),
        "aws-p4de": efa("aws-p4de", "a100-80gb", 300, 400, 4),
        "aws-p5": efa("aws-p5", "h100-sxm", 450, 3200, 32, hopper_nvls),
        "aws-p5e": efa("aws-p5e", "h200-sxm", 450, 3200, 32, hopper_nvls),
        "aws-p5en": efa("aws-p5en", "h200-sxm", 450, 3200, 16, hopper_nvls),
        "azure-nd-a100-v4": node("azure-nd-a100-v4", "a100-40gb", 300, 200),
        "azure-ndm-a100-v4": node("azure-ndm-a100-v4", "a100-80gb", 300, 200),
        "azure-nd-h100-v5": node("azure-nd-h100-v5", "h100-sxm", 450, 400, nvls=hopper_nvls),
        "azure-nd-h200-v5": node("azure-nd-h200-v5", "h200-sxm", 450, 400, nvls=hopper_nvls),
        "gcp-a3-ultra": node("gcp-a3-ultra", "h200-sxm", 450, 400, inter_kind="roce",
                             nvls=hopper_nvls),
    }
