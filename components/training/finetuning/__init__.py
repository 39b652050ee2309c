"""Fine-tuning component ``train_model`` (SFT, OSFT, LoRA) and its local CPU training entry point."""

from .component import train_model
from .config import TrainingConfig
from .local_backend import train_locally

__all__ = ["TrainingConfig", "train_locally", "train_model"]
