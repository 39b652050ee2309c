"""The process group the trainer runs in: one process (the ``local`` launcher), or one rank of a ``torchrun`` job.

:func:`from_environment` reads the variables ``torchrun`` sets in each worker (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) and joins the process group: NCCL with one GPU per process when
CUDA is available, gloo on CPU. :class:`Distributed` is what the training loop asks of it: wrap the model
(``DistributedDataParallel``, which averages gradients over the ranks), sum numbers over the ranks, agree on a stop,
wait for the others. With one process every call is a no-op, so the same loop serves both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Iterator, Mapping
from typing import Any

#: How long a collective may wait for a missing rank before the job fails (a lost node must not hang it for ever).
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)


class DistributedSetupError(RuntimeError):
    """The torchrun environment is incomplete or inconsistent; the message names the variable."""


@dataclasses.dataclass
class Distributed:
    """One rank of the job (``world_size == 1``: a plain process, nothing initialised).

    Attributes:
        rank: The global rank (0 writes the model, metrics and checkpoints).
        world_size: The number of processes.
        local_rank: The rank on this node (selects the GPU).
        backend: ``nccl``, ``gloo`` or ``""`` (one process).
        device: The ``torch.device`` this rank trains on.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = ""
    device: Any = None

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the one that writes."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """Whether a process group is in use (more than one process)."""
        return bool(self.backend)

    def wrap(self, model: Any) -> Any:
        """The model to train: ``DistributedDataParallel`` over the ranks, or the model itself with one process."""
        if not self.active:
            return model
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.device.index] if self.device is not None and self.device.type == "cuda" else None
        # Buffers (e.g. OSFT's frozen factors) are equal on every rank: no need to broadcast them at each forward.
        return DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)

    def no_sync(self, wrapped: Any, skip: bool) -> contextlib.AbstractContextManager[Any]:
        """Within the block, backward passes accumulate locally (``skip``) instead of all-reducing gradients."""
        if self.active and skip:
            return wrapped.no_sync()
        return contextlib.nullcontext()

    def sum(self, *values: float) -> list[float]:
        """The sums of ``values`` over every rank (each rank passes its own)."""
        if not self.active:
            return [float(value) for value in values]
        import torch
        import torch.distributed as dist

        tensor = torch.tensor([float(value) for value in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return [float(value) for value in tensor.tolist()]

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank (e.g. "a SIGTERM arrived here"), so that all ranks stop together."""
        return self.sum(1.0 if flag else 0.0)[0] > 0

    def barrier(self) -> None:
        """Waits until every rank got here."""
        if self.active:
            import torch.distributed as dist

            if self.backend == "nccl":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def close(self) -> None:
        """Leaves the process group."""
        if self.active:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def _int_variable(env: Mapping[str, str], name: str) -> int:
    value = str(env.get(name, "")).strip()
    if not value.isdigit():
        raise DistributedSetupError(
            f"environment variable {name}={env.get(name)!r}: must be a non-negative integer (set by torchrun); "
            "run the trainer through torchrun (the pod command does)"
        )
    return int(value)


def from_environment(env: Mapping[str, str] | None = None) -> Distributed:
    """Joins the process group ``torchrun`` describes in ``env`` (a plain single process when ``WORLD_SIZE`` is unset).

    Under torchrun the group is joined whatever the world size, so that a one-GPU job runs the same NCCL and DDP
    code as a multi-node one.

    Args:
        env: The worker's environment (default ``os.environ``).

    Returns:
        This rank, with its device: ``cuda:<LOCAL_RANK>`` and NCCL when CUDA is available, else the CPU and gloo.

    Raises:
        DistributedSetupError: A torchrun variable is missing or not an integer.
    """
    import torch

    env = os.environ if env is None else env
    cuda = torch.cuda.is_available()
    under_torchrun = bool(env.get("WORLD_SIZE"))
    world_size = _int_variable(env, "WORLD_SIZE") if under_torchrun else 1
    rank = _int_variable(env, "RANK") if under_torchrun else 0
    local_rank = _int_variable(env, "LOCAL_RANK") if under_torchrun else 0
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if not under_torchrun:
        return Distributed(device=device)
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not env.get(name):
            raise DistributedSetupError(f"environment variable {name} is not set (torchrun sets it)")
    import torch.distributed as dist

    backend = "nccl" if cuda else "gloo"
    kwargs: dict[str, Any] = {"backend": backend, "timeout": COLLECTIVE_TIMEOUT}
    if cuda:
        kwargs["device_id"] = device
    dist.init_process_group(**kwargs)
    return Distributed(rank=rank, world_size=world_size, local_rank=local_rank, backend=backend, device=device)


@contextlib.contextmanager
def process_group(env: Mapping[str, str] | None = None) -> Iterator[Distributed]:
    """:func:`from_environment` for a block; the group is left when it ends."""
    group = from_environment(env)
    try:
        yield group
    finally:
        group.close()
