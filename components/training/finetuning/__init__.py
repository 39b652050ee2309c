"""Fine-tuning component ``train_model`` (SFT, OSFT, LoRA) and its local CPU training entry point.

Layout: ``component.py`` (the KFP wrapper) -> ``run.py`` (the orchestration) -> a launcher: ``local/`` (the CPU
trainer, in this task) or ``launch.py`` (a ``TrainJob``/``PyTorchJob`` built in ``manifests/`` and run by
``cluster/``), whose pods run ``pod/``; ``oci/`` pulls ``oci://`` base models; ``publish.py`` writes the outputs.
See the README for the map.
"""

from .component import train_model
from .config import TrainingConfig
from .local.trainer import train_locally

__all__ = ["TrainingConfig", "train_locally", "train_model"]
