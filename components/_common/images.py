"""The project's container images: every step of every pipeline runs on one of them by default.

Both are built from the repository's one ``Containerfile`` at each release (``.github/workflows/release.yml``), as
Google Cloud Pipeline Components publish theirs, and carry the project's code in both import layouts (a clone's
``components``/``pipelines`` and the installed wheel's ``kfp_finetune.*``) with every step's dependencies (the lock,
``constraints.txt``): nothing is embedded in the compiled YAML and nothing is installed when a pod starts.
"""

from __future__ import annotations

#: This project's version (``pyproject.toml`` reads it): the wheel's version and the images' tag.
PROJECT_VERSION = "0.1.0"
#: Where the project's images are published.
STEP_IMAGE_REPOSITORY = "quay.io/kfp-finetune/kfp-finetune"
#: The step image (CPU torch, the whole lock, skopeo): ``dataset_download``, ``train_model`` (the launcher),
#: ``model_registry``, and ``lm_eval`` when the evaluation requests no GPU.
STEP_IMAGE = f"{STEP_IMAGE_REPOSITORY}:{PROJECT_VERSION}"
#: The same ``Containerfile`` built with a CUDA torch (``--build-arg TORCH_INDEX=<a CUDA wheel index>``): ``lm_eval``'s
#: image when it requests GPUs (``settings.eval_gpus`` > 0, the default).
STEP_IMAGE_CUDA = f"{STEP_IMAGE}-cuda"
