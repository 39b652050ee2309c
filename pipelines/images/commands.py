"""``kfp-finetune images``, and the image check ``compile``, ``upload``, ``run`` and ``schedule`` run."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pipelines.training.finetuning import PIPELINES


def docker_config_of(args: argparse.Namespace) -> dict | None:
    """The ``--pull-secret-file`` config.json, or ``None``.

    Raises:
        ValueError: The file cannot be read or is not a JSON object.
    """
    from pipelines.images.pull_check import load_docker_config

    path = getattr(args, "pull_secret_file", "")
    return load_docker_config(path) if path else None


def pipeline_images_pullable(packages: Iterable[Path], args: argparse.Namespace) -> bool:
    """Checks every step image of the compiled ``packages``; prints one line per problem; False when one is missing.

    Off with ``--no-image-check`` or ``KFP_FINETUNE_NO_IMAGE_CHECK=1`` (then True, silently).
    """
    from pipelines.images.pipeline_images import distinct, step_images
    from pipelines.images.pull_check import check_disabled, check_images, report_findings
    from pipelines.kfp_api.arguments import read_pipeline_documents

    if check_disabled(getattr(args, "no_image_check", False)):
        return True
    config = docker_config_of(args)
    specs = [(read_pipeline_documents(str(path))[0], Path(path).stem) for path in packages]
    images = distinct(item for spec, label in specs for item in step_images(spec, label))
    findings = check_images(images, config)
    return not report_findings(findings, args.command, sys.stderr)


def print_images(args: argparse.Namespace, settings: dict) -> int:
    """``kfp-finetune images``: every image of the pipelines (and runtimes), as a list or an ImageSetConfiguration.

    Args:
        args: The parsed arguments.
        settings: The compile-time settings the flags give (``pipelines.commands``).
    """
    from pipelines.compile import compile_named
    from pipelines.images.pipeline_images import (
        distinct,
        image_set_configuration,
        images_of_files,
        pinned,
        runtime_images,
    )
    from pipelines.images.pull_check import check_images

    names = args.pipelines or list(PIPELINES)
    with tempfile.TemporaryDirectory(prefix="kfp-finetune-images-") as workdir:
        files = []
        for name in names:
            if name in PIPELINES:
                files.append(compile_named(name, Path(workdir) / f"{name}.yaml", settings))
            elif Path(name).is_file():
                files.append(Path(name))
            else:
                raise FileNotFoundError(
                    f"PIPELINE {name!r} is neither a pipeline name ({', '.join(PIPELINES)}) nor a compiled YAML file"
                )
        named = images_of_files(files)
    if not args.no_runtimes:
        named += runtime_images()
    images = distinct(named)
    digests = {}
    if args.resolve_digests:
        for finding in check_images(images, docker_config_of(args)):
            if finding.digest:
                digests[finding.images[0]] = finding.digest
            elif finding.line:
                print(f"kfp-finetune images: warning: {finding.line}", file=sys.stderr)
    if args.format == "list":
        for image in images:
            print(pinned(image, digests.get(image, "")))
    else:
        sys.stdout.write(image_set_configuration(images, digests))
    return 0
