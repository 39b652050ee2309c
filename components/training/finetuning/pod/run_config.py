"""Moved to :mod:`components.training.finetuning.contract`; this re-export goes once the other branches merge."""

from components.training.finetuning.contract import *  # noqa: F403
from components.training.finetuning.contract import TrainingOptions as Hyperparameters  # noqa: F401
