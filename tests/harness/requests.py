"""Typed component requests for tests: the component's own defaults (read from its signature) plus overrides.

Every default lives once, in the component's signature; tests that call a ``run_*`` function directly build its
request here rather than restating any default.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any


def component_defaults(component: Any) -> dict[str, Any]:
    """The default of every parameter of a KFP component that has one, from ``component.python_func``."""
    parameters = inspect.signature(component.python_func).parameters
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def train_model_request(**arguments: Any) -> Any:
    """A ``TrainModelRequest``: ``train_model``'s defaults, no task config, and ``arguments`` (component names)."""
    from components.training.finetuning.component import train_model
    from components.training.finetuning.config import TrainModelRequest

    return TrainModelRequest(**{"task_config": None, **component_defaults(train_model), **arguments})


def training_config(**fields: Any) -> Any:
    """A validated ``TrainingConfig``: ``train_model``'s defaults with ``fields`` (``TrainingConfig`` names) changed.

    Raises:
        TrainingConfigError: A field breaks a rule (named as the ``train_model`` parameter).
    """
    from components.training.finetuning.config import TrainingConfig

    defaults = TrainingConfig.from_request(train_model_request(training_base_model=fields.get("base_model", "m")))
    config = dataclasses.replace(defaults, **fields)
    config.validate("train_model")
    return config


def dataset_metadata(dataset_uri: str, **fields: Any) -> dict[str, Any]:
    """A dataset artifact's metadata as ``dataset_download`` writes it, for ``dataset_uri`` (other facts: fixed)."""
    from components._common.dataset_metadata import DATASET_METADATA_VERSION, DatasetMetadata

    values: dict[str, Any] = {
        "dataset_metadata_version": DATASET_METADATA_VERSION,
        "dataset_uri": dataset_uri,
        "dataset_revision": "rev-1",
        "dataset_sha256": "0" * 64,
        "dataset_rows": 10,
        "dataset_format": "messages",
        "dataset_split": "train",
        "dataset_split_seed": 7,
    }
    return DatasetMetadata(**{**values, **fields}).to_metadata()
