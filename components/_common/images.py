"""The container images the components run on by default, and what each one already contains.

Light steps run on a slim CPython image; the evaluation step on a public PyTorch image that already carries torch
and its CUDA wheels; the training launcher on the project's own versioned step image (:data:`STEP_IMAGE`).
"""

from __future__ import annotations

import re

#: The python.org build of CPython 3.11 on Debian 12, pinned by exact tag: the light steps' image.
PYTHON_IMAGE = "docker.io/library/python:3.11.11-slim-bookworm"
#: A public CUDA PyTorch image: the tag the Kubeflow Trainer ``torch-distributed`` ClusterTrainingRuntime uses
#: (``manifests/base/runtimes/torch_distributed.yaml``, Trainer v2.1.0 as carried by opendatahub-io/trainer; the
#: upstream kubeflow/trainer manifest uses the ``cuda12.6`` build of the same torch). Built by pytorch/pytorch's
#: ``Dockerfile``: conda Python 3.11 with torch, its ``nvidia-*`` wheels and triton installed by pip, so pip in the
#: pod sees them as satisfied and installs none of them again.
TORCH_CUDA_IMAGE = "docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"

#: This project's version (``pyproject.toml``); the step image is published under it.
PROJECT_VERSION = "0.1.0"
#: Where the project's step image is published: built from the repository's ``Containerfile`` at each release
#: (``scripts/build_step_image.sh``), as Google Cloud Pipeline Components publish theirs.
STEP_IMAGE_REPOSITORY = "quay.io/kfp-finetune/kfp-finetune"
#: The versioned step image: the project's code and every step's dependencies. ``train_model`` runs on it (its code
#: is too large for KFP's embedded archive: ``docs/architecture.md``, "How code reaches each pod").
STEP_IMAGE = f"{STEP_IMAGE_REPOSITORY}:{PROJECT_VERSION}"

#: The Python version (``major.minor``) of the images above, for resolving their install lists.
IMAGE_PYTHON = {PYTHON_IMAGE: "3.11", TORCH_CUDA_IMAGE: "3.11", STEP_IMAGE: "3.11"}

_PYTORCH_TAG = re.compile(r"(?:^|/)pytorch/pytorch:(?P<torch>\d+\.\d+\.\d+)-cuda")


def torch_version_of(image: str) -> str | None:
    """The torch version a ``pytorch/pytorch:<torch>-cuda<x>-cudnn<y>-<flavor>`` image carries, else None."""
    match = _PYTORCH_TAG.search(image)
    return match.group("torch") if match else None


def python_version_of(image: str, default: str = "3.11") -> str:
    """The ``major.minor`` Python of a known image, or of a ``python:<x.y.z>-...`` tag; ``default`` otherwise."""
    if image in IMAGE_PYTHON:
        return IMAGE_PYTHON[image]
    match = re.search(r"(?:^|/)python:(\d+)\.(\d+)", image)
    return f"{match.group(1)}.{match.group(2)}" if match else default
