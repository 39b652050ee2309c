"""A run's inputs: datasets, PVC mounts, an ``oci://`` base model pulled once, and the pods' code on the PVC."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from components._common import base_model as workspace_copy
from components._common.artifacts import find_artifact_file
from components._common.dataset_metadata import read_dataset_metadata
from components._common.files import replace_dir
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.plan import RunPlan


def stage_base_model(plan: RunPlan, log: Any) -> tuple[str | None, dict[str, str]]:
    """The base model's copy on the workspace: one an earlier step staged, else an ``oci://`` model pulled here.

    Returns:
        ``(local model directory, lineage facts)``, or ``(None, {})`` when the pods download the base model.

    Raises:
        BaseModelError: The model cannot be pulled (one line naming the reference and the fix).
    """
    base_model = plan.config.base_model
    if not base_model.startswith("oci://") and workspace_copy.staged_base_model(base_model, plan.workspace) is None:
        return None, {}
    oci = plan.request.oci
    staged = workspace_copy.stage_base_model(
        base_model,
        plan.workspace,
        os.environ,
        parameter="training_base_model",
        oci_insecure=oci.insecure,
        oci_ca_bundle=oci.ca_bundle,
        log=log,
    )
    return str(staged.path), staged.facts


def dataset_facts(artifact: Any) -> dict[str, str]:
    """``dataset_uri`` and ``dataset_sha256``: from ``dataset_download``'s metadata, else the artifact's URI and hash.

    Raises:
        DatasetMetadataError: The metadata claims the schema but breaks it (names the field).
    """
    described = read_dataset_metadata(getattr(artifact, "metadata", None), "train_model input dataset")
    if described is not None:
        return {"dataset_uri": described.dataset_uri, "dataset_sha256": described.dataset_sha256}
    data_file = find_artifact_file(artifact.path, "dataset", prefer="train")
    with data_file.open("rb") as handle:
        sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"dataset_uri": str(artifact.uri), "dataset_sha256": sha256}


def eval_file_of(eval_dataset: Any) -> Path | None:
    """The eval JSONL, or ``None`` when there is no eval dataset or it is empty (e.g. ``train_split_ratio=1.0``)."""
    if eval_dataset is None or not getattr(eval_dataset, "path", None) or not Path(eval_dataset.path).exists():
        return None
    data_file = find_artifact_file(eval_dataset.path, "eval_dataset", prefer="eval")
    with data_file.open("rb") as handle:  # streamed: the file may be large, and is checked (UTF-8 included) later
        return data_file if any(line.strip() for line in handle) else None


def pvc_mounts(task_config: Any) -> dict[str, str]:
    """Mount path by PVC claim name, from the task's volume passthrough (for ``pvc://`` model URIs)."""
    volumes = list(getattr(task_config, "volumes", None) or [])
    mounts = list(getattr(task_config, "volume_mounts", None) or [])
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v}
    return {claims[m["name"]]: m["mountPath"] for m in mounts if m.get("name") in claims}


def dataset_input(dataset: Any, dataset_path: str, pvc_path: str) -> Any:
    """The wired ``dataset`` artifact, else ``dataset_path`` (absolute, or relative to ``pvc_path``) as one.

    Raises:
        TrainingConfigError: Neither is given, both are, or the path is a remote URI or does not exist.
    """
    import types

    path = (dataset_path or "").strip()
    if dataset is not None and path:
        raise TrainingConfigError(
            f"train_model parameters dataset and dataset_path={path!r}: give one of them, not both"
        )
    if dataset is not None:
        return dataset
    if not path:
        raise TrainingConfigError(
            "train_model parameter dataset: required; wire a dataset artifact (e.g. dataset_download's "
            "train_dataset) or give a JSONL path"
        )
    if "://" in path:
        raise TrainingConfigError(
            f"train_model parameter dataset={path!r}: a string dataset must be a path on the workspace or in the "
            "image; download remote data with the dataset_download component and wire its train_dataset output"
        )
    resolved = Path(path) if Path(path).is_absolute() or not pvc_path else Path(pvc_path) / path
    if not resolved.exists():
        raise TrainingConfigError(
            f"train_model parameter dataset={path!r}: {resolved} does not exist"
            + ("" if Path(path).is_absolute() else " (relative paths are read from pvc_path, the workspace)")
        )
    return types.SimpleNamespace(path=str(resolved), uri=str(resolved), metadata={})


def module_file(module: str) -> Path:
    """The source file of an importable module (raises ``FileNotFoundError`` naming it when it is not importable)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"module {module} is not importable here, so it cannot be staged for the pods")
    return Path(spec.origin)


def stage_code_tree(target: Path, modules: Iterable[str]) -> Path:
    """Writes ``modules`` at their package paths under ``target`` (replaced whole; empty ``__init__.py``s)."""

    def write(root: Path) -> None:
        for module in modules:
            parts = module.split(".")
            destination = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(module_file(module), destination)
            for depth in range(1, len(parts)):
                root.joinpath(*parts[:depth], "__init__.py").write_text('"""Staged for the training pods."""\n')

    return replace_dir(Path(target), write)


def script_running(module: str, code_dir_name: str) -> str:
    """A script running ``module`` as ``__main__`` from the code tree ``code_dir_name`` beside it (stdlib only)."""
    return (
        f'"""Runs {module} from the code staged in ./{code_dir_name}/ (written by train_model)."""\n\n'
        "import runpy\nimport sys\nfrom pathlib import Path\n\n"
        f'sys.path.insert(0, str(Path(__file__).resolve().parent / "{code_dir_name}"))\n'
        f'runpy.run_module("{module}", run_name="__main__", alter_sys=True)\n'
    )
