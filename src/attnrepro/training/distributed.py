"""Data-parallel training with PyTorch's own machinery: ranks from the launcher, the process
group, and the three collectives the training loop needs.

`torchrun --nproc_per_node N attnrepro train ...` sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT. `srun --ntasks N attnrepro train ...` sets SLURM_PROCID,
SLURM_STEP_NUM_TASKS and SLURM_LOCALID instead; the rendezvous then runs on the step's first
node, on a port derived from the job id (so two jobs sharing a node do not collide). The
CLI reads the environment once (`from_environment`) and hands `Ranks` to the training loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from attnrepro.errors import AttnreproError, ConfigError


@dataclass(frozen=True)
class Ranks:
    """Where this process sits in the job: one process per GPU (or per CPU process with gloo)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    init_method: str = "env://"  # torchrun exports MASTER_ADDR/MASTER_PORT; srun gets tcp://host:port

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs and writes checkpoints."""
        return self.rank == 0


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: 'gpu[07-09,12],cpu1' -> 'gpu07'."""
    match = re.match(r"([^\[,]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise AttnreproError(f"SLURM node list {nodelist!r}: cannot read the first host")
    prefix, ranges = match.groups()
    return prefix if ranges is None else prefix + re.split(r"[-,]", ranges)[0]


def from_environment(env: Mapping[str, str]) -> Ranks:
    """Ranks of this process as set by torchrun, by a multi-task srun step, or a single process."""
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun, or anything following its contract
        return Ranks(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")))
    tasks = int(env.get("SLURM_STEP_NUM_TASKS", "1"))
    if tasks > 1:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "localhost")
        host = env.get("MASTER_ADDR") or first_host(nodelist)
        port = env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000)
        return Ranks(int(env["SLURM_PROCID"]), tasks, int(env.get("SLURM_LOCALID", "0")), f"tcp://{host}:{port}")
    return Ranks()


def pick_device(choice: str, ranks: Ranks) -> torch.device:
    """`auto`: this rank's GPU when CUDA is available, else the CPU."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is cuda but torch sees no GPU (torch.cuda.is_available() is False)")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    torch.cuda.set_device(ranks.local_rank)
    return torch.device("cuda", ranks.local_rank)


@contextmanager
def process_group(ranks: Ranks, device: torch.device) -> Iterator[None]:
    """Join the job's process group (NCCL on GPUs, gloo on CPUs) for the duration of training."""
    if ranks.world_size == 1:
        yield
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=ranks.init_method, rank=ranks.rank, world_size=ranks.world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def sum_over_ranks(values: list[float], ranks: Ranks, device: torch.device) -> list[float]:
    """Element-wise sum of `values` over all ranks (float64), one all-reduce."""
    if ranks.world_size == 1:
        return values
    total = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return total.tolist()


def gather_to_all(obj: Any, ranks: Ranks) -> list[Any]:
    """[rank 0's obj, rank 1's obj, ...] on every rank."""
    if ranks.world_size == 1:
        return [obj]
    gathered: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier(ranks: Ranks) -> None:
    if ranks.world_size > 1:
        dist.barrier()
