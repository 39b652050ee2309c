"""The evaluation's torch device: the one asked for, else CUDA when visible; never CPU by surprise on a GPU pod."""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The number of GPUs the pipeline requested for this pod (unset or ``0``: none); set by the pipelines' tasks.
REQUESTED_GPUS_ENV = "KFP_FINETUNE_REQUESTED_GPUS"


class NoGpuError(RuntimeError):
    """The pod requested GPUs and sees none."""


def resolve_device(device: str, backend: str, env: Mapping[str, str] | None = None) -> str | None:
    """The device for lm-eval: the given one, else ``cuda`` when visible, else ``cpu`` (None for vLLM).

    Raises:
        NoGpuError: The pod requested GPUs and torch sees none.
    """
    if backend == "vllm":
        return None
    if device:
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    requested = (os.environ if env is None else env).get(REQUESTED_GPUS_ENV, "").strip()
    if requested not in ("", "0"):
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise NoGpuError(
            f"No CUDA GPUs are available: this evaluation pod requested {requested} GPU(s) but torch "
            f"{torch.__version__} ({build}) sees none; check that it ran on a GPU node (label "
            "nvidia.com/gpu.present=true) with the NVIDIA device plugin and a CUDA image, or evaluate on CPU on "
            "purpose: device='cpu', or compile with --eval-gpus 0"
        )
    return "cpu"
