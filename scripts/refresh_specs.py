"""Refresh the upstream specifications vendored in ``tests/specs/`` (CRD schemas, the Model Registry OpenAPI document).

The tests validate manifests and registry requests against these files, so they are kept in the repository, byte for
byte as upstream publishes them, and ``tests/specs/SOURCE.md`` names each one's project, tag or commit, path, licence
and SHA-256. This script downloads each file at the pinned reference, writes it atomically and rewrites the checksum
table of ``SOURCE.md``; ``--check`` only verifies the vendored files against the recorded checksums (offline).

Usage::

    python scripts/refresh_specs.py           # download every spec at its pinned reference (SPECS_PINNED below)
    python scripts/refresh_specs.py --check   # offline: the vendored files match SOURCE.md

To move a pin (a new Trainer release, say), edit its reference in ``SPECS_PINNED``, run the script, run the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import re
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECS = REPO_ROOT / "tests" / "specs"
SOURCE_MD = SPECS / "SOURCE.md"


@dataclasses.dataclass(frozen=True)
class Spec:
    """One vendored upstream file."""

    repository: str  # GitHub owner/name
    ref: str  # tag or commit
    upstream_path: str
    local_path: str  # relative to tests/specs


SPECS_PINNED = (
    Spec(
        "kubeflow/trainer",
        "v2.3.0",
        "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
        "crds/trainer.kubeflow.org_trainjobs.yaml",
    ),
    Spec(
        "kubeflow/training-operator",
        "v1.9.0",
        "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
        "crds/kubeflow.org_pytorchjobs.yaml",
    ),
    Spec(
        "opendatahub-io/trainer",
        "085da3d171603e1a1e90eeebf8a9b4537576f993",
        "charts/kubeflow-trainer/crds/trainer.kubeflow.org_trainjobs.yaml",
        "crds/odh-3.3/trainer.kubeflow.org_trainjobs.yaml",
    ),
    Spec(
        "opendatahub-io/trainer",
        "085da3d171603e1a1e90eeebf8a9b4537576f993",
        "charts/kubeflow-trainer/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "crds/odh-3.3/trainer.kubeflow.org_clustertrainingruntimes.yaml",
    ),
    Spec(
        "opendatahub-io/trainer",
        "085da3d171603e1a1e90eeebf8a9b4537576f993",
        "manifests/rhoai/runtimes/training_hub.yaml",
        "crds/odh-3.3/training_hub.yaml",
    ),
    Spec(
        "opendatahub-io/trainer",
        "d063877c480bbd9a35512691ded96c97d8937b44",
        "manifests/rhoai/runtimes/training_hub.yaml",
        "crds/odh-3.5.0/training_hub.yaml",
    ),
    Spec(
        "kubeflow/model-registry",
        "bf4395a661eca40aa4833a2e900b09bee0ce3fff",
        "api/openapi/model-registry.yaml",
        "openapi/model-registry.yaml",
    ),
    Spec(
        "kserve/kserve",
        "v0.15.2",
        "config/crd/full/serving.kserve.io_inferenceservices.yaml",
        "crds/serving.kserve.io_inferenceservices.yaml",
    ),
    Spec(
        "kserve/kserve",
        "v0.15.2",
        "config/crd/full/serving.kserve.io_servingruntimes.yaml",
        "crds/serving.kserve.io_servingruntimes.yaml",
    ),
    Spec(
        "trustyai-explainability/trustyai-service-operator",
        "11c335b879fcfcbd2acd9c572d12a06976d985d8",
        "config/components/lmes/crd/trustyai.opendatahub.io_lmevaljobs.yaml",
        "crds/trustyai.opendatahub.io_lmevaljobs.yaml",
    ),
    Spec(
        "opendatahub-io/opendatahub-operator",
        "v3.0.0",
        "config/crd/bases/infrastructure.opendatahub.io_hardwareprofiles.yaml",
        "crds/infrastructure.opendatahub.io_hardwareprofiles.yaml",
    ),
    Spec(
        "eval-hub/eval-hub",
        "v1.0.1",
        "docs/openapi.yaml",
        "openapi/eval-hub.yaml",
    ),
)

_ROW = re.compile(r"^\| `(?P<path>[^`]+)` \|.*\| `(?P<sha>[0-9a-f]{64})` \|$", re.M)


def sha256(path: Path) -> str:
    """The hex SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded_checksums() -> dict[str, str]:
    """``{local_path: sha256}`` as recorded in ``SOURCE.md``."""
    return {m["path"]: m["sha"] for m in _ROW.finditer(SOURCE_MD.read_text())}


def check() -> list[str]:
    """Every vendored file that is missing or differs from its recorded checksum, as one line each."""
    problems = []
    recorded = recorded_checksums()
    for spec in SPECS_PINNED:
        path = SPECS / spec.local_path
        if spec.local_path not in recorded:
            problems.append(f"{spec.local_path}: no checksum row in {SOURCE_MD.name}")
        elif not path.is_file():
            problems.append(f"{spec.local_path}: missing (run scripts/refresh_specs.py)")
        elif sha256(path) != recorded[spec.local_path]:
            problems.append(f"{spec.local_path}: differs from the checksum in {SOURCE_MD.name}")
    return problems


def table(specs: tuple[Spec, ...]) -> str:
    """The checksum table of ``SOURCE.md``."""
    lines = ["| file | upstream | reference | path upstream | sha256 |", "|---|---|---|---|---|"]
    for spec in specs:
        digest = sha256(SPECS / spec.local_path)
        lines.append(
            f"| `{spec.local_path}` | {spec.repository} | `{spec.ref}` | `{spec.upstream_path}` | `{digest}` |"
        )
    return "\n".join(lines)


def download(spec: Spec) -> None:
    """Fetch one file at its pinned reference and replace the vendored copy atomically."""
    url = f"https://raw.githubusercontent.com/{spec.repository}/{spec.ref}/{spec.upstream_path}"
    target = SPECS / spec.local_path
    target.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (a fixed https URL)
        body = response.read()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"{spec.local_path}: {spec.repository}@{spec.ref} ({len(body):,} bytes)")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only verify the vendored files (offline)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or f"{len(SPECS_PINNED)} vendored specs match {SOURCE_MD.name}")
        return 1 if problems else 0
    for spec in SPECS_PINNED:
        download(spec)
    text = SOURCE_MD.read_text()
    start = text.index("| file | upstream |")
    end = text.index("\n\n", start)
    SOURCE_MD.write_text(text[:start] + table(SPECS_PINNED) + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
