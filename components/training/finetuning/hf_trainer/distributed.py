"""The process group the trainer runs in: one process (the ``local`` launcher), or one rank of a ``torchrun`` job.

:func:`from_environment` reads the variables ``torchrun`` sets in each worker (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) and joins the process group: NCCL with one GPU per process when
CUDA is available, gloo on CPU. :class:`Distributed` is what the training loop asks of it: wrap the model, sum numbers
over the ranks, agree on a stop, wait for the others, gather full state dicts. With one process every call is a no-op,
so the same loop serves both.

Wrapping (:meth:`Distributed.wrap`): ``DistributedDataParallel`` (every rank holds the model; gradients averaged), or
FSDP2 (``torch.distributed.fsdp.fully_shard`` on each decoder layer, then the root) for the sharding strategies of
``fsdp_sharding_strategy``: ``FULL_SHARD`` (parameters re-sharded after the forward), ``SHARD_GRAD_OP`` (kept
gathered until the backward), ``HYBRID_SHARD`` (sharded within a node, replicated across nodes: a 2-D device mesh).
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
#: ``fsdp_sharding_strategy`` values that shard (FSDP2); ``NO_SHARD`` (and ``""``) replicate with DDP.
SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")


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
    local_world_size: int = 1
    sharded: bool = False

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the one that writes."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """Whether a process group is in use (more than one process)."""
        return bool(self.backend)

    def wrap(self, model: Any, sharding: str = "") -> Any:
        """The model to train: FSDP2 (``sharding`` in :data:`SHARDING_STRATEGIES`, in place) or DDP over the ranks.

        With one process (no group) the model itself. Call before the optimizer is made (FSDP2 replaces the
        parameters by sharded ones).
        """
        if not self.active:
            return model
        if sharding in SHARDING_STRATEGIES:
            self._shard(model, sharding)
            return model
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.device.index] if self.device is not None and self.device.type == "cuda" else None
        # Buffers (e.g. OSFT's frozen factors) are equal on every rank: no need to broadcast them at each forward.
        return DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)

    def _shard(self, model: Any, sharding: str) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        kwargs: dict[str, Any] = {"reshard_after_forward": sharding != "SHARD_GRAD_OP"}
        if sharding == "HYBRID_SHARD" and self.world_size > self.local_world_size:
            shape = (self.world_size // self.local_world_size, self.local_world_size)
            kwargs["mesh"] = init_device_mesh(self.device.type, shape, mesh_dim_names=("replicate", "shard"))
        layer_classes = set(getattr(model, "_no_split_modules", None) or ())
        for module in list(model.modules()):
            if type(module).__name__ in layer_classes:
                fully_shard(module, **kwargs)
        fully_shard(model, **kwargs)
        self.sharded = True

    def no_sync(self, wrapped: Any, skip: bool) -> contextlib.AbstractContextManager[Any]:
        """Within the block, backward passes accumulate locally (``skip``) instead of reducing gradients."""
        if not (self.active and skip):
            return contextlib.nullcontext()
        if self.sharded:
            return _fsdp_no_sync(wrapped)
        return wrapped.no_sync()

    def model_state(self, model: Any) -> dict[str, Any]:
        """The full model state dict (a collective when sharded: every rank calls it; only rank 0 gets the values)."""
        if not self.sharded:
            return model.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def optimizer_state(self, model: Any, optimizer: Any) -> dict[str, Any]:
        """The full optimizer state dict (a collective when sharded, like :meth:`model_state`)."""
        if not self.sharded:
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_optimizer_state_dict(model, optimizer, options=options)

    def load_state(self, model: Any, optimizer: Any, model_state: Any, optimizer_state: Any) -> None:
        """Loads full state dicts (every rank passes the same ones) into the (possibly sharded) model and optimizer."""
        if not self.sharded:
            model.load_state_dict(model_state)
            optimizer.load_state_dict(optimizer_state)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True)
        set_model_state_dict(model, model_state, options=options)
        set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)

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


@contextlib.contextmanager
def _fsdp_no_sync(model: Any) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


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
    local_world_size = _int_variable(env, "LOCAL_WORLD_SIZE") if env.get("LOCAL_WORLD_SIZE") else 1
    return Distributed(rank, world_size, local_rank, backend, device, local_world_size)


@contextlib.contextmanager
def process_group(env: Mapping[str, str] | None = None) -> Iterator[Distributed]:
    """:func:`from_environment` for a block; the group is left when it ends."""
    group = from_environment(env)
    try:
        yield group
    finally:
        group.close()
