"""Every image the compiled pipelines and their Trainer runtimes name, for an oc-mirror v2 ImageSetConfiguration.

A pipeline names images in its executors and in the defaults of its ``*image`` parameters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Upstream Kubeflow Trainer v2.1.0's ``torch-distributed`` runtime image; RHOAI's: ``doctor.training.KNOWN_IMAGES``.
TORCH_DISTRIBUTED_IMAGE = "docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
UPSTREAM_RUNTIME_IMAGES = {TORCH_DISTRIBUTED_IMAGE: "torch-distributed runtime, upstream Kubeflow Trainer"}


@dataclasses.dataclass(frozen=True)
class NamedImage:
    """An image as written, and what uses it (``sft: exec-train-model``, a runtime)."""

    image: str
    where: str


def _image_defaults(definitions: Mapping[str, Any] | None) -> Iterable[tuple[str, str]]:
    parameters = (definitions or {}).get("parameters") or {}
    for name, spec in parameters.items():
        default = (spec or {}).get("defaultValue")
        if name.endswith("image") and isinstance(default, str) and default.strip():
            yield name, default.strip()


def step_images(spec: Mapping[str, Any], label: str) -> list[NamedImage]:
    """The executor images of a compiled pipeline spec (``label``: the pipeline's name in ``where``)."""
    executors = (spec.get("deploymentSpec") or {}).get("executors") or {}
    return [
        NamedImage(str(executor["container"]["image"]), f"{label}: {name}")
        for name, executor in executors.items()
        if (executor.get("container") or {}).get("image")
    ]


def pipeline_images(spec: Mapping[str, Any], label: str) -> list[NamedImage]:
    """Every image a compiled pipeline spec names: executors, then image parameters' defaults."""
    named = step_images(spec, label)
    named += [
        NamedImage(image, f"{label}: {name}")
        for name, image in _image_defaults(spec.get("root", {}).get("inputDefinitions"))
    ]
    for component in (spec.get("components") or {}).values():
        named += [
            NamedImage(image, f"{label}: {name}") for name, image in _image_defaults(component.get("inputDefinitions"))
        ]
    return named


def images_of_files(paths: Iterable[Path]) -> list[NamedImage]:
    """Every image the compiled pipeline files name, labelled by the file's stem."""
    from pipelines.kfp_api.arguments import read_pipeline_documents

    named: list[NamedImage] = []
    for path in paths:
        named += pipeline_images(read_pipeline_documents(str(path))[0], Path(path).stem)
    return named


def runtime_images() -> list[NamedImage]:
    """The training pods' images of the runtimes the pipelines use: RHOAI's, then upstream's."""
    from pipelines.doctor.training import KNOWN_IMAGES

    named = [
        NamedImage(image, f"training-hub / torch-distributed runtime, {release} (Training Hub {hub})")
        for image, (release, hub) in KNOWN_IMAGES.items()
    ]
    return named + [NamedImage(image, where) for image, where in UPSTREAM_RUNTIME_IMAGES.items()]


def distinct(named: Iterable[NamedImage]) -> dict[str, list[str]]:
    """``{image: [where, ...]}`` in first-seen order."""
    found: dict[str, list[str]] = {}
    for item in named:
        found.setdefault(item.image, []).append(item.where)
    return found


def describe(where: list[str]) -> str:
    """``where`` in short: ``exec-lm-eval, exec-lm-eval-2 in sft, osft; <a runtime>``."""
    uses: dict[str, list[str]] = {}
    for item in where:
        label, _, use = item.rpartition(": ")
        uses.setdefault(use, [])
        if label and label not in uses[use]:
            uses[use].append(label)
    by_labels: dict[tuple[str, ...], list[str]] = {}
    for use, labels in uses.items():
        by_labels.setdefault(tuple(labels), []).append(use)
    return "; ".join(
        ", ".join(names) + (f" in {', '.join(labels)}" if labels else "") for labels, names in by_labels.items()
    )


def pinned(image: str, digest: str) -> str:
    """``registry/repository@<digest>`` (the tag dropped), or ``image`` when pinned or the digest is unknown."""
    if "@" in image or not digest:
        return image
    path, _, last = image.rpartition("/")
    return f"{path}/{last.split(':', 1)[0]}@{digest}" if path else f"{last.split(':', 1)[0]}@{digest}"


def image_set_configuration(images: Mapping[str, list[str]], digests: Mapping[str, str] | None = None) -> str:
    """An oc-mirror v2 ``ImageSetConfiguration`` of ``images`` (pinned by ``digests``), each after its use."""
    lines = [
        "# oc-mirror v2: oc-mirror -c imageset-config.yaml --workspace file://<dir> docker://<your registry> --v2",
        "kind: ImageSetConfiguration",
        "apiVersion: mirror.openshift.io/v2alpha1",
        "mirror:",
        "  additionalImages:",
    ]
    for image, where in images.items():
        name = pinned(image, (digests or {}).get(image, ""))
        lines.append(f"  # {image}: {describe(where)}" if name != image else f"  # {describe(where)}")
        lines.append(f"  - name: {name}")
    return "\n".join(lines) + "\n"
