"""Moved to :mod:`components.training.finetuning.contract`; this re-export goes once the other branches merge."""

from components.training.finetuning.contract import POD_MODULES  # noqa: F401
