"""Fine-tuning component ``train_model`` (SFT, OSFT, LoRA).

Layout: ``component.py`` (the KFP wrapper) -> ``run.py`` (the orchestration) -> a launcher: ``local/`` (the CPU
trainer, in this task) or ``launch.py`` (a ``TrainJob``/``PyTorchJob`` built in ``manifests/`` and run by
``cluster/``), whose pods run ``pod/``; ``oci/`` pulls ``oci://`` base models; ``publish.py`` writes the outputs.
See the README for the map.
"""

from .component import train_model
from .config import TrainingConfig

# The CPU trainer (``local/trainer.train_locally``) is imported from its module where it is used: importing this
# package must need only kfp, as the RHOAI guide's compile environment has (``pip install kfp kfp-kubernetes``).
__all__ = ["TrainingConfig", "train_model"]
