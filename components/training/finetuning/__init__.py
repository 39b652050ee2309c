"""Fine-tuning component ``train_model`` (SFT, OSFT, LoRA).

Layout: ``component.py`` (the KFP wrapper) -> ``run.py`` (the orchestration) -> a launcher: ``local/`` (the CPU
trainer, in this task) or ``launch.py`` (a ``TrainJob``/``PyTorchJob`` built in ``manifests/`` and run by
``cluster/``), whose pods run ``pod/``; ``oci/`` pulls ``oci://`` base models; ``publish.py`` writes the outputs.
See the README for the map.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TrainingConfig", "train_model"]


def __getattr__(name: str) -> Any:
    """The KFP component, imported on first use.

    Importing a module of this package (as the step image's pod does, where kfp runs in its runtime mode) then never
    imports the ``kfp.dsl`` decorators.
    """
    if name == "train_model":
        from .component import train_model

        return train_model
    if name == "TrainingConfig":
        from .config import TrainingConfig

        return TrainingConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
