"""The project's container images, built from the one ``Containerfile`` at each release with the code and the lock.

Every step runs on one of them by default: nothing is embedded in the compiled YAML or installed when a pod starts.
"""

from __future__ import annotations

#: This project's version (``pyproject.toml`` reads it): the wheel's version and the images' tag.
PROJECT_VERSION = "0.1.0"
#: Where the project's images are published.
STEP_IMAGE_REPOSITORY = "quay.io/kfp-finetune/kfp-finetune"
#: The step image (CPU torch, the whole lock, skopeo): ``dataset_download``, ``train_model`` (the launcher),
#: ``model_registry``, and ``lm_eval`` when the evaluation requests no GPU.
STEP_IMAGE = f"{STEP_IMAGE_REPOSITORY}:{PROJECT_VERSION}"
#: The same built with a CUDA torch: ``lm_eval``'s image when it requests GPUs (the default).
STEP_IMAGE_CUDA = f"{STEP_IMAGE}-cuda"
