"""Several training processes with PyTorch's own launcher: ``torchrun ... -m model.train``.

``torchrun --standalone --nproc_per_node N -m model.train ...`` starts N copies of the command
with ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` in their environment. Each copy then joins one
process group (gloo on the CPU, NCCL on CUDA GPUs) and wraps the model in
``DistributedDataParallel``. Every process draws the same global batch from the same seeded
sampler and keeps its own share of the rows (:func:`share`); DDP averages the gradients. Only
rank 0 writes files and prints. Without those variables nothing here runs: one process, as before.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

import torch

from model.training.errors import TrainError

TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class Ranks:
    """Where this process stands: its rank among ``world_size`` processes and its device.

    Attributes
    ----------
    rank : int                 0 .. world_size - 1; rank 0 alone writes and prints.
    world_size : int           processes training together (1 without torchrun).
    device : torch.device      where the model and the batches live.
    distributed : bool         True when launched by torchrun (a process group exists).
    """

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    distributed: bool = False

    @property
    def is_main(self) -> bool:
        """True for rank 0, the one process that writes checkpoints, snapshots, logs and the bar."""
        return self.rank == 0


ONE_PROCESS = Ranks()  # no torchrun: rank 0 of 1, on the CPU


def launched_by_torchrun() -> bool:
    """True when torchrun (or ``python -m torch.distributed.run``) started this process."""
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def env_rank() -> int:
    """This process's rank from the environment (0 without torchrun); readable before any setup."""
    return int(os.environ.get("RANK", "0")) if launched_by_torchrun() else 0


def env_world_size() -> int:
    """Processes torchrun started (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1")) if launched_by_torchrun() else 1


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """The device for ``--device`` (cpu, cuda or auto = cuda when torch sees a GPU).

    Under torchrun each process on a node takes the GPU numbered by its ``LOCAL_RANK``.

    Raises
    ------
    TrainError
        For ``cuda`` without a CUDA GPU, or with fewer GPUs than processes on this node.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TrainError("--device cuda: torch sees no CUDA GPU here (use --device cpu or auto)")
    if local_rank >= torch.cuda.device_count():
        raise TrainError(f"--device cuda: process {local_rank} of this node has no GPU of its own "
                         f"({torch.cuda.device_count()} GPU(s); use at most that many processes per node)")
    return torch.device("cuda", local_rank)


def start(device_name: str) -> Ranks:
    """Pick the device and, under torchrun, join the process group (gloo on CPU, NCCL on CUDA).

    Raises
    ------
    TrainError
        When the device cannot be used (see :func:`pick_device`).
    """
    if not launched_by_torchrun():
        return Ranks(device=pick_device(device_name))
    import torch.distributed as dist

    rank, world = env_rank(), env_world_size()
    device = pick_device(device_name, int(os.environ["LOCAL_RANK"]))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Ranks(rank=rank, world_size=world, device=device, distributed=True)


def finish(ranks: Ranks) -> None:
    """Leave the process group (nothing without torchrun)."""
    import torch.distributed as dist

    if ranks.distributed and dist.is_initialized():
        dist.destroy_process_group()


def share(batch: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """This rank's rows of a global batch: contiguous, disjoint, together every row once.

    When the rows do not divide evenly the first ``B % world_size`` ranks take one row more
    (``torch.tensor_split``); the loss weighting in training keeps the gradient the global mean.

    Parameters
    ----------
    batch : Tensor (B, ...)

    Returns
    -------
    Tensor (B_rank, ...), B_rank = B // world_size or one more
    """
    if ranks.world_size == 1:
        return batch
    return torch.tensor_split(batch, ranks.world_size)[ranks.rank]


def all_sum(values: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """Element-wise sum of a float64 vector over all ranks (the tensor itself without torchrun)."""
    if not ranks.distributed:
        return values
    import torch.distributed as dist

    values = values.to(ranks.device, torch.float64)
    dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values.cpu()


def broadcast_text(text: str, ranks: Ranks) -> str:
    """Rank 0's ``text`` on every rank (the text itself without torchrun)."""
    if not ranks.distributed:
        return text
    import torch.distributed as dist

    box = [text if ranks.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def wrap(model: torch.nn.Module, ranks: Ranks) -> torch.nn.Module:
    """The module to train: ``DistributedDataParallel(model)`` under torchrun, else ``model``.

    DDP broadcasts rank 0's weights at construction and averages gradients during backward.
    """
    if not ranks.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [ranks.device.index] if ranks.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


class StopRequest:
    """Turns Ctrl+C (SIGINT) into a request that every rank honours at the same step.

    Raising KeyboardInterrupt in one process while another waits in a collective would leave
    that one waiting for good. Under torchrun, SIGINT (from the terminal, or forwarded by
    torchrun) only sets :attr:`requested`; the training loop sums the flags of all ranks with
    each step's loss, so every rank stops after the same step and rank 0 saves once.
    Use as a context manager; the previous handler comes back on exit.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def _on_signal(self, signum, frame) -> None:
        self.requested = True

    def __enter__(self) -> "StopRequest":
        self._previous = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._previous)
