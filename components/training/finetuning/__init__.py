"""Fine-tuning component ``train_model`` (SFT, OSFT, LoRA, GRPO); the README maps its modules."""

from __future__ import annotations

from typing import Any

__all__ = ["TrainingConfig", "train_model"]


def __getattr__(name: str) -> Any:
    """The KFP component, imported on first use (the pods import this package without ``kfp.dsl``)."""
    if name == "train_model":
        from .component import train_model

        return train_model
    if name == "TrainingConfig":
        from .config import TrainingConfig

        return TrainingConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
