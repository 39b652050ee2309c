"""Can every image the pipeline names be pulled? The check of ``compile``/``upload``/``run``/``doctor``.

The registries are asked concurrently, under one deadline; a registry that does not answer is one warning.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from components._common.images import STEP_IMAGE_REPOSITORY
from components._common.oci_reference import credentials_for
from pipelines.images import registry
from pipelines.images.registry import DENIED, FOUND, MISSING, UNREACHABLE, ManifestAnswer, check_manifest, parse_image

#: Set to ``1`` to skip the check (what ``--no-image-check`` does; the test suite sets it, as it compiles offline).
NO_CHECK_ENV = "KFP_FINETUNE_NO_IMAGE_CHECK"
#: The whole check's deadline in seconds.
DEADLINE_SECONDS = 20.0
#: The flag that compiles every step onto another build of the project's image.
IMAGE_FLAG = "--image"


@dataclasses.dataclass(frozen=True)
class ImageFinding:
    """One image's (or one unreachable registry's images') status, the line to print (``""``: found), digest."""

    images: tuple[str, ...]
    status: str
    line: str
    digest: str = ""

    @property
    def failed(self) -> bool:
        """Whether a run would fail on it (missing or refused); unreachable is a warning."""
        return self.status in (MISSING, DENIED)


def check_disabled(flag: bool = False) -> bool:
    """Whether the check is off: ``--no-image-check``, or ``KFP_FINETUNE_NO_IMAGE_CHECK=1``."""
    return flag or os.environ.get(NO_CHECK_ENV, "").strip().lower() in ("1", "true", "yes")


def fix_for(image: registry.ImageReference) -> str:
    """The command(s) that make a missing image available."""
    if image.name == STEP_IMAGE_REPOSITORY:  # a build of this project's Containerfile
        return (
            f"build and push it (`podman build -t {image.text} -f Containerfile . && podman push {image.text}`; on "
            "OpenShift without a registry account: `oc new-build --binary --strategy=docker --name kfp-finetune && "
            "oc start-build kfp-finetune --from-dir . --follow`), then compile with "
            f"`{IMAGE_FLAG} <the image you built>`; or wait for the release that publishes it"
        )
    return (
        f"publish or mirror it to a registry the cluster can pull from (`skopeo copy docker://<source> "
        f"docker://{image.text}`), or compile with the matching --<step>-image flag naming an image that exists"
    )


def _line(image: registry.ImageReference, answer: ManifestAnswer) -> str:
    where = f"registry {image.registry}"
    if answer.status == MISSING:
        return f"image {image.text}: not found in {where} ({answer.detail}): {fix_for(image)}"
    if answer.authenticated:
        return (
            f"image {image.text}: {where} refuses the pull secret's credentials ({answer.detail}): give credentials "
            f"with pull access to {image.repository}, or {fix_for(image)}"
        )
    return (
        f"image {image.text}: {where} refuses an anonymous pull ({answer.detail}; a private or missing image): name "
        f"a pull secret (--pull-secret-file <config.json>; in the cluster `oc secrets link pipeline-runner-dspa "
        f"<secret> --for=pull`), or {fix_for(image)}"
    )


def check_images(
    images: Iterable[str], docker_config: Mapping | None = None, *, deadline_seconds: float = DEADLINE_SECONDS
) -> list[ImageFinding]:
    """One finding per image, one per unreachable registry (its images together); a ValueError for a bad reference."""
    references = [parse_image(text) for text in dict.fromkeys(images)]

    def ask(reference: registry.ImageReference) -> ManifestAnswer:
        credentials = credentials_for(docker_config, reference.registry)
        return check_manifest(reference, credentials, deadline_seconds=deadline_seconds)

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(references)))) as pool:
        answers = list(pool.map(ask, references))
    findings, unreachable = [], {}
    for reference, answer in zip(references, answers, strict=True):
        if answer.status == UNREACHABLE:
            unreachable.setdefault(reference.registry, ([], answer.detail))[0].append(reference.text)
        elif answer.status == FOUND:
            findings.append(ImageFinding((reference.text,), FOUND, "", answer.digest))
        else:
            findings.append(ImageFinding((reference.text,), answer.status, _line(reference, answer)))
    for host, (texts, detail) in unreachable.items():
        line = (
            f"registry {host} cannot be reached from here ({detail}): not checked: {', '.join(texts)} (check them "
            "where the cluster pulls from, e.g. `kfp-finetune doctor`)"
        )
        findings.append(ImageFinding(tuple(texts), UNREACHABLE, line))
    return findings


def report_findings(findings: Iterable[ImageFinding], command: str, stream) -> bool:
    """Prints one line per problem (``error:`` or ``warning:``); returns whether an image is missing or refused."""
    failed = False
    for finding in findings:
        if finding.status == FOUND:
            continue
        failed = failed or finding.failed
        print(f"kfp-finetune {command}: {'error' if finding.failed else 'warning'}: {finding.line}", file=stream)
    return failed
