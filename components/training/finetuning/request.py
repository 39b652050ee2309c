"""``train_model``'s arguments, as its wrapper received them, into one :class:`~.config.TrainModelRequest`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components._common.arguments import request_from_arguments
from components.training.finetuning.config import TrainModelRequest

#: The output artifacts: handed to ``run_train_model`` by the wrapper, not part of the request.
OUTPUTS = ("output_model", "output_metrics", "output_loss_chart")


def train_model_request(arguments: Mapping[str, Any]) -> TrainModelRequest:
    """Every argument but the outputs, under its own name (inputs, passthrough and parameters alike).

    Raises:
        TypeError: ``arguments`` lacks a field of the request, or has a name that is neither a field nor an output.
    """
    return request_from_arguments("train_model", TrainModelRequest, arguments, OUTPUTS)
