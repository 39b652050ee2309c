"""A validated ``train_model`` run, and what it produces: the launcher's checkpoint, then the component's result."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from components.training.finetuning.config import TrainingConfig, TrainModelRequest
from components.training.finetuning.manifests.names import job_name


@dataclasses.dataclass
class TrainModelResult:
    """What a ``train_model`` run produced; ``checkpoint_path``: where the final checkpoint really lives."""

    model_dir: Path
    checkpoint_path: str
    summary: dict[str, float]
    records: list[dict[str, Any]]
    model_metadata: dict[str, Any]
    job_name: str = ""

    job_kind: str = ""


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A validated run: what to train on, where (the workspace, or a temporary directory), as which KFP run and task."""

    request: TrainModelRequest
    config: TrainingConfig
    data_file: Path
    eval_file: Path | None
    task_config: Any
    run_id: str
    task_name: str
    workspace: Path

    @property
    def launcher(self) -> str:
        """The ``training_launcher`` argument: ``trainjob``, ``pytorchjob``, ``auto`` or ``local``."""
        return self.request.job.launcher

    @property
    def run_dir(self) -> Path:
        """Named like the job: stable per run and task, so that a retried task resumes from its checkpoints."""
        return self.workspace / "train_model" / job_name(self.run_id, self.task_name)


@dataclasses.dataclass
class LauncherRun:
    """What a launcher produced (internal): the final checkpoint, the step records and facts for the metadata."""

    final_dir: Path
    records: list[dict[str, Any]]
    train_seconds: float
    job_name: str = ""
    extra_metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_loss: float | None = None
    launcher: str = ""
    base_eval_loss: float | None = None

    job_kind: str = ""
    rewards: list[float] = dataclasses.field(default_factory=list)  # GRPO: the mean reward of each iteration
