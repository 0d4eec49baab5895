"""Probe jobs: torch.distributed worker programs and their launchers (local torchrun, Slurm,
Kubernetes). The only part of ``planner`` that starts processes: every command is an argv list
(never a shell string with user text), every wait has a timeout, and the whole process group
is killed on timeout or failure."""
